/**
 * `embedded-marketplace/stores/postgres`: the provider store, its migrations and the platform stores
 * in PostgreSQL. The pieces live by concern beside this file: connection.ts (pool, options, error
 * classification), transaction.ts, migrations.ts, store.ts (postgresStore), batch.ts (one statement
 * for the claims or commits of one tick); the platform stores in ../platform/postgres.ts.
 */
export { postgresStore, type PostgresStore, type PostgresStoreOptions } from './store.js';
export { migratePostgres, type MigrationReport } from './migrations.js';
export { isTransientPostgresError, type PostgresConnectionOptions } from './connection.js';
export { generateEncryptionKey, DecryptionError, MissingEncryptionKeyError, type EncryptionKeyOption, type EncryptionKeyring } from '../crypto.js';
export {
  migratePlatformPostgres,
  postgresOAuthStore,
  postgresSeenEventStore,
  type PlatformPostgresOptions,
  type PlatformPostgresStore,
  type PostgresOAuthStore,
  type PostgresSeenEventStore,
} from '../platform/postgres.js';
