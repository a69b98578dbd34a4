/** Store conformance: The stored entities: what an empty store reads, tombstones, credentials of a resource, and records as copies. */
import assert from 'node:assert/strict';
import type { DeliveryRecord, OperationRequest } from '../../store/types.js';
import {
  T0, LEASE, FOREVER, claimInput, resource, credential, delivery, claimed, putResource, putCredential, deleteResource, deleteCredential, enqueue, ids,
  commit, markPending, tombstoned, LEASE_LOST, PARENT_MISSING, type Suite,
} from './fixtures.js';

/** Registers the cases of entities: reads. */
export function readCases({ describe, test }: Suite): void {
  describe('reads', () => {
    test('an empty store finds nothing', async (store) => {
      assert.equal(typeof store.kind, 'string');
      assert.equal(await store.getResource('r1'), undefined);
      assert.equal(await store.getCredential('c1'), undefined);
      assert.deepEqual(await store.listCredentials('r1'), []);
      assert.equal(await store.getOperation('resource:r1'), undefined);
      assert.deepEqual(await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 }), []);
      assert.deepEqual({ ...(await store.sumUsage('r1', 0, FOREVER)) }, {});
      assert.equal(await store.hasUsage('r1', 0, FOREVER), false);
    });

    test('an empty store lists nothing and prunes nothing (optional listings)', async (store) => {
      assert.deepEqual(await store.listPendingOperations(10), []);
      assert.deepEqual(await store.listDeliveries(), []);
      assert.equal(await store.pruneUsage(FOREVER), 0);
    }, { needs: ['listPendingOperations', 'listDeliveries', 'pruneUsage'] });
  });
}

/** Registers the cases of entities: tombstones. */
export function tombstoneCases({ describe, test }: Suite): void {
  describe('tombstones', () => {
    test('isDeleted is false for ids never seen, for live entities, and after a release or a \'none\' commit', async (store) => {
      for (const entity of ['resource', 'credential'] as const) assert.equal(await store.isDeleted(entity, 'never-seen'), false);
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      assert.equal(await store.isDeleted('resource', 'r1'), false);
      assert.equal(await store.isDeleted('credential', 'c1'), false);
      // A provisioning that failed (released) or completed with an error ('none') leaves nothing.
      const failed = await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
      await store.releaseOperation(failed.key, failed.token);
      const errored = await claimed(store, claimInput({ key: 'resource:r3', targetId: 'r3' }));
      await markPending(store, errored, { message: 'Provisioning started', deadlineAt: FOREVER });
      await commit(store, errored, { mutation: { type: 'none' } });
      for (const id of ['r2', 'r3']) assert.equal(await store.isDeleted('resource', id), false);
      await putResource(store, resource('r2'));
      assert.deepEqual(await store.getResource('r2'), resource('r2'));
      assert.equal(await store.pruneTombstones(FOREVER), 0);
    }, { needs: ['pruneTombstones'] });

    test("'deleteResource' tombstones the resource and every credential of it, and only those", async (store) => {
      await putResource(store, resource('r1'));
      await putResource(store, resource('r2'));
      await putCredential(store, credential('c1', 'r1'));
      await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 1 }));
      await putCredential(store, credential('c3', 'r2'));
      await deleteResource(store, 'r1', T0 + 10);
      assert.equal(await store.isDeleted('resource', 'r1'), true);
      assert.equal(await store.isDeleted('credential', 'c1'), true);
      assert.equal(await store.isDeleted('credential', 'c2'), true);
      assert.equal(await store.isDeleted('resource', 'r2'), false);
      assert.equal(await store.isDeleted('credential', 'c3'), false);
      // Kinds are separate namespaces.
      assert.equal(await store.isDeleted('credential', 'r1'), false);
      assert.equal(await store.isDeleted('resource', 'c1'), false);
    });

    test("'deleteCredential' tombstones the credential only", async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      await putCredential(store, credential('c2', 'r1'));
      await deleteCredential(store, 'c1', T0 + 10);
      assert.equal(await store.isDeleted('credential', 'c1'), true);
      assert.equal(await store.isDeleted('credential', 'c2'), false);
      assert.equal(await store.isDeleted('resource', 'r1'), false);
    });

    test("'putResource' of a deleted id answers tombstoned; nothing is written and the operation is still held", async (store) => {
      await putResource(store, resource('r1'));
      await deleteResource(store, 'r1', T0 + 10);
      const op = await claimed(store, claimInput({ now: T0 + 20 }));
      assert.deepEqual(
        await store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1', { createdAt: T0 + 20, updatedAt: T0 + 20 }) }, delivery: delivery('d1') }),
        tombstoned('resource'),
      );
      assert.equal(await store.getResource('r1'), undefined);
      assert.deepEqual(await store.listDeliveries(), []);
      assert.deepEqual(await store.getOperation(op.key), op, 'the caller still holds the operation and releases it');
      await store.releaseOperation(op.key, op.token);
      assert.equal(await store.isDeleted('resource', 'r1'), true);
    }, { needs: ['listDeliveries'] });

    test("'putCredential' of a deleted credential id answers tombstoned; nothing is written", async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      await deleteCredential(store, 'c1', T0 + 10);
      const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' } }));
      assert.deepEqual(
        await store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') }, delivery: delivery('d1') }),
        tombstoned('credential'),
      );
      assert.equal(await store.getCredential('c1'), undefined);
      assert.deepEqual(await store.listCredentials('r1'), []);
      assert.deepEqual(await store.listDeliveries(), []);
      assert.deepEqual(await store.getOperation(op.key), op);
    }, { needs: ['listDeliveries'] });

    test("'putCredential' of a credential deleted with its resource answers parent_missing (the resource is checked first)", async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      await deleteResource(store, 'r1', T0 + 10);
      const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' } }));
      assert.deepEqual(await store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') } }), PARENT_MISSING);
      assert.equal(await store.getCredential('c1'), undefined);
    });

    test('a delete with a stale token writes no tombstone', async (store) => {
      await putResource(store, resource('r1'));
      const old = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
      await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' }, now: old.leaseExpiresAt, owner: 'owner-b' }));
      assert.deepEqual(await store.commitOperation(old.key, old.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } }), LEASE_LOST);
      assert.equal(await store.isDeleted('resource', 'r1'), false);
      assert.deepEqual(await store.getResource('r1'), resource('r1'));
    });

    test('deleting a missing entity still tombstones it; a tombstone keeps its first deletedAt; pruneTombstones drops those before the bound', async (store) => {
      await deleteResource(store, 'r1', T0);
      await deleteCredential(store, 'c1', T0 + 5);
      assert.equal(await store.isDeleted('resource', 'r1'), true);
      assert.equal(await store.isDeleted('credential', 'c1'), true);
      await deleteResource(store, 'r1', T0 + 100);
      // The bound is exclusive: deletedAt < before.
      assert.equal(await store.pruneTombstones(T0), 0);
      assert.equal(await store.pruneTombstones(T0 + 1), 1, 'the second deletion did not move r1\'s tombstone');
      assert.equal(await store.isDeleted('resource', 'r1'), false);
      assert.equal(await store.isDeleted('credential', 'c1'), true);
      assert.equal(await store.pruneTombstones(T0 + 1), 0);
      assert.equal(await store.pruneTombstones(FOREVER), 1);
      assert.equal(await store.isDeleted('credential', 'c1'), false);
      // Which is why pruning is only safe beyond the replay window: the id can be provisioned again.
      await putResource(store, resource('r1'));
      assert.deepEqual(await store.getResource('r1'), resource('r1'));
    }, { needs: ['pruneTombstones'] });
  });
}

/** Registers the cases of entities: credentials. */
export function credentialCases({ describe, test }: Suite): void {
  describe('credentials', () => {
    test('listCredentials: the resource’s sets only, oldest first, ties by id', async (store) => {
      await putResource(store, resource('r1'));
      await putResource(store, resource('r2'));
      await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 5 }));
      await putCredential(store, credential('c3', 'r1', { createdAt: T0 + 1 }));
      await putCredential(store, credential('c1', 'r1', { createdAt: T0 + 5 }));
      await putCredential(store, credential('c0', 'r2', { createdAt: T0 }));
      assert.deepEqual(ids(await store.listCredentials('r1')), ['c3', 'c1', 'c2']);
      assert.deepEqual(ids(await store.listCredentials('r2')), ['c0']);
      assert.deepEqual(await store.listCredentials('r-missing'), []);
    });
  });
}

/** Registers the cases of entities: values. */
export function valueCases({ describe, test }: Suite): void {
  describe('values', () => {
    test('records are copies: changing what went in or came out changes nothing stored', async (store) => {
      const input = resource('r1');
      await putResource(store, input);
      input.features.seats = 99;
      input.plan = 'mutated';
      const read = (await store.getResource('r1'))!;
      read.features.tier = 'mutated';
      read.message = 'mutated';
      assert.deepEqual(await store.getResource('r1'), resource('r1'));

      const cred = credential('c1', 'r1');
      await putCredential(store, cred);
      cred.values.BONNETS_URL = 'mutated';
      const readCred = (await store.getCredential('c1'))!;
      readCred.values.BONNETS_URL = 'mutated';
      (await store.listCredentials('r1'))[0]!.values.BONNETS_URL = 'mutated';
      assert.deepEqual(await store.getCredential('c1'), credential('c1', 'r1'));

      const request: OperationRequest = { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 } };
      const claim = await claimed(store, claimInput({ key: 'resource:r9', targetId: 'r9', request }));
      (request.features as Record<string, unknown>).seats = 2;
      (claim.request as { features: Record<string, unknown> }).features.seats = 3;
      claim.state = 'pending';
      const readOp = (await store.getOperation('resource:r9'))!;
      readOp.fingerprint = 'mutated';
      const stored = (await store.getOperation('resource:r9'))!;
      assert.deepEqual(stored.request, { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 } });
      assert.equal(stored.state, 'running');
      assert.equal(stored.fingerprint, claim.fingerprint);
      (await store.listPendingOperations(10)).forEach((op) => (op.message = 'mutated'));

      const newDelivery = delivery('d1', { payload: { state: 'done', message: 'Credentials ready', credentials: { KEY: 'v' } } });
      await enqueue(store, newDelivery);
      newDelivery.payload.credentials!.KEY = 'mutated';
      const [claimedDelivery] = await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 1 });
      claimedDelivery!.payload.credentials!.KEY = 'mutated';
      claimedDelivery!.attempts = 42;
      const [listed] = await store.listDeliveries();
      assert.deepEqual(listed!.payload, { state: 'done', message: 'Credentials ready', credentials: { KEY: 'v' } });
      assert.equal(listed!.attempts, 0);
      listed!.state = 'failed';
      assert.equal((await store.listDeliveries())[0]!.state, 'pending');

      const entries = [{ resourceId: 'r1', feature: 'requests', quantity: 1, at: T0 }];
      await store.recordUsage(entries);
      entries[0]!.quantity = 1000;
      const totals = await store.sumUsage('r1', 0, FOREVER);
      totals.requests = 5000;
      assert.deepEqual({ ...(await store.sumUsage('r1', 0, FOREVER)) }, { requests: 1 });
    }, { needs: ['listPendingOperations', 'listDeliveries'] });

    test('values round-trip exactly: feature scalars, unicode, long and empty strings', async (store) => {
      const features = {
        int: 42,
        negative: -7,
        zero: 0,
        fraction: 0.1,
        large: 2 ** 53 - 1,
        tiny: 5e-324,
        yes: true,
        no: false,
        text: 'small',
        empty: '',
        unicode: 'ünïcødé ✓ 雪 🔑',
        escapes: 'quote " backslash \\ newline \n tab \t nul \u0000',
      };
      const record = resource('r1', { features, message: 'Prêt — ready ✓' });
      await putResource(store, record);
      assert.deepEqual(await store.getResource('r1'), record);

      const values = {
        BONNETS_URL: 'https://us3r:pässwörd🔑@bonnets.example/r1?x=1&y=%20',
        EMPTY: '',
        LONG: 'x'.repeat(20_000),
        SPECIAL: '\'";--\\\u0000\u2028',
      };
      const cred = credential('c1', 'r1', { values, message: 'Identifiants prêts ✓' });
      await putCredential(store, cred);
      assert.deepEqual(await store.getCredential('c1'), cred);

      const request: OperationRequest = { kind: 'changePlan', plan: 'large', features };
      const op = await claimed(store, claimInput({ kind: 'changePlan', request, fingerprint: 'large|ünï' }));
      assert.deepEqual(op.request, request);
      assert.deepEqual((await store.getOperation(op.key))!.request, request);
      assert.equal((await store.getOperation(op.key))!.fingerprint, 'large|ünï');

      const payload = { state: 'done' as const, message: 'Fertig ✓ 🔑', credentials: values };
      await enqueue(store, delivery('d1', { payload }));
      assert.deepEqual((await store.listDeliveries())[0]!.payload, payload);
      const [taken] = await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 1 });
      assert.deepEqual(taken!.payload, payload);

      await store.recordUsage([{ resourceId: 'r1', feature: 'bytes', quantity: 2 ** 40, at: T0 }]);
      assert.equal((await store.sumUsage('r1', 0, FOREVER)).bytes, 2 ** 40);
    }, { needs: ['listDeliveries'] });

    test('every delivery record field survives the store', async (store) => {
      const record = delivery('d1', { createdAt: T0 + 7, deadlineAt: T0 + 86_400_007 });
      await enqueue(store, record);
      const [taken] = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 7, leaseMs: LEASE, limit: 5 });
      const expected: DeliveryRecord = { ...record, state: 'pending', attempts: 0, nextAttemptAt: T0 + 7, claimedBy: 'owner-a', claimExpiresAt: T0 + 7 + LEASE };
      assert.deepEqual(taken, expected);
      assert.deepEqual(await store.listDeliveries(), [expected]);
    }, { needs: ['listDeliveries'] });
  });
}
