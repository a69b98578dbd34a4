import type { Migration } from './types.js';

/**
 * SQLite schema, kept as TypeScript so it compiles into dist/ with the adapter (no file to locate at
 * run time). Times are integer milliseconds; JSON is TEXT; secrets are sealed BLOBs (see crypto.ts).
 * STRICT tables make SQLite reject a value of the wrong type instead of storing it silently.
 */
export const SQLITE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE resources (
  id TEXT PRIMARY KEY,
  product TEXT NOT NULL,
  plan TEXT NOT NULL,
  region TEXT NOT NULL,
  features TEXT NOT NULL,
  message TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE credentials (
  id TEXT PRIMARY KEY,
  resource_id TEXT NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
  sealed_values BLOB NOT NULL,
  message TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX credentials_by_resource ON credentials (resource_id, created_at, id);

CREATE TABLE operations (
  key TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  target_id TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'pending')),
  token TEXT NOT NULL,
  owner TEXT NOT NULL,
  lease_expires_at INTEGER NOT NULL,
  request TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  message TEXT,
  callback_id TEXT,
  callback_url TEXT,
  deadline_at INTEGER
) STRICT;
CREATE INDEX operations_pending ON operations (created_at) WHERE state = 'pending';

CREATE TABLE deliveries (
  id TEXT PRIMARY KEY,
  callback_id TEXT NOT NULL,
  url TEXT NOT NULL,
  sealed_payload BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  deadline_at INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'failed')),
  attempts INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  last_error TEXT,
  claimed_by TEXT,
  claim_expires_at INTEGER
) STRICT;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';

CREATE TABLE usage_entries (
  id INTEGER PRIMARY KEY,
  resource_id TEXT NOT NULL,
  feature TEXT NOT NULL,
  quantity REAL NOT NULL,
  at INTEGER NOT NULL
) STRICT;
CREATE INDEX usage_entries_by_resource ON usage_entries (resource_id, at);
CREATE INDEX usage_entries_by_time ON usage_entries (at);
`,
  },
  {
    version: 2,
    name: 'tombstones',
    // One row per deleted resource or credential, kept so that a replayed PUT cannot re-create it
    // (ids are never reused). Deletes and the tombstone checks of commits use the primary key;
    // pruneTombstones uses the time index.
    sql: `
CREATE TABLE tombstones (
  entity TEXT NOT NULL CHECK (entity IN ('resource', 'credential')),
  id TEXT NOT NULL,
  deleted_at INTEGER NOT NULL,
  PRIMARY KEY (entity, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX tombstones_by_time ON tombstones (deleted_at);
`,
  },
  {
    version: 3,
    name: 'operation table',
    // parent_id: the resource a credential operation belongs to, so that a claim can apply the
    // parent/child exclusion and a resource's deletion can find its pending credential operations
    // (backfilled for operations left by the previous release). deliveries.payload: a payload that
    // holds no secret (the error callback of such an orphaned operation), written by SQL alone; the
    // sealed column then holds an empty blob. replays: the answer to each executed signed request.
    sql: `
ALTER TABLE operations ADD COLUMN parent_id TEXT;
UPDATE operations SET parent_id = CASE
    WHEN kind = 'provisionCredentials' THEN json_extract(request, '$.resourceId')
    ELSE (SELECT resource_id FROM credentials WHERE credentials.id = operations.target_id) END
  WHERE key LIKE 'credential:%';
CREATE INDEX operations_by_parent ON operations (parent_id) WHERE parent_id IS NOT NULL;

ALTER TABLE deliveries ADD COLUMN payload TEXT;

CREATE TABLE replays (
  request_id TEXT PRIMARY KEY,
  status INTEGER NOT NULL,
  sealed_body BLOB,
  expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX replays_by_expiry ON replays (expires_at);
`,
  },
  {
    version: 4,
    name: 'plain replay bodies',
    // A recorded answer that holds no secret (every answer but a credential set's) is kept as JSON
    // text in replays.body instead of sealed: sealing cost more CPU per request than the rest of the commit.
    sql: `ALTER TABLE replays ADD COLUMN body TEXT;`,
  },
];
