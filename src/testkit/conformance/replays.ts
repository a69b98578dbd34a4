/** Store conformance: Replay records: the answer recorded against a request id, and their pruning. */
import assert from 'node:assert/strict';
import { T0, claimInput, resource, claimed, credentialClaim, deprovisionClaim, commit, markPending, putResource, type Suite } from './fixtures.js';

/** Registers the cases of replays: replays. */
export function replayCases({ describe, test }: Suite): void {
  describe('replay records', () => {
    test('a committed replay record answers a claim with that request id, and nothing is claimed', async (store) => {
      const op = await claimed(store, claimInput());
      const answer = { status: 201, body: { message: 'Resource r1 is ready' } };
      await commit(store, op, { mutation: { type: 'putResource', resource: resource('r1') }, replay: { requestId: 'sig-1', answer, expiresAt: T0 + 600_000 } });
      assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-1', now: T0 + 1 })), { outcome: 'replayed', answer });
      assert.equal(await store.getOperation('resource:r1'), undefined, 'a replay claims nothing');
      assert.equal((await store.claimOperation(claimInput({ requestId: 'sig-2', now: T0 + 1 }))).outcome, 'claimed', 'another signature claims');
    });

    test('a replay record written with a 202 answers 202 again; records keep credential values', async (store) => {
      const op = await claimed(store, credentialClaim('c1', 'r1'));
      await markPending(store, op, { message: 'Issuing', deadlineAt: T0 + 86_400_000, replay: { requestId: 'sig-p', answer: { status: 202, body: { message: 'Issuing' } }, expiresAt: T0 + 600_000 } });
      assert.deepEqual(await store.claimOperation(credentialClaim('c1', 'r1', { requestId: 'sig-p', now: T0 + 1 })), { outcome: 'replayed', answer: { status: 202, body: { message: 'Issuing' } } });

      const other = await claimed(store, claimInput({ key: 'resource:r9', targetId: 'r9' }));
      const body = { message: 'Ready', credentials: { BONNETS_URL: 'https://u:p@bonnets.example' } };
      await commit(store, other, { mutation: { type: 'none' }, replay: { requestId: 'sig-c', answer: { status: 201, body }, expiresAt: T0 + 600_000 } });
      const replayed = await store.claimOperation(claimInput({ key: 'resource:r9', targetId: 'r9', requestId: 'sig-c', now: T0 + 1 }));
      assert.deepEqual(replayed, { outcome: 'replayed', answer: { status: 201, body } });
    });

    test('pruneReplays deletes records past their time and answers how many', async (store) => {
      for (const [requestId, expiresAt] of [['old', T0 + 10], ['edge', T0 + 20], ['new', T0 + 30]] as const) {
        const op = await claimed(store, claimInput({ key: `resource:${requestId}`, targetId: requestId }));
        await commit(store, op, { mutation: { type: 'none' }, replay: { requestId, answer: { status: 204 }, expiresAt } });
      }
      assert.equal(await store.pruneReplays(T0 + 20), 1);
      assert.equal((await store.claimOperation(claimInput({ key: 'resource:old', targetId: 'old', requestId: 'old', now: T0 + 21 }))).outcome, 'claimed');
      assert.equal((await store.claimOperation(claimInput({ key: 'resource:edge', targetId: 'edge', requestId: 'edge', now: T0 + 20 }))).outcome, 'replayed');
      assert.equal(await store.pruneReplays(T0 + 31), 2);
    });

    test('a claim refused as a conflict records its 409 against the request id, in the same step', async (store) => {
      const holder = await claimed(store, claimInput());
      const refused = await store.claimOperation(claimInput({ fingerprint: 'other', requestId: 'sig-409', replayExpiresAt: T0 + 600_000, now: T0 + 1 }));
      const conflict = { status: 409, body: { message: 'Another operation on this entity is in progress' } };
      assert.deepEqual(refused, { outcome: 'conflict', operation: holder, answer: conflict });
      await store.releaseOperation(holder.key, holder.token);
      // The key is free now: the same signed request still answers its 409 and claims nothing.
      assert.deepEqual(await store.claimOperation(claimInput({ fingerprint: 'other', requestId: 'sig-409', replayExpiresAt: T0 + 600_000, now: T0 + 2 })), { outcome: 'replayed', answer: conflict });
      assert.equal(await store.getOperation('resource:r1'), undefined);
    });

    test('a claim of a pending operation records its 202; a refusal without replayExpiresAt records nothing', async (store) => {
      const op = await claimed(store, claimInput());
      await markPending(store, op, { message: 'Knitting', deadlineAt: T0 + 86_400_000 });
      const accepted = { status: 202, body: { message: 'Knitting' } };
      assert.equal((await store.claimOperation(claimInput({ requestId: 'sig-202', replayExpiresAt: T0 + 600_000, now: T0 + 1 }))).outcome, 'pending');
      assert.equal((await store.claimOperation(claimInput({ fingerprint: 'other', requestId: 'sig-none', now: T0 + 1 }))).outcome, 'conflict');
      await commit(store, op, { mutation: { type: 'putResource', resource: resource('r1') } });
      assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-202', now: T0 + 2 })), { outcome: 'replayed', answer: accepted });
      const fresh = await store.claimOperation(claimInput({ fingerprint: 'other', requestId: 'sig-none', now: T0 + 2 }));
      assert.equal(fresh.outcome, 'claimed', 'nothing was recorded for sig-none');
    });

    test('a credential claim refused by a pending deprovision records its 409; waits (busy, blocked) record nothing', async (store) => {
      await putResource(store, resource('r1'));
      const running = await claimed(store, deprovisionClaim('r1', { now: T0 + 1 }));
      const blocked = await store.claimOperation(credentialClaim('c1', 'r1', { requestId: 'sig-wait', replayExpiresAt: T0 + 600_000, now: T0 + 2 }));
      assert.equal(blocked.outcome, 'blocked');
      const busy = await store.claimOperation(deprovisionClaim('r1', { requestId: 'sig-busy', replayExpiresAt: T0 + 600_000, now: T0 + 2 }));
      assert.equal(busy.outcome, 'busy');
      await markPending(store, running, { message: 'Unravelling', deadlineAt: T0 + 86_400_000 });
      const refused = await store.claimOperation(credentialClaim('c1', 'r1', { requestId: 'sig-409', replayExpiresAt: T0 + 600_000, now: T0 + 3 }));
      assert.equal(refused.outcome, 'conflict');
      await store.releaseOperation(running.key, running.token);
      assert.equal((await store.claimOperation(credentialClaim('c1', 'r1', { requestId: 'sig-409', now: T0 + 4 }))).outcome, 'replayed');
      assert.equal((await store.claimOperation(credentialClaim('c2', 'r1', { requestId: 'sig-wait', now: T0 + 4 }))).outcome, 'claimed');
      assert.equal((await store.claimOperation(deprovisionClaim('r2', { requestId: 'sig-busy', now: T0 + 4 }))).outcome, 'claimed');
    });

    test('recordReplay writes an answer alone unless one stands, and answers the one that stands', async (store) => {
      const first = { status: 400, body: { message: 'Unknown plan huge for product bonnets' } };
      assert.deepEqual(await store.recordReplay({ requestId: 'sig-r', answer: first, expiresAt: T0 + 600_000 }, T0), first);
      const later = { status: 503, body: { message: 'The operation is still in progress, retry later' } };
      assert.deepEqual(await store.recordReplay({ requestId: 'sig-r', answer: later, expiresAt: T0 + 600_000 }, T0 + 1), first, 'the first answer stands');
      assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-r', now: T0 + 2 })), { outcome: 'replayed', answer: first });
      // A commit's record does not replace it either.
      const op = await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
      await commit(store, op, { mutation: { type: 'none' }, replay: { requestId: 'sig-r', answer: { status: 201, body: { message: 'Ready' } }, expiresAt: T0 + 600_000 } });
      assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-r', now: T0 + 3 })), { outcome: 'replayed', answer: first });
      assert.equal((await store.claimOperation(claimInput({ requestId: 'sig-r', now: T0 + 600_001 }))).outcome, 'claimed', 'an expired record answers nothing');
    });
  });
}
