/** Store conformance: The usage ledger: totals over [from, to), presence, pruning. */
import assert from 'node:assert/strict';
import { T0, FOREVER, type Suite } from './fixtures.js';

/** Registers the cases of usage: usage. */
export function usageCases({ describe, test }: Suite): void {
  describe('usage', () => {
    test('sumUsage totals by feature over [from, to), per resource', async (store) => {
      await store.recordUsage([
        { resourceId: 'r1', feature: 'requests', quantity: 1, at: T0 },
        { resourceId: 'r1', feature: 'requests', quantity: 2, at: T0 + 999 },
        { resourceId: 'r1', feature: 'requests', quantity: 4, at: T0 + 1000 },
        { resourceId: 'r1', feature: 'storage_gb', quantity: 0.5, at: T0 + 500 },
        { resourceId: 'r1', feature: 'constructor', quantity: 3, at: T0 + 1 },
        { resourceId: 'r2', feature: 'requests', quantity: 100, at: T0 },
      ]);
      await store.recordUsage([]);
      assert.deepEqual({ ...(await store.sumUsage('r1', T0, T0 + 1000)) }, { requests: 3, storage_gb: 0.5, constructor: 3 });
      assert.deepEqual({ ...(await store.sumUsage('r1', T0 + 1, T0 + 1001)) }, { requests: 6, storage_gb: 0.5, constructor: 3 });
      assert.deepEqual({ ...(await store.sumUsage('r1', T0 + 1000, T0 + 1000)) }, {});
      assert.deepEqual({ ...(await store.sumUsage('r2', 0, FOREVER)) }, { requests: 100 });
      assert.deepEqual({ ...(await store.sumUsage('r3', 0, FOREVER)) }, {});
    });

    test('hasUsage answers for [from, to) and the resource only', async (store) => {
      await store.recordUsage([{ resourceId: 'r1', feature: 'requests', quantity: 0, at: T0 }]);
      assert.equal(await store.hasUsage('r1', T0, T0 + 1), true, 'a zero quantity still counts as usage');
      assert.equal(await store.hasUsage('r1', T0 - 10, T0), false, 'to is exclusive');
      assert.equal(await store.hasUsage('r1', T0 + 1, FOREVER), false);
      assert.equal(await store.hasUsage('r2', 0, FOREVER), false);
    });

    test('pruneUsage deletes entries before the bound and answers how many', async (store) => {
      await store.recordUsage([
        { resourceId: 'r1', feature: 'requests', quantity: 1, at: T0 - 1 },
        { resourceId: 'r1', feature: 'requests', quantity: 2, at: T0 },
        { resourceId: 'r2', feature: 'requests', quantity: 5, at: T0 - 100 },
      ]);
      assert.equal(await store.pruneUsage(T0), 2);
      assert.equal(await store.pruneUsage(T0), 0);
      assert.deepEqual({ ...(await store.sumUsage('r1', 0, FOREVER)) }, { requests: 2 });
      assert.equal(await store.hasUsage('r2', 0, FOREVER), false);
    }, { needs: ['pruneUsage'] });
  });
}
