/** Store conformance: The optional diagnostics (StoreDiagnostics): checked only when the store has them. */
import assert from 'node:assert/strict';
import { T0, LEASE, claimInput, delivery, claimed, enqueue, pendingWith, type Suite } from './fixtures.js';

/** Registers the cases of diagnostics: diagnostics. */
export function diagnosticsCases({ describe, test }: Suite): void {
  describe('diagnostics (optional methods)', () => {
    test('delivery summaries, due-making, dropping and stats never carry payloads', async (store) => {
      await enqueue(store, delivery('d1', { createdAt: T0 }));
      await enqueue(store, delivery('d2', { createdAt: T0 + 1 }));
      const [taken] = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 1, leaseMs: LEASE, limit: 1 });
      await store.failDelivery(taken!.id, 'owner-a', 'rejected with status 409');

      const summaries = await store.listDeliverySummaries();
      assert.deepEqual(summaries.map((s) => [s.id, s.state]), [['d1', 'failed'], ['d2', 'pending']]);
      for (const summary of summaries) assert.equal('payload' in summary, false);
      assert.deepEqual((await store.listDeliverySummaries({ state: 'pending' })).map((s) => s.id), ['d2']);
      assert.deepEqual((await store.listDeliverySummaries({ limit: 1 })).map((s) => s.id), ['d1']);
      assert.equal((await store.getDeliverySummary('d1'))?.lastError, 'rejected with status 409');
      assert.equal(await store.getDeliverySummary('nope'), undefined);
      assert.deepEqual(await store.outboxStats(), { pending: 1, failed: 1, oldestPendingCreatedAt: T0 + 1 });

      assert.equal(await store.makeDeliveryDue('d1', T0 + 50), true);
      const due = await store.getDeliverySummary('d1');
      assert.deepEqual([due?.state, due?.nextAttemptAt, due?.claimedBy], ['pending', T0 + 50, undefined]);
      assert.equal(await store.makeDeliveryDue('nope', T0), false);
      assert.equal(await store.dropDelivery('d2'), true);
      assert.equal(await store.dropDelivery('d2'), false);
      assert.deepEqual(await store.outboxStats(), { pending: 1, failed: 0, oldestPendingCreatedAt: T0 });
    }, { needs: ['listDeliverySummaries', 'getDeliverySummary', 'makeDeliveryDue', 'dropDelivery', 'outboxStats'] });

    test('pending operations are counted', async (store) => {
      assert.equal(await store.countPendingOperations(), 0);
      await pendingWith(store, claimInput(), false);
      await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
      assert.equal(await store.countPendingOperations(), 1);
    }, { needs: ['countPendingOperations'] });

    test('ping answers', async (store) => {
      await store.ping();
    }, { needs: ['ping'] });
  });
}
