/**
 * The operator commands, metrics gauges and health check against the real SQLite and PostgreSQL
 * stores, with deliveries in every state, the store held open by a "running provider" meanwhile.
 * PostgreSQL cases say why they are skipped when no server answers; SQLite's always run.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { generateEncryptionKey } from '../../src/store/crypto.js';
import { sqliteStore } from '../../src/store/sqlite.js';
import { postgresStore } from '../../src/store/postgres/index.js';
import type { Store } from '../../src/store/types.js';
import { main } from '../../src/testkit/cli/main.js';
import { createHealthCheck } from '../../src/observability/health.js';
import { resolveInstrumentation } from '../../src/observability/index.js';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';

const KEY = generateEncryptionKey();
const DAY = 24 * 3_600_000;
const SECRET_CREDENTIAL = 'postgres://app:CREDENTIAL-VALUE-9f2@db.example/app';
const URL_TOKEN = 'URLTOKEN-d81';

/**
 * Through the store contract as the engine and outbox use it: three committed provisions with a
 * callback each, one operation left pending (202), then one delivery failed for good, one retrying
 * later and one claimed by a live worker; the fourth stays due.
 */
async function seed(store: Store, now: number): Promise<void> {
  const request = { kind: 'provision' as const, product: 'bonnets', plan: 'small', region: 'aws::us-east-1', features: {} };
  for (const [i, id] of ['res-a', 'res-b', 'res-c', 'res-d'].entries()) {
    const claim = await store.claimOperation({ key: `resource:${id}`, kind: 'provision', targetId: id, fingerprint: `f${i}`, request, owner: 'provider-1', now, leaseMs: 30_000 });
    assert.equal(claim.outcome, 'claimed');
    if (claim.outcome !== 'claimed') return;
    await store.commitOperation(`resource:${id}`, claim.operation.token, {
      mutation: { type: 'putResource', resource: { id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1', features: {}, message: 'ok', createdAt: now, updatedAt: now } },
      delivery: {
        id: `dlv-${id}`,
        callbackId: `cb${i}`,
        url: `https://user:pw@connector.example/v1/callbacks/cb${i}?token=${URL_TOKEN}`,
        payload: { state: 'done', message: 'Ready', credentials: { DATABASE_URL: SECRET_CREDENTIAL } },
        createdAt: now - (4 - i) * 60_000,
        deadlineAt: now - (4 - i) * 60_000 + DAY,
      },
    });
  }
  const pending = await store.claimOperation({ key: 'resource:res-p', kind: 'provision', targetId: 'res-p', fingerprint: 'fp', request, owner: 'provider-1', now: now - 3_600_000, leaseMs: 30_000 });
  if (pending.outcome !== 'claimed') throw new Error('seed: could not claim res-p');
  await store.markOperationPending('resource:res-p', pending.operation.token, { message: 'Knitting', callbackId: 'cbP', callbackUrl: 'https://connector.example/v1/callbacks/cbP', deadlineAt: now - 3_600_000 + DAY });

  const claimed = await store.claimDeliveries({ owner: 'provider-1', now, leaseMs: 60_000, limit: 3 });
  assert.deepEqual(claimed.map((d) => d.id), ['dlv-res-a', 'dlv-res-b', 'dlv-res-c']);
  await store.failDelivery('dlv-res-a', 'provider-1', 'rejected with status 400');
  await store.retryDelivery('dlv-res-b', 'provider-1', { attempts: 3, nextAttemptAt: now + 10 * 60_000, lastError: 'connector answered 503' });
  // dlv-res-c stays claimed by provider-1; dlv-res-d is due.
}

async function cli(args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env: {}, cwd });
  return { code, stdout, stderr };
}

interface Target {
  name: string;
  skip: () => string | false;
  open: () => Promise<Store>;
  storeArgs: () => string[];
  cleanup: () => Promise<void>;
}

const dir = mkdtempSync(join(tmpdir(), 'em-obs-stores-'));
const schema = `obs_${randomBytes(4).toString('hex')}`;
let pgSkip: string | false = 'not probed';

const targets: Target[] = [
  {
    name: 'SQLite',
    skip: () => false,
    open: async () => sqliteStore({ path: join(dir, 'provider.db'), encryptionKey: KEY, logger: false }),
    storeArgs: () => ['--store', 'sqlite:provider.db'],
    cleanup: async () => undefined,
  },
  {
    name: 'PostgreSQL',
    skip: () => pgSkip,
    open: async () => {
      const store = postgresStore({ connectionString: DATABASE_URL, schema, encryptionKey: KEY, logger: false });
      await store.ready();
      return store;
    },
    storeArgs: () => ['--store', DATABASE_URL, '--schema', schema],
    cleanup: async () => {
      const store = postgresStore({ connectionString: DATABASE_URL, schema, encryptionKey: KEY, logger: false });
      await store.pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await store.close();
    },
  },
];

before(async () => {
  pgSkip = await postgresSkipReason();
});
after(() => rmSync(dir, { recursive: true, force: true }));

for (const target of targets) {
  describe(`operator tools against the ${target.name} store`, () => {
    let store: Store;
    const now = Date.now();

    before(async () => {
      if (target.skip() !== false) return;
      store = await target.open();
      await seed(store, now);
    });
    after(async () => {
      if (target.skip() !== false) return;
      await store.close();
      await target.cleanup();
    });

    it('outbox list shows every delivery state, oldest first, without secrets, while the provider holds the store', async (t) => {
      if (target.skip() !== false) return t.skip(String(target.skip()));
      const table = await cli(['outbox', 'list', ...target.storeArgs()], dir);
      assert.equal(table.code, 0, table.stderr);
      assert.deepEqual(table.stdout.trimEnd().split('\n').slice(1).map((l) => l.split(/\s+/).slice(0, 3)), [
        ['dlv-res-a', 'cb0', 'failed'],
        ['dlv-res-b', 'cb1', 'pending'],
        ['dlv-res-c', 'cb2', 'pending'],
        ['dlv-res-d', 'cb3', 'pending'],
      ]);
      assert.match(table.stdout, /dlv-res-a .*never \(failed\).*rejected with status 400/);
      assert.match(table.stdout, /dlv-res-b .*in (10m00s|9m5\ds).*connector answered 503/);
      const json = await cli(['outbox', 'list', '--json', ...target.storeArgs()], dir);
      const listed = JSON.parse(json.stdout) as { id: string; claimedBy?: string; attempts: number }[];
      assert.equal(listed.find((d) => d.id === 'dlv-res-c')?.claimedBy, 'provider-1');
      assert.equal(listed.find((d) => d.id === 'dlv-res-b')?.attempts, 3);
      for (const output of [table.stdout, json.stdout, table.stderr, json.stderr]) {
        assert.ok(!output.includes('CREDENTIAL-VALUE'), 'no credential value');
        assert.ok(!output.includes(URL_TOKEN) && !output.includes(':pw@'), 'no secret of the callback URL');
      }
    });

    it('gauges and health read the same store', async (t) => {
      if (target.skip() !== false) return t.skip(String(target.skip()));
      const registry = new Registry();
      resolveInstrumentation('test', { registry }, { store, now: () => now });
      const text = await registry.metrics();
      assert.match(text, /^marketplace_outbox_pending 3$/m);
      assert.match(text, /^marketplace_outbox_oldest_pending_seconds 180$/m);
      assert.match(text, /^marketplace_operations_pending 1$/m);
      assert.deepEqual(await createHealthCheck({ store, now: () => now })(), { status: 'ok', store: 'ok', outbox: { pending: 3, oldestPendingSeconds: 180, failing: 1 } });
    });

    it('operations list shows the pending 202 with its age and callback id', async (t) => {
      if (target.skip() !== false) return t.skip(String(target.skip()));
      const r = await cli(['operations', 'list', '--json', ...target.storeArgs()], dir);
      assert.equal(r.code, 0, r.stderr);
      const [op] = JSON.parse(r.stdout) as { id: string; callbackId: string; ageSeconds: number; kind: string }[];
      assert.equal(op?.id, 'res-p');
      assert.equal(op?.callbackId, 'cbP');
      assert.equal(op?.kind, 'provision');
      assert.ok((op?.ageSeconds ?? 0) >= 3600);
    });

    it('retry makes the failed and the waiting delivery due; drop deletes one', async (t) => {
      if (target.skip() !== false) return t.skip(String(target.skip()));
      for (const id of ['dlv-res-a', 'dlv-res-b']) {
        const r = await cli(['outbox', 'retry', id, ...target.storeArgs()], dir);
        assert.equal(r.code, 0, r.stderr);
      }
      const due = await store.claimDeliveries({ owner: 'provider-2', now: Date.now() + 1, leaseMs: 60_000, limit: 10 });
      assert.deepEqual(due.map((d) => d.id).sort(), ['dlv-res-a', 'dlv-res-b', 'dlv-res-d'], 'both are due now; the claimed one is still held');
      const dropped = await cli(['outbox', 'drop', 'dlv-res-d', '--yes', ...target.storeArgs()], dir);
      assert.equal(dropped.code, 0, dropped.stderr);
      const gone = await cli(['outbox', 'show', 'dlv-res-d', ...target.storeArgs()], dir);
      assert.equal(gone.code, 1);
      assert.match(gone.stderr, /no delivery "dlv-res-d"/);
    });
  });
}
