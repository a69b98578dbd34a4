/** Store conformance: The callback outbox: enqueued deliveries, their claims, retries, failures and completion. */
import assert from 'node:assert/strict';
import { T0, LEASE, FOREVER, delivery, enqueue, ids, sortedIds, type Suite } from './fixtures.js';

/** Registers the cases of deliveries: deliveries. */
export function deliveryCases({ describe, test }: Suite): void {
  describe('deliveries', () => {
    test('claimDeliveries takes due ones, oldest first, up to the limit, and marks the claim', async (store) => {
      await enqueue(store, delivery('d1', { createdAt: T0 }));
      await enqueue(store, delivery('d2', { createdAt: T0 + 10 }));
      await enqueue(store, delivery('d3', { createdAt: T0 + 20 }));
      const first = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 10, leaseMs: LEASE, limit: 1 });
      assert.deepEqual(ids(first), ['d1']);
      assert.equal(first[0]!.claimedBy, 'owner-a');
      assert.equal(first[0]!.claimExpiresAt, T0 + 10 + LEASE);
      const next = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 10, leaseMs: LEASE, limit: 10 });
      assert.deepEqual(ids(next), ['d2'], 'd3 is not due yet and d1 is held');
      const listed = await store.listDeliveries();
      assert.deepEqual(sortedIds(listed), ['d1', 'd2', 'd3']);
      const d3 = listed.find((d) => d.id === 'd3')!;
      assert.equal('claimedBy' in d3, false);
    }, { needs: ['listDeliveries'] });

    test('a live claim is exclusive; after it lapses another owner takes the delivery', async (store) => {
      await enqueue(store, delivery('d1'));
      const mine = await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
      assert.deepEqual(ids(mine), ['d1']);
      assert.deepEqual(await store.claimDeliveries({ owner: 'owner-b', now: T0 + LEASE - 1, leaseMs: LEASE, limit: 10 }), []);
      const theirs = await store.claimDeliveries({ owner: 'owner-b', now: T0 + LEASE, leaseMs: LEASE, limit: 10 });
      assert.deepEqual(ids(theirs), ['d1']);
      assert.equal(theirs[0]!.claimedBy, 'owner-b');
      // The first owner lost it: its completion changes nothing.
      await store.completeDelivery('d1', 'owner-a');
      assert.deepEqual(ids(await store.listDeliveries()), ['d1']);
    }, { needs: ['listDeliveries'] });

    test('two owners claiming at the same moment never get the same delivery', async (store) => {
      for (let i = 0; i < 12; i++) await enqueue(store, delivery(`d${String(i).padStart(2, '0')}`, { createdAt: T0 + i }));
      const [a, b] = await Promise.all([
        store.claimDeliveries({ owner: 'owner-a', now: T0 + 100, leaseMs: LEASE, limit: 8 }),
        store.claimDeliveries({ owner: 'owner-b', now: T0 + 100, leaseMs: LEASE, limit: 8 }),
      ]);
      const taken = [...ids(a), ...ids(b)];
      assert.equal(new Set(taken).size, taken.length, 'no delivery went to both owners');
      assert.equal(taken.length, 12);
      for (const d of a) assert.equal(d.claimedBy, 'owner-a');
      for (const d of b) assert.equal(d.claimedBy, 'owner-b');
    });

    test('completeDelivery removes it, only for the owner', async (store) => {
      await enqueue(store, delivery('d1'));
      await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
      await store.completeDelivery('d1', 'owner-b');
      assert.deepEqual(ids(await store.listDeliveries()), ['d1']);
      await store.completeDelivery('d1', 'owner-a');
      assert.deepEqual(await store.listDeliveries(), []);
      await store.completeDelivery('d-missing', 'owner-a');
    }, { needs: ['listDeliveries'] });

    test('retryDelivery reschedules and releases the claim, only for the owner', async (store) => {
      const record = delivery('d1');
      await enqueue(store, record);
      await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
      await store.retryDelivery('d1', 'owner-b', { attempts: 9, nextAttemptAt: T0 + 1, lastError: 'not mine' });
      assert.equal((await store.listDeliveries())[0]!.attempts, 0);

      await store.retryDelivery('d1', 'owner-a', { attempts: 1, nextAttemptAt: T0 + 5_000, lastError: 'connector answered 500' });
      assert.deepEqual(await store.listDeliveries(), [
        { ...record, state: 'pending', attempts: 1, nextAttemptAt: T0 + 5_000, lastError: 'connector answered 500' },
      ]);
      assert.deepEqual(await store.claimDeliveries({ owner: 'owner-b', now: T0 + 4_999, leaseMs: LEASE, limit: 10 }), [], 'not due before nextAttemptAt');
      const again = await store.claimDeliveries({ owner: 'owner-b', now: T0 + 5_000, leaseMs: LEASE, limit: 10 });
      assert.deepEqual(ids(again), ['d1']);
      assert.equal(again[0]!.attempts, 1);
      assert.equal(again[0]!.lastError, 'connector answered 500');
    }, { needs: ['listDeliveries'] });

    test('failDelivery keeps it as failed, never claimed again, only for the owner', async (store) => {
      const record = delivery('d1');
      await enqueue(store, record);
      await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
      await store.failDelivery('d1', 'owner-b', 'not mine');
      assert.equal((await store.listDeliveries())[0]!.state, 'pending');
      await store.failDelivery('d1', 'owner-a', 'connector answered 409');
      assert.deepEqual(await store.listDeliveries(), [
        { ...record, state: 'failed', attempts: 0, nextAttemptAt: record.createdAt, lastError: 'connector answered 409' },
      ]);
      assert.deepEqual(await store.claimDeliveries({ owner: 'owner-b', now: FOREVER - LEASE, leaseMs: LEASE, limit: 10 }), []);
    }, { needs: ['listDeliveries'] });
  });
}
