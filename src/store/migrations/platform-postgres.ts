import type { Migration } from './types.js';

/**
 * PostgreSQL schema of the platform-side stores (`postgresOAuthStore`, `postgresSeenEventStore`).
 * Versioned apart from the provider store's migrations (table `platform_schema_migrations`), so a
 * platform and a provider can share one schema or not, and either can be deployed alone. Each
 * migration runs with `search_path` set to the store's schema. Times are `bigint` epoch milliseconds
 * passed in by the caller; digests and ids use the "C" collation.
 */
export const PLATFORM_POSTGRES_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'platform stores',
    sql: `
CREATE TABLE oauth_records (
  kind text NOT NULL CHECK (kind IN ('code', 'access', 'refresh')),
  hash text COLLATE "C" NOT NULL,
  grant_id text COLLATE "C" NOT NULL,
  client_id text COLLATE "C" NOT NULL,
  sub text COLLATE "C" NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint,
  record json NOT NULL,
  PRIMARY KEY (kind, hash)
);
CREATE INDEX oauth_records_by_grant ON oauth_records (grant_id);
CREATE INDEX oauth_records_by_sub ON oauth_records (sub);
CREATE INDEX oauth_records_by_expiry ON oauth_records (expires_at);
CREATE INDEX oauth_codes_outstanding ON oauth_records (sub, expires_at) WHERE kind = 'code' AND used_at IS NULL;

CREATE TABLE oauth_revoked_grants (
  grant_id text COLLATE "C" PRIMARY KEY,
  until bigint NOT NULL
);
CREATE INDEX oauth_revoked_grants_by_until ON oauth_revoked_grants (until);

CREATE TABLE seen_events (
  key text COLLATE "C" PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('claimed', 'done')),
  owner text NOT NULL,
  until bigint NOT NULL
);
CREATE INDEX seen_events_by_until ON seen_events (until);
`,
  },
];
