/**
 * Usage periods whose answer never changes: once a period's end plus the grace (`usageGraceMs`,
 * default 1 h) has passed, usage at a time inside it is refused (or, when asked, booked to the
 * current period), so the measures answer for it is the same on every read: on every store, after a
 * restart (the SQLite file reopened, a new PostgreSQL store), from two PostgreSQL instances, and
 * after pruning (within the retention). A fake clock drives every case.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import express from 'express';
import { InvalidOptionsError, marketplaceRouter, memoryStore, UsagePeriodClosedError, type ProviderHandlers } from '../../src/index.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { answerMeasures } from '../../src/core/measures.js';
import { createUsageLedger } from '../../src/core/usage.js';
import { generateEncryptionKey } from '../../src/store/crypto.js';
import { sqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { listen, logCapture, marketplaceClient } from '../helpers/http.js';
import { dropSchema, newSchema, openPostgresStore, postgresSkipReason } from '../helpers/postgres.js';
import { heldBy } from './contract.js';

const KEY = generateEncryptionKey();
const HOUR = 3_600_000;
const at = (iso: string): number => Date.parse(iso);
const logger = createRedactingLogger(logCapture().stream);
const NO_HANDLERS = {} as ProviderHandlers;

/** A clock the test sets by hand. */
function clock(start: string) {
  let now = at(start);
  return {
    now: () => now,
    set(iso: string) {
      now = at(iso);
    },
  };
}

/** One database; each `open` is a new store instance over it (a restart, or another instance). */
interface Database {
  open(): Promise<Store>;
  /** False when a new instance does not see the same data (the memory store). */
  durable: boolean;
  cleanup(): Promise<void>;
}

async function provision(store: Store, id: string, now: number): Promise<void> {
  const op = heldBy(
    await store.claimOperation({
      key: `resource:${id}`, kind: 'provision', targetId: id, fingerprint: 'f', owner: 'test', now, leaseMs: 30_000,
      request: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: {} },
    }),
  );
  await store.commitOperation(op.key, op.token, {
    mutation: { type: 'putResource', resource: { id, product: 'bonnets', plan: 'small', region: 'all::global', features: {}, message: 'Ready', createdAt: now, updatedAt: now } },
  });
}

/** The measures answer as the route sends it (status and body), as JSON text: compared byte for byte. */
async function measures(store: Store, id: string, start: string, end: string): Promise<string> {
  return JSON.stringify(await answerMeasures({ store, handlers: NO_HANDLERS, logger }, id, { period_start: start, period_end: end }));
}

const ID = 'rusageperiods0000000000000001';

interface PeriodCase {
  store: Store;
  time: ReturnType<typeof clock>;
  ledger: ReturnType<typeof createUsageLedger>;
}

/**
 * One case on a fresh database: a store, a clock set to `start`, a usage ledger on both and the
 * resource ID provisioned; `body` runs, the store closes, then `afterClose` (a restart, say) runs;
 * the database is cleaned up whatever happened.
 */
async function periodCase(
  makeDatabase: () => Promise<Database>,
  start: string,
  body: (c: PeriodCase) => Promise<void>,
  afterClose?: (db: Database, time: PeriodCase['time']) => Promise<void>,
): Promise<void> {
  const db = await makeDatabase();
  try {
    const store = await db.open();
    const time = clock(start);
    const ledger = createUsageLedger({ store, now: time.now, logger });
    await provision(store, ID, time.now());
    await body({ store, time, ledger });
    await store.close();
    await afterClose?.(db, time);
  } finally {
    await db.cleanup();
  }
}

function periodCases(name: string, makeDatabase: () => Promise<Database>, skip: string | false = false): void {
  describe(`usage periods: ${name}`, () => {
    it('refuses usage into a closed period, so its answer is the same on every read', { skip }, async () => {
      let closed = '';
      await periodCase(
        makeDatabase,
        '2026-11-10T10:00:00Z',
        async ({ store, time, ledger }) => {
          await ledger.recordUsage(ID, 'requests', 5);
          time.set('2026-11-10T10:30:00Z');
          await ledger.recordUsage(ID, 'requests', 2);
          time.set('2026-11-10T11:30:00Z');
          await ledger.recordUsage(ID, 'requests', 1, new Date('2026-11-10T10:45:00Z')); // late, within the grace
          closed = await measures(store, ID, '2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z');
          assert.deepEqual(JSON.parse(closed), { status: 200, body: { resource_id: ID, period_start: '2026-11-10T10:00:00Z', period_end: '2026-11-10T11:00:00Z', measures: { requests: 8 } } });

          time.set('2026-11-10T12:00:00Z'); // end + 1 h: closed
          const refused = await ledger.recordUsage(ID, 'requests', 50, at('2026-11-10T10:59:59.999Z')).then(() => undefined, (error: unknown) => error);
          assert.ok(refused instanceof UsagePeriodClosedError, `expected UsagePeriodClosedError, got ${String(refused)}`);
          assert.equal(refused.code, 'ERR_USAGE_PERIOD_CLOSED');
          assert.equal(refused.at, at('2026-11-10T10:59:59.999Z'));
          assert.equal(refused.closedBefore, at('2026-11-10T11:00:00Z'));
          assert.match(refused.message, /closed period.*late: 'current-period'/);
          assert.equal(await measures(store, ID, '2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z'), closed);

          // The first instant of the next hour is still open; so is usage booked late on purpose.
          await ledger.recordUsage(ID, 'requests', 3, at('2026-11-10T11:00:00Z'));
          await ledger.recordUsage(ID, 'storage', 4, at('2026-11-10T10:15:00Z'), { late: 'current-period' });
          assert.equal(await measures(store, ID, '2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z'), closed);
          assert.deepEqual(JSON.parse(await measures(store, ID, '2026-11-10T11:00:00Z', '2026-11-10T13:00:00Z')).body.measures, { requests: 3, storage: 4 });
          assert.equal(await measures(store, ID, '2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z'), closed, 'read again');
        },
        async (db, time) => {
          if (!db.durable) return;
          // A restart: a new store instance over the same database, a new ledger (nothing of the rule is kept in memory).
          const reopened = await db.open();
          try {
            time.set('2026-11-11T09:00:00Z');
            const again = createUsageLedger({ store: reopened, now: time.now, logger });
            assert.equal(await measures(reopened, ID, '2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z'), closed);
            await assert.rejects(again.recordUsage(ID, 'requests', 9, at('2026-11-10T10:30:00Z')), UsagePeriodClosedError);
            assert.equal(await measures(reopened, ID, '2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z'), closed);
          } finally {
            await reopened.close();
          }
        },
      );
    });

    it('keeps a period within the retention unchanged when older usage is pruned', { skip }, async () => {
      await periodCase(makeDatabase, '2026-10-31T23:30:00Z', async ({ store, time, ledger }) => {
        await ledger.recordUsage(ID, 'requests', 1);
        time.set('2026-11-01T00:30:00Z');
        await ledger.recordUsage(ID, 'requests', 10);
        time.set('2026-11-20T08:00:00Z');
        await ledger.recordUsage(ID, 'requests', 100);
        time.set('2026-12-02T12:00:00Z');
        const november = await measures(store, ID, '2026-11-01T00:00:00Z', '2026-12-01T00:00:00Z');
        assert.deepEqual(JSON.parse(november).body.measures, { requests: 110 });
        const mixed = await measures(store, ID, '2026-10-31T00:00:00Z', '2026-11-02T00:00:00Z');
        assert.equal(await ledger.prune(), store.pruneUsage === undefined ? 0 : 1);
        // November is the previous billing month on 2 December: kept, and its answer unchanged.
        assert.equal(await measures(store, ID, '2026-11-01T00:00:00Z', '2026-12-01T00:00:00Z'), november);
        // A period reaching before the retention counts what is left (documented in docs/usage.md).
        assert.notEqual(await measures(store, ID, '2026-10-31T00:00:00Z', '2026-11-02T00:00:00Z'), mixed);
      });
    });

    it('answers the features of a period in one order, whatever order they were recorded in', { skip }, async () => {
      await periodCase(makeDatabase, '2026-11-10T10:00:00Z', async ({ store, ledger }) => {
        for (const feature of ['zeta', 'alpha', 'Mid', 'beta-2', 'beta']) await ledger.recordUsage(ID, feature, 1);
        const body = JSON.parse(await measures(store, ID, '2026-11-10T00:00:00Z', '2026-11-11T00:00:00Z')).body as { measures: Record<string, number> };
        assert.deepEqual(Object.keys(body.measures), ['Mid', 'alpha', 'beta', 'beta-2', 'zeta']);
      });
    });
  });
}

periodCases('memory', async () => {
  const store = memoryStore();
  return { open: async () => store, durable: false, cleanup: () => store.close() };
});

const root = mkdtempSync(join(tmpdir(), 'em-usage-'));
after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;
periodCases('sqlite', async () => {
  const path = join(root, `usage-${++files}.db`);
  return { open: async () => sqliteStore({ path, encryptionKey: KEY, logger: false }), durable: true, cleanup: async () => undefined };
});

const pgSkip = await postgresSkipReason();
/** One schema; each `open` is a new PostgreSQL store instance over it. */
async function postgresDatabase(): Promise<Database> {
  const schema = newSchema();
  return {
    async open() {
      const { store } = openPostgresStore(KEY, { schema, poolSize: 2 });
      await store.ready();
      return store;
    },
    durable: true,
    cleanup: () => dropSchema(schema),
  };
}
periodCases('postgres', postgresDatabase, pgSkip);

describe('usage periods: two PostgreSQL instances', () => {
  it('refuse late usage at either instance and answer a closed period the same', { skip: pgSkip }, async () => {
    const db = await postgresDatabase();
    const [a, b] = [await db.open(), await db.open()];
    try {
      const time = clock('2026-11-10T10:10:00Z');
      const ledgerA = createUsageLedger({ store: a, now: time.now, logger });
      const ledgerB = createUsageLedger({ store: b, now: time.now, logger });
      await provision(a, ID, time.now());
      await ledgerA.recordUsage(ID, 'requests', 4);
      await ledgerB.recordUsage(ID, 'requests', 6);
      await ledgerB.recordUsage(ID, 'storage', 1);
      time.set('2026-11-10T11:59:59.999Z');
      await ledgerB.recordUsage(ID, 'requests', 1, at('2026-11-10T10:59:59.999Z')); // the last instant of the grace
      time.set('2026-11-10T12:00:00Z');
      const period = ['2026-11-10T10:00:00Z', '2026-11-10T11:00:00Z'] as const;
      const fromA = await measures(a, ID, ...period);
      assert.deepEqual(JSON.parse(fromA).body.measures, { requests: 11, storage: 1 });
      assert.equal(await measures(b, ID, ...period), fromA);
      await assert.rejects(ledgerA.recordUsage(ID, 'requests', 1, at('2026-11-10T10:59:59.999Z')), UsagePeriodClosedError);
      await assert.rejects(ledgerB.recordUsage(ID, 'storage', 1, at('2026-11-10T10:00:00Z')), UsagePeriodClosedError);
      await ledgerB.recordUsage(ID, 'storage', 1, at('2026-11-10T10:00:00Z'), { late: 'current-period' });
      assert.equal(await measures(a, ID, ...period), fromA);
      assert.equal(await measures(b, ID, ...period), fromA);
    } finally {
      await a.close();
      await b.close();
      await db.cleanup();
    }
  });
});

describe('usage periods: the router', () => {
  const handlers: ProviderHandlers = {
    provision: () => 'Ready',
    changePlan: () => undefined,
    deprovision: () => undefined,
    provisionCredentials: () => ({ credentials: { URL: 'https://u:p@example.test' } }),
    deprovisionCredentials: () => undefined,
  };

  it('checks usageGraceMs at start-up', () => {
    for (const usageGraceMs of [-1, 1.5, '3600000', 8 * 24 * HOUR]) {
      assert.throws(() => marketplaceRouter({ handlers, store: memoryStore(), logger: false, usageGraceMs: usageGraceMs as number }), (error: unknown) => error instanceof InvalidOptionsError && /usageGraceMs/.test(error.message), String(usageGraceMs));
    }
    assert.throws(() => marketplaceRouter({ handlers, store: memoryStore(), logger: false, usageGrace: 60_000 } as never), /usageGraceMs/);
  });

  it('closes a period at its end plus usageGraceMs, and the measures route answers it the same after', async () => {
    const time = clock('2026-11-10T10:20:00Z');
    const client = marketplaceClient({ now: time.now });
    const router = marketplaceRouter({ handlers, store: memoryStore(), now: time.now, masterKey: client.masterPublicKey, logger: false, usageGraceMs: 15 * 60_000 });
    const app = express();
    app.use(router);
    const target = await listen(app);
    try {
      assert.equal((await client.send(target, 'PUT', `/v1/resources/${ID}`, { id: ID, product: 'bonnets', plan: 'small', region: 'all::global' })).status, 201);
      await router.recordUsage(ID, 'requests', 2);
      const path = `/v1/resources/${ID}/measures?period_start=2026-11-10T10:00:00Z&period_end=2026-11-10T11:00:00Z`;
      time.set('2026-11-10T11:14:59.999Z');
      await router.recordUsage(ID, 'requests', 1, new Date('2026-11-10T10:59:59.999Z'));
      time.set('2026-11-10T11:15:00Z');
      const first = await client.send(target, 'GET', path);
      assert.equal(first.status, 200);
      assert.deepEqual((first.body as { measures: unknown }).measures, { requests: 3 });
      await assert.rejects(router.recordUsage(ID, 'requests', 1, new Date('2026-11-10T10:59:59.999Z')), UsagePeriodClosedError);
      await assert.rejects(router.recordUsage(ID, 'requests', 1, Date.now() - 100 * HOUR, { late: 'later' as never }), /late must be 'refuse' or 'current-period'/);
      await assert.rejects(router.recordUsage(ID, 'requests', 1, undefined, { lat: 'current-period' } as never), /unknown option "lat"/);
      await router.recordUsage(ID, 'requests', 1, new Date('2026-11-10T10:30:00Z'), { late: 'current-period' });
      time.set('2026-11-12T00:00:00Z');
      const later = await client.send(target, 'GET', path);
      assert.equal(later.text, first.text);
    } finally {
      await target.close();
      await router.close();
    }
  });
});
