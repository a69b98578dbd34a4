/**
 * The narrow store parts: a store that has only the required contract (no StoreDiagnostics) passes
 * the conformance suite with the optional cases reported skipped (never passed), and every consumer
 * (router, measures, usage ledger, health, outbox) works on it; each consumer takes only the part it
 * calls, so a part alone fits it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import express from 'express';
import { createHealthCheck, marketplaceRouter, memoryStore } from '../../src/index.js';
import { createOutbox } from '../../src/outbox/index.js';
import { createUsageLedger } from '../../src/core/usage.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { storeConformance, type TestCaseContext } from '../../src/testkit/index.js';
import type { DeliveryStore, EntityReads, HealthProbeStore, OperationStore, Store, UsageLedgerStore, UsageStore } from '../../src/store/types.js';
import { listen, logCapture, marketplaceClient } from '../helpers/http.js';
import { enqueue, fakeClock } from '../outbox/helpers.js';

const REQUIRED = [
  'getResource', 'getCredential', 'listCredentials',
  'claimOperation', 'getOperation', 'renewOperation', 'releaseOperation', 'markOperationPending', 'commitOperation', 'recordReplay', 'isDeleted', 'pruneReplays',
  'claimDeliveries', 'completeDelivery', 'retryDelivery', 'failDelivery',
  'recordUsage', 'sumUsage', 'hasUsage',
] as const satisfies readonly (keyof (EntityReads & OperationStore & DeliveryStore & UsageStore))[];

/** The memory store cut down to the required contract: what a minimal outside adapter offers. */
function requiredOnly(): Store {
  const full = memoryStore();
  const bare: Record<string, unknown> = { kind: 'bare', close: () => full.close() };
  for (const method of REQUIRED) bare[method] = full[method].bind(full);
  return bare as unknown as Store;
}

// The suite as an outside adapter with no diagnostics runs it: the runner reports the optional cases skipped.
storeConformance({
  name: 'a store with the required contract only',
  describe,
  it,
  async makeStore() {
    const store = requiredOnly();
    return { store, cleanup: () => store.close() };
  },
});

interface Collected {
  title: string;
  fn: (context: TestCaseContext) => Promise<void>;
}

/** Registers the suite's cases without running them, to run them here with a context of our own. */
function collect(makeStore: () => Store): Collected[] {
  const cases: Collected[] = [];
  storeConformance({
    name: 'collected',
    describe: (_name, fn) => fn(),
    it: (title, _options, fn) => cases.push({ title, fn }),
    async makeStore() {
      const store = makeStore();
      return { store, cleanup: () => store.close() };
    },
  });
  return cases;
}

async function runAll(cases: Collected[]): Promise<Map<string, string>> {
  const skipped = new Map<string, string>();
  for (const { title, fn } of cases) {
    await fn({
      skip: (reason) => {
        skipped.set(title, reason ?? '');
      },
    });
  }
  return skipped;
}

describe('conformance on a store without the optional methods', () => {
  it('skips exactly the cases that need an optional method, each naming it, and passes the rest', async () => {
    const cases = collect(requiredOnly);
    const skipped = await runAll(cases);
    assert.ok(cases.length > 50, `${cases.length} cases`);
    assert.ok(skipped.size > 0 && skipped.size < cases.length);
    for (const [title, reason] of skipped) assert.match(reason, /^NOT CHECKED: the store has no \w+\(\)/, title);
    assert.match(skipped.get('ping answers')!, /no ping\(\)/);
    assert.match(skipped.get('pending operations are counted')!, /no countPendingOperations\(\)/);
    assert.match(skipped.get('delivery summaries, due-making, dropping and stats never carry payloads')!, /listDeliverySummaries\(\)/);
    // The required rules are checked, not skipped.
    for (const title of ['an empty store finds nothing', 'sumUsage totals by feature over [from, to), per resource', 'a first claim takes the key with a fresh running record']) {
      assert.ok(cases.some((c) => c.title === title), title);
      assert.equal(skipped.has(title), false, title);
    }
  });

  it('skips nothing on a store with every method', async () => {
    const skipped = await runAll(collect(() => memoryStore()));
    assert.deepEqual([...skipped.keys()], []);
  });

  it('fails a case it cannot check when the runner offers no skip, rather than passing it', async () => {
    const ping = collect(requiredOnly).find((c) => c.title === 'ping answers')!;
    await assert.rejects(ping.fn({}), /NOT CHECKED: the store has no ping\(\).*no way to report a skipped case/);
  });
});

describe('consumers take the narrow part they use', () => {
  it('the router serves resources, measures, usage and health on a store without diagnostics', async () => {
    const store = requiredOnly();
    const clock = fakeClock(Date.parse('2026-11-10T10:00:00Z'));
    const client = marketplaceClient({ now: clock.now });
    const logs = logCapture();
    const router = marketplaceRouter({
      store,
      now: clock.now,
      masterKey: client.masterPublicKey,
      logger: createRedactingLogger(logs.stream, 'debug'),
      handlers: {
        provision: () => 'Ready',
        changePlan: () => undefined,
        deprovision: () => undefined,
        provisionCredentials: () => ({ credentials: { URL: 'https://u:p@example.test' } }),
        deprovisionCredentials: () => undefined,
      },
    });
    const app = express();
    app.use(router);
    const target = await listen(app);
    try {
      const id = 'rnarrowparts00000000000000001';
      assert.equal((await client.send(target, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'all::global' })).status, 201);
      await router.recordUsage(id, 'requests', 3);
      const measures = await client.send(target, 'GET', `/v1/resources/${id}/measures?period_start=2026-11-10T00:00:00Z&period_end=2026-11-11T00:00:00Z`);
      assert.equal(measures.status, 200);
      assert.deepEqual((measures.body as { measures: unknown }).measures, { requests: 3 });
      assert.deepEqual(await router.health(), { status: 'ok', store: 'ok', outbox: null });
      await assert.rejects(router.pendingOperations(), /does not implement listPendingOperations/);
    } finally {
      await target.close();
      await router.close();
    }
  });

  it('each part alone fits its consumer: the outbox a DeliveryStore, the ledger a UsageStore, health a ping', async () => {
    const full = memoryStore();
    const clock = fakeClock();
    const deliveries: DeliveryStore = {
      claimDeliveries: (input) => full.claimDeliveries(input),
      completeDelivery: (id, owner) => full.completeDelivery(id, owner),
      retryDelivery: (id, owner, retry) => full.retryDelivery(id, owner, retry),
      failDelivery: (id, owner, reason) => full.failDelivery(id, owner, reason),
    };
    const sent: string[] = [];
    const outbox = createOutbox({ store: deliveries, now: clock.now, logger: false, send: async (url) => (sent.push(url), { outcome: 'delivered' }) });
    const d = await enqueue(full, { now: clock.now() });
    assert.equal(await outbox.runOnce(), 1);
    assert.deepEqual(sent, [d.url]);
    assert.deepEqual(await full.listDeliveries(), []);

    const usage: UsageLedgerStore = { recordUsage: (e) => full.recordUsage(e), sumUsage: (...a) => full.sumUsage(...a), hasUsage: (...a) => full.hasUsage(...a) };
    const ledger = createUsageLedger({ store: usage, now: clock.now, logger: createRedactingLogger(logCapture().stream) });
    await ledger.recordUsage('r1', 'requests', 2);
    assert.equal(await ledger.prune(), 0, 'no pruneUsage: nothing pruned, no failure');
    assert.deepEqual({ ...(await full.sumUsage('r1', 0, Number.MAX_SAFE_INTEGER)) }, { requests: 2 });

    let pinged = 0;
    const probe: HealthProbeStore = {
      ping: async () => {
        pinged++;
      },
    };
    assert.deepEqual(await createHealthCheck({ store: probe })(), { status: 'ok', store: 'ok', outbox: null });
    assert.equal(pinged, 1);
  });
});
