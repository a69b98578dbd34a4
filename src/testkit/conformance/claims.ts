/** Store conformance: What a claim reads and whom it waits for: the claim's snapshot, the parent/child exclusion, and the pending credential operations a deprovision leaves orphaned. */
import assert from 'node:assert/strict';
import {
  T0, LEASE, claimInput, resource, credential, claimed, heldBy, putResource, putCredential, deleteResource, credentialClaim, deprovisionClaim, pendingWith,
  commit, markPending, LEASE_LOST, type Suite,
} from './fixtures.js';

/** Registers the cases of claims: snapshot. */
export function snapshotCases({ describe, test }: Suite): void {
  describe('claim snapshot', () => {
    test('a resource claim reads the resource and its tombstone', async (store) => {
      await putResource(store, resource('r1'));
      const claim = await store.claimOperation(claimInput({ key: 'resource:r1', kind: 'changePlan', request: { kind: 'changePlan', plan: 'large' }, now: T0 + 1 }));
      assert.equal(claim.outcome, 'claimed');
      if (claim.outcome !== 'claimed') return;
      assert.deepEqual(claim.snapshot, { resource: resource('r1'), resourceDeleted: false, credential: undefined, credentialDeleted: false, credentials: [] });

      await deleteResource(store, 'r2', T0);
      const gone = await store.claimOperation(claimInput({ key: 'resource:r2', targetId: 'r2', now: T0 + 1 }));
      assert.equal(gone.outcome, 'claimed');
      if (gone.outcome === 'claimed') assert.deepEqual(gone.snapshot, { resource: undefined, resourceDeleted: true, credential: undefined, credentialDeleted: false, credentials: [] });
    });

    test('a deprovision claim reads every credential set of the resource, oldest first', async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 2 }));
      await putCredential(store, credential('c1', 'r1', { createdAt: T0 + 1 }));
      await putResource(store, resource('other'));
      await putCredential(store, credential('x1', 'other'));
      const claim = await store.claimOperation(deprovisionClaim('r1', { now: T0 + 5 }));
      assert.equal(claim.outcome, 'claimed');
      if (claim.outcome === 'claimed') {
        assert.deepEqual(claim.snapshot.resource, resource('r1'));
        assert.deepEqual(claim.snapshot.credentials, [credential('c1', 'r1', { createdAt: T0 + 1 }), credential('c2', 'r1', { createdAt: T0 + 2 })]);
      }
    });

    test('a credential PUT claim reads its parent (parentId) and the credential; a DELETE finds the parent from the stored credential', async (store) => {
      await putResource(store, resource('r1'));
      const put = await store.claimOperation(credentialClaim('c1', 'r1'));
      assert.equal(put.outcome, 'claimed');
      if (put.outcome !== 'claimed') return;
      assert.deepEqual(put.snapshot, { resource: resource('r1'), resourceDeleted: false, credential: undefined, credentialDeleted: false, credentials: [] });
      await commit(store, put.operation, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') } });

      const del = await store.claimOperation(credentialClaim('c1', undefined, { now: T0 + 1 }));
      assert.equal(del.outcome, 'claimed');
      if (del.outcome === 'claimed') {
        assert.deepEqual(del.snapshot, { resource: resource('r1'), resourceDeleted: false, credential: credential('c1', 'r1'), credentialDeleted: false, credentials: [] });
        await commit(store, del.operation, { mutation: { type: 'deleteCredential', id: 'c1', deletedAt: T0 + 1 } });
      }
      const again = await store.claimOperation(credentialClaim('c1', 'r1', { now: T0 + 2 }));
      assert.equal(again.outcome, 'claimed');
      if (again.outcome === 'claimed') assert.equal(again.snapshot.credentialDeleted, true);
    });
  });
}

/** Registers the cases of claims: parent, orphans. */
export function exclusionCases({ describe, test }: Suite): void {
  describe('parent/child exclusion', () => {
    test('a credential claim is blocked while its resource runs a deprovision, and refused (409) while one is pending', async (store) => {
      await putResource(store, resource('r1'));
      const deprovision = await claimed(store, deprovisionClaim('r1'));
      const blocked = await store.claimOperation(credentialClaim('c1', 'r1'));
      assert.equal(blocked.outcome, 'blocked');
      assert.equal(heldBy(blocked).key, 'resource:r1');
      assert.equal(await store.getOperation('credential:c1'), undefined, 'nothing claimed');

      // Changed by issue 19: a pending deprovision may last hours, so the claim refuses at once
      // (`conflict`), which lets it record the 409 against the request's signature.
      const pending = await markPending(store, deprovision, { message: 'Unravelling', deadlineAt: T0 + 86_400_000 });
      assert.deepEqual(await store.claimOperation(credentialClaim('c1', 'r1', { now: T0 + 1 })), {
        outcome: 'conflict',
        operation: pending,
        answer: { status: 409, body: { message: 'Another operation on this entity is pending; wait for its outcome' } },
      });
      assert.equal(await store.getOperation('credential:c1'), undefined, 'nothing claimed');
      assert.equal((await store.claimOperation(credentialClaim('c2', 'other', { now: T0 + 1 }))).outcome, 'claimed', 'other resources are free');
    });

    test('a credential DELETE is blocked through its stored credential; other resource operations do not block', async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      const change = await claimed(store, claimInput({ key: 'resource:r1', kind: 'changePlan', request: { kind: 'changePlan', plan: 'large' } }));
      assert.equal((await store.claimOperation(credentialClaim('c1', undefined))).outcome, 'claimed', 'a plan change does not block credentials');
      await store.releaseOperation('credential:c1', heldBy(await store.claimOperation(credentialClaim('c1', undefined))).token);
      await store.releaseOperation(change.key, change.token);
      await claimed(store, deprovisionClaim('r1', { now: T0 + 1 }));
      assert.equal((await store.claimOperation(credentialClaim('c1', undefined, { now: T0 + 1 }))).outcome, 'blocked');
    });

    test('a deprovision claim is blocked while a credential operation of the resource runs, not while one is pending', async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      const running = await claimed(store, credentialClaim('c2', 'r1'));
      const blocked = await store.claimOperation(deprovisionClaim('r1'));
      assert.equal(blocked.outcome, 'blocked');
      assert.equal(heldBy(blocked).key, 'credential:c2');
      await store.releaseOperation(running.key, running.token);

      const deleting = await claimed(store, credentialClaim('c1', undefined));
      assert.equal((await store.claimOperation(deprovisionClaim('r1'))).outcome, 'blocked', 'a running credential DELETE blocks too');
      await markPending(store, deleting, { message: 'Revoking', deadlineAt: T0 + 86_400_000 });
      assert.equal((await store.claimOperation(deprovisionClaim('r1'))).outcome, 'claimed', 'a pending one does not');
    });

    test('a lapsed holder blocks nothing', async (store) => {
      await claimed(store, deprovisionClaim('r1'));
      assert.equal((await store.claimOperation(credentialClaim('c1', 'r1', { now: T0 + LEASE + 1 }))).outcome, 'claimed');
    });
  });

  describe('orphaned pending credential operations', () => {
    test('deleting a resource removes its pending credential operations and enqueues an error callback for those with callback headers', async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      const withCallback = await pendingWith(store, credentialClaim('c2', 'r1'), true);
      await pendingWith(store, credentialClaim('c1', undefined), false);
      const elsewhere = await pendingWith(store, credentialClaim('c9', 'other'), true);

      const op = await claimed(store, deprovisionClaim('r1', { now: T0 + 5 }));
      await commit(store, op, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 5 }, orphanMessage: 'The resource was deprovisioned' });

      assert.equal(await store.getOperation('credential:c2'), undefined);
      assert.equal(await store.getOperation('credential:c1'), undefined);
      assert.deepEqual(await store.getOperation('credential:c9'), elsewhere, 'other resources keep theirs');
      const deliveries = await store.listDeliveries();
      assert.equal(deliveries.length, 1);
      const [sent] = deliveries;
      assert.equal(sent!.callbackId, withCallback.callbackId);
      assert.equal(sent!.url, withCallback.callbackUrl);
      assert.deepEqual(sent!.payload, { state: 'error', message: 'The resource was deprovisioned' });
      assert.equal(sent!.deadlineAt, withCallback.deadlineAt);
      assert.equal(sent!.state, 'pending');
      assert.equal(sent!.nextAttemptAt, T0 + 5);
    }, { needs: ['listDeliveries'] });

    test('a failed deleteResource commit leaves the pending credential operations alone', async (store) => {
      await putResource(store, resource('r1'));
      const pending = await pendingWith(store, credentialClaim('c2', 'r1'), true);
      const op = await claimed(store, deprovisionClaim('r1', { now: T0 + 5 }));
      assert.deepEqual(await store.commitOperation(op.key, 'not-the-token', { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 5 }, orphanMessage: 'The resource was deprovisioned' }), LEASE_LOST);
      assert.deepEqual(await store.getOperation('credential:c2'), pending);
      assert.deepEqual(await store.listDeliveries(), []);
    }, { needs: ['listDeliveries'] });
  });
}
