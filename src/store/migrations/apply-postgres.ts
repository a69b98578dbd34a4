import type { Migration } from './types.js';

/** Where a set of migrations records itself, and the advisory lock that serializes its runners. */
export interface MigrationLedger {
  /** Table of applied versions inside the schema (`schema_migrations`, `platform_schema_migrations`). */
  table: string;
  /** First key of `pg_advisory_xact_lock(namespace, hashtext(schema))`: one per ledger. */
  lockNamespace: number;
  /** Names the runner in log lines. */
  label: string;
}

/** The part of a `pg` client a migration run needs. */
interface SqlClient {
  query<R extends object>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

/**
 * Applies `migrations` newer than the ledger's version, inside the caller's transaction (so that a
 * failed migration leaves nothing), and answers the version found and the versions applied.
 * Instances starting together wait on the advisory lock, held until the transaction ends.
 */
export async function applyPostgresMigrations(
  client: SqlClient,
  schema: string,
  ledger: MigrationLedger,
  migrations: readonly Migration[],
  logger: { info(bindings: object, message: string): void },
): Promise<{ current: number; applied: number[] }> {
  await client.query('SELECT pg_advisory_xact_lock($1::integer, hashtext($2))', [ledger.lockNamespace, schema]);
  const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  // Checked first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege even when it exists.
  if (exists.rowCount === 0) await client.query(`CREATE SCHEMA "${schema}"`);
  await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".${ledger.table} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  const row = await client.query<{ version: number | null }>(`SELECT max(version) AS version FROM "${schema}".${ledger.table}`);
  const current = row.rows[0]?.version ?? 0;
  const applied: number[] = [];
  for (const migration of migrations) {
    if (migration.version <= current) continue;
    await client.query(`SET LOCAL search_path TO "${schema}"`);
    await client.query(migration.sql);
    await client.query(`INSERT INTO "${schema}".${ledger.table} (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
    applied.push(migration.version);
    logger.info({ version: migration.version, name: migration.name }, `${ledger.label}: applied migration`);
  }
  return { current, applied };
}
