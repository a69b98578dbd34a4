import type { Pool } from 'pg';
import { asOptionsObject, rejectUnknownKeys } from '../../lib/options.js';
import { applyPostgresMigrations, type MigrationLedger } from '../migrations/apply-postgres.js';
import { POSTGRES_MIGRATIONS } from '../migrations/postgres.js';
import { latestVersion, type Migration } from '../migrations/types.js';
import { openConnection, type Connection, type PostgresConnectionOptions } from './connection.js';
import { inTransaction } from './transaction.js';

/** What {@link migratePostgres} did. */
export interface MigrationReport {
  schema: string;
  /** Schema version after the run. */
  version: number;
  /** Versions applied by this run (empty when already up to date). */
  applied: number[];
}

/**
 * The provider store's ledger. First half of the advisory lock key ("EM"); the second is
 * hashtext(schema), so stores in different schemas of one database migrate independently.
 */
export const STORE_LEDGER: MigrationLedger = { table: 'schema_migrations', lockNamespace: 0x454d, label: 'postgresStore' };

/** Applies the pending `migrations` of `ledger` in one transaction and answers what it did. */
export async function applyMigrations(connection: Connection, ledger: MigrationLedger, migrations: readonly Migration[]): Promise<MigrationReport> {
  const { pool, schema, logger } = connection;
  const latest = latestVersion(migrations);
  const { current, applied } = await inTransaction(pool, logger, ledger.label, (client) => applyPostgresMigrations(client, schema, ledger, migrations, logger));
  if (current > latest) {
    logger.warn({ schemaVersion: current, supported: latest }, `${ledger.label}: schema "${schema}" was migrated by a newer release (version ${current}, this one knows ${latest}); continuing, as migrations are additive`);
  }
  return { schema, version: Math.max(current, latest), applied };
}

/** The version recorded in `ledger` (0 when its table does not exist yet). */
export async function schemaVersion(pool: Pool, schema: string, ledger: MigrationLedger): Promise<number> {
  try {
    const result = await pool.query<{ version: number | null }>(`SELECT max(version) AS version FROM "${schema}".${ledger.table}`);
    return result.rows[0]?.version ?? 0;
  } catch (error) {
    if ((error as { code?: unknown }).code !== '42P01') throw error;
    return 0;
  }
}

/**
 * Applies the store's pending migrations, for a deploy step or a CLI, and answers what it did. Safe
 * to run from several processes at once (an advisory lock serializes them) and to repeat.
 *
 * @example
 * ```ts
 * import { migratePostgres } from 'embedded-marketplace/stores/postgres';
 * const report = await migratePostgres({ connectionString: process.env.DATABASE_URL! });
 * console.log(`schema ${report.schema} at version ${report.version}`);
 * ```
 */
export async function migratePostgres(options: PostgresConnectionOptions): Promise<MigrationReport> {
  const opts = asOptionsObject('migratePostgres', options);
  rejectUnknownKeys('migratePostgres', opts, ['pool', 'connectionString', 'schema', 'logger']);
  const connection = openConnection('migratePostgres', opts, undefined);
  try {
    return await applyMigrations(connection, STORE_LEDGER, POSTGRES_MIGRATIONS);
  } finally {
    if (connection.ownsPool) await connection.pool.end();
  }
}
