/**
 * The differential property (issue 19): the same random sequences of signed requests (repeats,
 * replays, refusing, failing, 202 and hanging handlers, completions, a crashed instance's lapsing
 * lease, parent/child races) through the operation engine on memory, SQLite and PostgreSQL and
 * through the model of the documented rule: identical answers, handler calls and end states.
 *
 * The seed is random and printed on every run; a failure prints the seed, fast-check's replay path
 * and the shrunk counterexample. DIFFERENTIAL_SEED (and DIFFERENTIAL_PATH) replay it,
 * DIFFERENTIAL_RUNS runs more sequences (say 2000, locally).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { memoryStore } from '../../src/store/memory.js';
import { sqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { assertDifferential, checkDifferential, storeDifferential, type DifferentialTarget } from '../../src/testkit/index.js';
import { openPostgresStore, postgresSkipReason } from '../helpers/postgres.js';

const KEY = Buffer.alloc(32, 7).toString('base64');
const RUNS = Number(process.env.DIFFERENTIAL_RUNS ?? 60);
const pgSkip = await postgresSkipReason();

const memory: DifferentialTarget = { name: 'memory', makeStore: async () => ({ store: memoryStore(), cleanup: async () => undefined }) };

const sqlite: DifferentialTarget = {
  name: 'sqlite',
  makeStore: async () => {
    const store = sqliteStore({ path: ':memory:', encryptionKey: KEY, logger: false });
    return { store, cleanup: () => store.close() };
  },
};

const postgres: DifferentialTarget = {
  name: 'postgres',
  skip: pgSkip,
  makeStore: async () => {
    const { store, cleanup } = openPostgresStore(KEY, { poolSize: 2 });
    await store.ready();
    return {
      store,
      cleanup: async () => {
        await store.close();
        await cleanup();
      },
    };
  },
};

describe('differential property: memory, SQLite, PostgreSQL and the model', () => {
  it(`answers, calls handlers and ends alike on every store (${RUNS} sequences)`, async () => {
    const report = await assertDifferential({ targets: [memory, sqlite, postgres], numRuns: RUNS, log: (line) => console.log(line) });
    assert.deepEqual(report.checked, pgSkip === false ? ['memory', 'sqlite', 'postgres'] : ['memory', 'sqlite']);
  });
});

// An adapter written outside the package runs the property from the testkit entry in a few lines.
storeDifferential({ name: 'memory store through the testkit export', describe, it, numRuns: 10, log: (line) => console.log(line), makeStore: memory.makeStore });

/** A store wrapper that changes one method. */
function broken(change: (store: Store) => Partial<Store>): DifferentialTarget {
  return {
    name: 'broken',
    makeStore: async () => {
      const store = memoryStore();
      return { store: Object.assign(Object.create(store) as Store, change(store)), cleanup: async () => undefined };
    },
  };
}

describe('the differential property finds a broken store', () => {
  // Fixed seeds here: these cases test the harness, and must fail the same way every time.
  it('one that forgets signatures (a replayed request runs its handler again): the report names the seed and the counterexample', async () => {
    const report = await checkDifferential({
      targets: [broken((store) => ({ claimOperation: ({ requestId: _r, replayExpiresAt: _e, ...input }) => store.claimOperation(input) }))],
      numRuns: 300,
      seed: 19,
      maxShrinks: 50,
      log: () => undefined,
    });
    assert.equal(report.ok, false);
    assert.equal(report.seed, 19);
    assert.match(report.failure!, /seed 19/);
    assert.match(report.failure!, /DIFFERENTIAL_SEED=19 DIFFERENTIAL_PATH="[\d:]+"/);
    assert.match(report.failure!, /counterexample \(commands\): \[/);
    assert.match(report.failure!, /replay of #\d+: same signature/);
    assert.match(report.failure!, /broken differs from the model/);
  });

  it('says NOT CHECKED for the callbacks of a store that cannot list them, and compares the rest', async () => {
    const lines: string[] = [];
    const report = await checkDifferential({ targets: [broken(() => ({ listDeliveries: undefined }))], numRuns: 20, log: (line) => lines.push(line) });
    assert.equal(report.ok, true, report.failure);
    assert.ok(lines.some((line) => /broken: callbacks enqueued NOT CHECKED \(the store has no listDeliveries\)/.test(line)), lines.join('\n'));
  });

  it('one that keeps no tombstones: the end state differs', async () => {
    const report = await checkDifferential({ targets: [broken(() => ({ isDeleted: async () => false }))], numRuns: 300, seed: 19, maxShrinks: 50, log: () => undefined });
    assert.equal(report.ok, false);
    assert.match(report.failure!, /- model: (resource|credential) \w+: .*tombstone/);
  });
});
