/** Store conformance: The operation table's own rules: claim, renew and release, pending, commit. */
import assert from 'node:assert/strict';
import {
  T0, LEASE, FOREVER, provisionRequest, claimInput, resource, credential, delivery, claimed, heldBy, putResource, putCredential, enqueue, ids,
  commit, markPending, COMMITTED, LEASE_LOST, PARENT_MISSING, type Suite,
} from './fixtures.js';

/** Registers the cases of operations: claim, renew, pending, commit. */
export function operationCases({ describe, test }: Suite): void {
  describe('operations: claim', () => {
    test('a first claim takes the key with a fresh running record', async (store) => {
      const result = await store.claimOperation(claimInput());
      assert.equal(result.outcome, 'claimed');
      const op = result.operation;
      assert.equal(typeof op.token, 'string');
      assert.ok(op.token.length >= 16, 'the fencing token is not guessable');
      assert.deepEqual(op, {
        key: 'resource:r1',
        kind: 'provision',
        targetId: 'r1',
        fingerprint: 'bonnets|small|aws::us-east-1',
        state: 'running',
        token: op.token,
        owner: 'owner-a',
        leaseExpiresAt: T0 + LEASE,
        request: provisionRequest,
        createdAt: T0,
      });
      assert.deepEqual(await store.getOperation('resource:r1'), op);
    });

    test('a live running claim makes an identical claim busy and refuses another fingerprint as a conflict (409)', async (store) => {
      // Changed by issue 19: the claim itself tells a conflict from a duplicate, so that it can
      // record the refusal against the request's signature in the same step (see replays).
      const first = await claimed(store, claimInput());
      const again = await store.claimOperation(claimInput({ owner: 'owner-b', now: T0 + LEASE - 1 }));
      assert.deepEqual(again, { outcome: 'busy', operation: first });
      const other = await store.claimOperation(claimInput({ fingerprint: 'something|else', owner: 'owner-b', now: T0 + LEASE - 1 }));
      assert.deepEqual(other, { outcome: 'conflict', operation: first, answer: { status: 409, body: { message: 'Another operation on this entity is in progress' } } });
      assert.deepEqual(await store.getOperation('resource:r1'), first);
    });

    test('keys are independent', async (store) => {
      const a = await claimed(store, claimInput());
      const b = await claimed(store, claimInput({ key: 'credential:r1', kind: 'provisionCredentials', request: { kind: 'provisionCredentials', resourceId: 'r0' } }));
      assert.notEqual(a.token, b.token);
    });

    test('a lapsed lease is taken over with a new token; the old token then holds nothing', async (store) => {
      const old = await claimed(store, claimInput());
      // Live while leaseExpiresAt > now: at exactly leaseExpiresAt it has lapsed.
      assert.equal((await store.claimOperation(claimInput({ now: old.leaseExpiresAt - 1 }))).outcome, 'busy');
      const takeover = await store.claimOperation(
        claimInput({ owner: 'owner-b', fingerprint: 'bonnets|large|aws::us-east-1', now: old.leaseExpiresAt, leaseMs: 5_000 }),
      );
      assert.equal(takeover.outcome, 'claimed');
      const fresh = takeover.operation;
      assert.notEqual(fresh.token, old.token);
      assert.equal(fresh.owner, 'owner-b');
      assert.equal(fresh.fingerprint, 'bonnets|large|aws::us-east-1');
      assert.equal(fresh.createdAt, old.leaseExpiresAt);
      assert.equal(fresh.leaseExpiresAt, old.leaseExpiresAt + 5_000);

      assert.equal(await store.renewOperation(old.key, old.token, T0 + 10 * LEASE), false);
      assert.equal(await store.markOperationPending(old.key, old.token, { message: 'Working on it', deadlineAt: FOREVER }), undefined);
      assert.deepEqual(await store.commitOperation(old.key, old.token, { mutation: { type: 'putResource', resource: resource('r1') } }), LEASE_LOST);
      await store.releaseOperation(old.key, old.token);
      assert.deepEqual(await store.getOperation('resource:r1'), fresh, 'the new holder is untouched by the old token');
      assert.equal(await store.getResource('r1'), undefined);
    });

    test('50 concurrent claims of one key: exactly one is claimed, the others see it busy', async (store) => {
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.claimOperation(claimInput({ owner: `owner-${i}` }))));
      const winners = results.filter((r) => r.outcome === 'claimed');
      assert.equal(winners.length, 1);
      const token = winners[0]!.operation.token;
      for (const result of results) assert.equal(heldBy(result).token, token);
      assert.equal((await store.getOperation('resource:r1'))?.token, token);
    });
  });

  describe('operations: renew and release', () => {
    test('renew extends a running claim and answers false for a token that does not hold it', async (store) => {
      const op = await claimed(store, claimInput());
      assert.equal(await store.renewOperation(op.key, op.token, T0 + 2 * LEASE), true);
      assert.equal((await store.getOperation(op.key))?.leaseExpiresAt, T0 + 2 * LEASE);
      assert.equal((await store.claimOperation(claimInput({ now: T0 + LEASE }))).outcome, 'busy', 'the renewed lease still holds');
      assert.equal(await store.renewOperation(op.key, 'not-the-token', FOREVER), false);
      assert.equal(await store.renewOperation('resource:nobody', op.token, FOREVER), false);
      assert.equal((await store.getOperation(op.key))?.leaseExpiresAt, T0 + 2 * LEASE);
      assert.equal((await store.claimOperation(claimInput({ now: T0 + 2 * LEASE }))).outcome, 'claimed');
    });

    test('renew does not apply to a pending operation', async (store) => {
      const op = await claimed(store, claimInput());
      await markPending(store, op, { message: 'Provisioning started', deadlineAt: T0 + 1000 });
      assert.equal(await store.renewOperation(op.key, op.token, FOREVER), false);
    });

    test('release drops the claim; a wrong token is a no-op', async (store) => {
      const op = await claimed(store, claimInput());
      await store.releaseOperation(op.key, 'not-the-token');
      await store.releaseOperation('resource:nobody', op.token);
      assert.deepEqual(await store.getOperation(op.key), op);
      await store.releaseOperation(op.key, op.token);
      assert.equal(await store.getOperation(op.key), undefined);
      assert.equal((await store.claimOperation(claimInput({ now: T0 + 1 }))).outcome, 'claimed');
    });
  });

  describe('operations: pending', () => {
    test('markOperationPending turns the claim pending with its 202 message, callback and deadline', async (store) => {
      const op = await claimed(store, claimInput());
      const pending = await markPending(store, op, {
        message: 'Provisioning started — we will call back',
        callbackId: 'cb1',
        callbackUrl: 'https://connector.example/v1/callbacks/cb1',
        deadlineAt: T0 + 86_400_000,
      });
      assert.deepEqual(pending, {
        ...op,
        state: 'pending',
        message: 'Provisioning started — we will call back',
        callbackId: 'cb1',
        callbackUrl: 'https://connector.example/v1/callbacks/cb1',
        deadlineAt: T0 + 86_400_000,
      });
      assert.deepEqual(await store.getOperation(op.key), pending);
    });

    test('without callback headers the callback fields stay absent', async (store) => {
      const op = await claimed(store, claimInput());
      const pending = await markPending(store, op, { message: 'Provisioning started', deadlineAt: T0 + 1000 });
      assert.equal('callbackId' in pending, false);
      assert.equal('callbackUrl' in pending, false);
      const stored = await store.getOperation(op.key);
      assert.equal(stored !== undefined && 'callbackId' in stored, false);
    });

    test('a stale token cannot mark pending: undefined, nothing written', async (store) => {
      assert.equal(await store.markOperationPending('resource:r1', 'nobody', { message: 'Provisioning started', deadlineAt: FOREVER }), undefined);
      const op = await claimed(store, claimInput());
      assert.equal(await store.markOperationPending(op.key, 'wrong', { message: 'Provisioning started', deadlineAt: FOREVER }), undefined);
      assert.equal((await store.getOperation(op.key))?.state, 'running');
    });

    test('a pending operation holds the key past its lease until its deadline, then a claim replaces it whole', async (store) => {
      const op = await claimed(store, claimInput());
      const deadlineAt = T0 + 10 * LEASE;
      await markPending(store, op, { message: 'Provisioning started', callbackId: 'cb1', callbackUrl: 'https://c.example/cb1', deadlineAt });
      // Changed by issue 19: an identical claim of a pending operation answers its 202 (`pending`).
      const busy = await store.claimOperation(claimInput({ now: deadlineAt - 1 }));
      assert.equal(busy.outcome, 'pending');
      assert.equal(heldBy(busy).state, 'pending');
      assert.equal(heldBy(busy).message, 'Provisioning started');
      assert.deepEqual(busy.outcome === 'pending' ? busy.answer : undefined, { status: 202, body: { message: 'Provisioning started' } });

      const again = await store.claimOperation(claimInput({ now: deadlineAt, owner: 'owner-b', fingerprint: 'fresh' }));
      assert.equal(again.outcome, 'claimed');
      assert.deepEqual(again.operation, {
        key: op.key,
        kind: 'provision',
        targetId: 'r1',
        fingerprint: 'fresh',
        state: 'running',
        token: again.operation.token,
        owner: 'owner-b',
        leaseExpiresAt: deadlineAt + LEASE,
        request: provisionRequest,
        createdAt: deadlineAt,
      });
      assert.notEqual(again.operation.token, op.token);
      assert.deepEqual(await store.getOperation(op.key), again.operation);
    });

    test('the token of a pending operation completes it (commit) or abandons it (release)', async (store) => {
      const a = await claimed(store, claimInput());
      await markPending(store, a, { message: 'Provisioning started', deadlineAt: FOREVER });
      await commit(store, a, { mutation: { type: 'putResource', resource: resource('r1') } });
      assert.equal(await store.getOperation(a.key), undefined);
      assert.deepEqual(await store.getResource('r1'), resource('r1'));

      const b = await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
      await markPending(store, b, { message: 'Provisioning started', deadlineAt: FOREVER });
      await store.releaseOperation(b.key, b.token);
      assert.equal(await store.getOperation(b.key), undefined);
    });

    test('listPendingOperations lists pending ones only, oldest first, up to the limit', async (store) => {
      for (const [id, at] of [['p2', T0 + 2], ['p0', T0], ['p1', T0 + 1]] as const) {
        const op = await claimed(store, claimInput({ key: `resource:${id}`, targetId: id, now: at }));
        await markPending(store, op, { message: `Pending ${id}`, deadlineAt: FOREVER });
      }
      await claimed(store, claimInput({ key: 'resource:running', targetId: 'running', now: T0 - 5 }));
      const all = await store.listPendingOperations(10);
      assert.deepEqual(
        all.map((op) => op.targetId),
        ['p0', 'p1', 'p2'],
      );
      for (const op of all) assert.equal(op.state, 'pending');
      assert.deepEqual(
        (await store.listPendingOperations(2)).map((op) => op.targetId),
        ['p0', 'p1'],
      );
    }, { needs: ['listPendingOperations'] });
  });

  describe('operations: commit', () => {
    test("'none' only releases the operation", async (store) => {
      const op = await claimed(store, claimInput());
      await commit(store, op, { mutation: { type: 'none' } });
      assert.equal(await store.getOperation(op.key), undefined);
      assert.equal(await store.getResource('r1'), undefined);
      assert.deepEqual(await store.listDeliveries(), []);
    }, { needs: ['listDeliveries'] });

    test("'putResource' stores the record and replaces it on a later commit", async (store) => {
      await putResource(store, resource('r1'));
      assert.deepEqual(await store.getResource('r1'), resource('r1'));
      assert.equal(await store.getOperation('resource:r1'), undefined, 'the operation is released by the commit');

      const op = await claimed(store, claimInput({ kind: 'changePlan', request: { kind: 'changePlan', plan: 'large', features: { seats: 10 } }, now: T0 + 5 }));
      const changed = resource('r1', { plan: 'large', features: { seats: 10 }, updatedAt: T0 + 5 });
      await commit(store, op, { mutation: { type: 'putResource', resource: changed } });
      assert.deepEqual(await store.getResource('r1'), changed);
    });

    test("'putCredential' stores a credential set under its resource", async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      assert.deepEqual(await store.getCredential('c1'), credential('c1', 'r1'));
      assert.deepEqual(await store.listCredentials('r1'), [credential('c1', 'r1')]);
      assert.equal(await store.getOperation('credential:c1'), undefined);
    });

    test("'putCredential' for a missing resource answers parent_missing; nothing is written and the operation is still held", async (store) => {
      const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r-missing' } }));
      assert.deepEqual(
        await store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r-missing') }, delivery: delivery('d1') }),
        PARENT_MISSING,
      );
      assert.equal(await store.getCredential('c1'), undefined);
      assert.deepEqual(await store.listDeliveries(), []);
      assert.deepEqual(await store.getOperation(op.key), op, 'the caller still holds the operation and releases it');
      await store.releaseOperation(op.key, op.token);
      assert.equal(await store.getOperation(op.key), undefined);
    }, { needs: ['listDeliveries'] });

    test("'putCredential' after the resource was deleted answers parent_missing", async (store) => {
      await putResource(store, resource('r1'));
      const del = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
      await commit(store, del, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
      const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1' }));
      assert.deepEqual(await store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') } }), PARENT_MISSING);
      assert.equal(await store.getCredential('c1'), undefined);
    });

    test("'deleteResource' removes the resource and every credential of it, and only those", async (store) => {
      await putResource(store, resource('r1'));
      await putResource(store, resource('r2'));
      await putCredential(store, credential('c1', 'r1'));
      await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 1 }));
      await putCredential(store, credential('c3', 'r2'));
      const op = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
      await commit(store, op, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
      assert.equal(await store.getResource('r1'), undefined);
      assert.equal(await store.getCredential('c1'), undefined);
      assert.equal(await store.getCredential('c2'), undefined);
      assert.deepEqual(await store.listCredentials('r1'), []);
      assert.deepEqual(await store.getResource('r2'), resource('r2'));
      assert.deepEqual(await store.getCredential('c3'), credential('c3', 'r2'));
    });

    test("'deleteCredential' removes one credential set; deleting a missing one is harmless", async (store) => {
      await putResource(store, resource('r1'));
      await putCredential(store, credential('c1', 'r1'));
      await putCredential(store, credential('c2', 'r1'));
      for (const id of ['c1', 'c-missing']) {
        const op = await claimed(store, claimInput({ key: `credential:${id}`, kind: 'deprovisionCredentials', targetId: id, request: { kind: 'deprovisionCredentials' } }));
        await commit(store, op, { mutation: { type: 'deleteCredential', id, deletedAt: T0 + 10 } });
        assert.equal(await store.getOperation(op.key), undefined);
      }
      assert.equal(await store.getCredential('c1'), undefined);
      assert.deepEqual(ids(await store.listCredentials('r1')), ['c2']);
      assert.deepEqual(await store.getResource('r1'), resource('r1'));
    });

    test("'deleteResource' of a missing resource is harmless", async (store) => {
      const op = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
      await commit(store, op, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
      assert.equal(await store.getOperation(op.key), undefined);
    });

    test('a stale token answers lease_lost and writes nothing', async (store) => {
      const old = await claimed(store, claimInput());
      const fresh = await claimed(store, claimInput({ now: old.leaseExpiresAt, owner: 'owner-b' }));
      assert.deepEqual(
        await store.commitOperation(old.key, old.token, { mutation: { type: 'putResource', resource: resource('r1') }, delivery: delivery('d1'), replay: { requestId: 'sig-stale', answer: { status: 201 }, expiresAt: FOREVER } }),
        LEASE_LOST,
      );
      assert.deepEqual(await store.commitOperation('resource:never', 'nobody', { mutation: { type: 'none' } }), LEASE_LOST);
      assert.equal((await store.claimOperation(claimInput({ key: 'resource:x', targetId: 'x', requestId: 'sig-stale', now: T0 + 1 }))).outcome, 'claimed', 'no replay record was written');
      assert.equal(await store.getResource('r1'), undefined);
      assert.deepEqual(await store.listDeliveries(), []);
      assert.deepEqual(await store.getOperation(old.key), fresh);
    }, { needs: ['listDeliveries'] });

    test('two concurrent commits with one token: exactly one applies', async (store) => {
      const op = await claimed(store, claimInput());
      const outcomes = await Promise.all([
        store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1', { plan: 'small' }) }, delivery: delivery('d1') }),
        store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1', { plan: 'large' }) }, delivery: delivery('d2') }),
      ]);
      assert.deepEqual([...outcomes].sort((a, b) => a.outcome.localeCompare(b.outcome)), [COMMITTED, LEASE_LOST]);
      const winner = outcomes[0].outcome === 'committed' ? { plan: 'small', delivery: 'd1' } : { plan: 'large', delivery: 'd2' };
      assert.equal((await store.getResource('r1'))?.plan, winner.plan);
      assert.deepEqual(ids(await store.listDeliveries()), [winner.delivery]);
    }, { needs: ['listDeliveries'] });

    test('a commit enqueues its delivery in the same step', async (store) => {
      const record = delivery('d1', { payload: { state: 'done', message: 'Credentials ready', credentials: { BONNETS_URL: 'https://u:p@b.example/r1' } } });
      await enqueue(store, record);
      assert.deepEqual(await store.listDeliveries(), [{ ...record, state: 'pending', attempts: 0, nextAttemptAt: record.createdAt }]);
    }, { needs: ['listDeliveries'] });
  });
}
