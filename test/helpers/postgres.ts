import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { postgresStore } from '../../src/store/postgres/index.js';

/** The conventional local server, used when DATABASE_URL is unset and it answers. */
export const LOCAL_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';
const FROM_ENV = process.env.DATABASE_URL !== undefined && process.env.DATABASE_URL !== '';

/** DATABASE_URL, or the conventional local server when it is unset (probed by {@link postgresSkipReason}). */
export const DATABASE_URL: string = FROM_ENV ? process.env.DATABASE_URL! : LOCAL_DATABASE_URL;

let probe: Promise<string | false> | undefined;

/**
 * `false` when the server answers; otherwise why the PostgreSQL tests are skipped. The probe runs
 * once per test process, and the reason is printed once (on stderr) rather than per test.
 */
export function postgresSkipReason(): Promise<string | false> {
  probe ??= probeServer().then((reason) => {
    if (reason !== false) process.stderr.write(`# PostgreSQL tests skipped: ${reason}\n`);
    return reason;
  });
  return probe;
}

async function probeServer(): Promise<string | false> {
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return false;
  } catch (error) {
    if (!FROM_ENV) {
      return `DATABASE_URL is not set and no PostgreSQL answers at 127.0.0.1:5432 (${(error as Error).message}); start one or set DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)`;
    }
    // The URL may carry a password: name only the error.
    return `PostgreSQL at DATABASE_URL is unreachable (${(error as Error).message}): start it or unset DATABASE_URL`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Drops `schema` and everything in it, over a connection of its own. */
export async function dropSchema(schema: string): Promise<void> {
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end();
  }
}

/** A fresh schema name: one test's own. */
export const newSchema = (): string => `em_test_${randomBytes(6).toString('hex')}`;

/**
 * A provider store in a schema of its own (random unless given; pass one schema to several calls
 * for several instances over one database); `cleanup` drops the schema (the caller closes the store).
 */
export function openPostgresStore(encryptionKey: string, options: { schema?: string; poolSize?: number } = {}) {
  const { schema = newSchema(), poolSize = 4 } = options;
  const store = postgresStore({ connectionString: DATABASE_URL, schema, encryptionKey, logger: false, poolSize });
  return { store, schema, cleanup: () => dropSchema(schema) };
}
