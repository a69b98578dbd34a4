import type { Migration } from './types.js';

/**
 * PostgreSQL schema, kept as TypeScript so it compiles into dist/ with the adapter. Each migration
 * runs with `search_path` set to the store's schema, so the SQL names no schema itself.
 *
 * Choices: times are `bigint` milliseconds (the contract passes times in; the database clock is never
 * read); JSON is `json`, which keeps the text exactly as written (key order included), unlike `jsonb`;
 * ids use the "C" collation so ordering is bytewise whatever the database's locale; secrets are
 * sealed `bytea` (see crypto.ts).
 */
export const POSTGRES_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE resources (
  id text COLLATE "C" PRIMARY KEY,
  product text NOT NULL,
  plan text NOT NULL,
  region text NOT NULL,
  features json NOT NULL,
  message text NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);

CREATE TABLE credentials (
  id text COLLATE "C" PRIMARY KEY,
  resource_id text COLLATE "C" NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
  sealed_values bytea NOT NULL,
  message text NOT NULL,
  created_at bigint NOT NULL
);
CREATE INDEX credentials_by_resource ON credentials (resource_id, created_at, id);

CREATE TABLE operations (
  key text COLLATE "C" PRIMARY KEY,
  kind text NOT NULL,
  target_id text NOT NULL,
  fingerprint text NOT NULL,
  state text NOT NULL CHECK (state IN ('running', 'pending')),
  token text NOT NULL,
  owner text NOT NULL,
  lease_expires_at bigint NOT NULL,
  request json NOT NULL,
  created_at bigint NOT NULL,
  message text,
  callback_id text,
  callback_url text,
  deadline_at bigint
);
CREATE INDEX operations_pending ON operations (created_at, key) WHERE state = 'pending';

CREATE TABLE deliveries (
  id text COLLATE "C" PRIMARY KEY,
  callback_id text NOT NULL,
  url text NOT NULL,
  sealed_payload bytea NOT NULL,
  created_at bigint NOT NULL,
  deadline_at bigint NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'failed')),
  attempts integer NOT NULL,
  next_attempt_at bigint NOT NULL,
  last_error text,
  claimed_by text,
  claim_expires_at bigint
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';

CREATE TABLE usage_entries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  resource_id text COLLATE "C" NOT NULL,
  feature text NOT NULL,
  quantity double precision NOT NULL,
  at bigint NOT NULL
);
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
  entity text NOT NULL CHECK (entity IN ('resource', 'credential')),
  id text COLLATE "C" NOT NULL,
  deleted_at bigint NOT NULL,
  PRIMARY KEY (entity, id)
);
CREATE INDEX tombstones_by_time ON tombstones (deleted_at);
`,
  },
];
