/**
 * The platform stores' shared conformance cases, against the memory stores and PostgreSQL (a random
 * schema per test, dropped after). The PostgreSQL cases need DATABASE_URL (CI sets it); without a
 * server they report themselves skipped with the reason.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { MemoryOAuthStore, MemorySeenEventStore } from '../../src/platform/index.js';
import { migratePlatformPostgres, postgresOAuthStore, postgresSeenEventStore } from '../../src/store/postgres/index.js';
import { migrateCommand } from '../../src/testkit/cli/migrate.js';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';
import { oauthStoreContract, seenStoreContract } from './store-contract.js';

oauthStoreContract('memory', { open: async () => ({ store: new MemoryOAuthStore(), close: async () => undefined }) });
seenStoreContract('memory', { open: async () => ({ store: new MemorySeenEventStore(), close: async () => undefined }) });

const skip = await postgresSkipReason();
if (skip !== false) console.log(`PostgreSQL platform store tests skipped: ${skip}`);
const admin = skip === false ? new pg.Pool({ connectionString: DATABASE_URL, max: 2 }) : undefined;
after(async () => {
  await admin?.end();
});

function newSchema(): string {
  return `em_platform_${randomBytes(6).toString('hex')}`;
}

async function dropSchema(schema: string): Promise<void> {
  await admin!.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** A store in a fresh schema, dropped when the case ends. */
function inFreshSchema<T extends { ready(): Promise<void>; close(): Promise<void> }>(make: (schema: string) => T) {
  return {
    open: async () => {
      const schema = newSchema();
      const store = make(schema);
      await store.ready();
      return { store, close: async () => { await store.close(); await dropSchema(schema); } };
    },
  };
}

// Pools as large as the concurrent cases, so that they really run at once.
oauthStoreContract('postgres', inFreshSchema((schema) => postgresOAuthStore({ connectionString: DATABASE_URL, schema, logger: false, poolSize: 25 })), { skip });
seenStoreContract('postgres', inFreshSchema((schema) => postgresSeenEventStore({ connectionString: DATABASE_URL, schema, logger: false, poolSize: 35 })), { skip });

describe('platform PostgreSQL stores: set-up', { skip }, () => {
  it('share a given pool and schema, migrate once under concurrent starts, and leave the pool to its owner', async () => {
    const schema = newSchema();
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    try {
      const stores = [postgresOAuthStore({ pool, schema, logger: false }), postgresSeenEventStore({ pool, schema, logger: false }), postgresOAuthStore({ pool, schema, logger: false })];
      await Promise.all(stores.map((store) => store.ready()));
      const versions = await pool.query(`SELECT version FROM "${schema}".platform_schema_migrations`);
      assert.equal(versions.rowCount, 1);
      await Promise.all(stores.map((store) => store.close()));
      assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1, 'a given pool stays open');
    } finally {
      await pool.end();
      await dropSchema(schema);
    }
  });

  it('with migrate: false refuses to work on a schema without the platform tables, naming the command', async () => {
    const schema = newSchema();
    const store = postgresOAuthStore({ connectionString: DATABASE_URL, schema, logger: false, migrate: false });
    try {
      await assert.rejects(store.ready(), /embedded-marketplace migrate --schema/);
      const report = await migratePlatformPostgres({ connectionString: DATABASE_URL, schema, logger: false });
      assert.deepEqual(report, { schema, version: 1, applied: [1] });
      await store.ready();
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  it('the migrate command applies the platform migrations too', async () => {
    const schema = newSchema();
    let stdout = '';
    const io = { stdout: { write: (text: string) => void (stdout += text) }, stderr: { write: () => undefined }, env: { DATABASE_URL: DATABASE_URL } };
    try {
      const code = await migrateCommand(['--schema', schema], io as unknown as Parameters<typeof migrateCommand>[1]);
      assert.equal(code, 0);
      assert.match(stdout, /platform stores at version 1: applied 1/);
      const tables = await admin!.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema]);
      const names = tables.rows.map((row: { table_name: string }) => row.table_name);
      for (const table of ['oauth_records', 'oauth_revoked_grants', 'seen_events', 'resources']) assert.ok(names.includes(table), table);
    } finally {
      await dropSchema(schema);
    }
  });

  it('refuses bad options at construction, never echoing the connection string', () => {
    assert.throws(() => postgresOAuthStore({}), /exactly one of "pool".*"connectionString"/);
    assert.throws(() => postgresOAuthStore({ connectionString: 'mysql://u:hunter2@h/db' }), (error: Error) => /postgres:\/\//.test(error.message) && !error.message.includes('hunter2'));
    assert.throws(() => postgresSeenEventStore({ connectionString: DATABASE_URL, schema: 'Bad-Name' }), /schema/);
    assert.throws(() => postgresSeenEventStore({ connectionString: DATABASE_URL, encryptionKey: 'x' } as never), /unknown option "encryptionKey"/);
  });
});
