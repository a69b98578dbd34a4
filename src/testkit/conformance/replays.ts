/** Store conformance: Replay records: the answer recorded against a request id, and their pruning. */
import assert from 'node:assert/strict';
import { T0, claimInput, resource, claimed, credentialClaim, type Suite } from './fixtures.js';

/** Registers the cases of replays: replays. */
export function replayCases({ describe, test }: Suite): void {
  describe('replay records', () => {
    test('a committed replay record answers a claim with that request id, and nothing is claimed', async (store) => {
      const op = await claimed(store, claimInput());
      const answer = { status: 201, body: { message: 'Resource r1 is ready' } };
      await store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1') }, replay: { requestId: 'sig-1', answer, expiresAt: T0 + 600_000 } });
      assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-1', now: T0 + 1 })), { outcome: 'replayed', answer });
      assert.equal(await store.getOperation('resource:r1'), undefined, 'a replay claims nothing');
      assert.equal((await store.claimOperation(claimInput({ requestId: 'sig-2', now: T0 + 1 }))).outcome, 'claimed', 'another signature claims');
    });

    test('a replay record written with a 202 answers 202 again; records keep credential values', async (store) => {
      const op = await claimed(store, credentialClaim('c1', 'r1'));
      await store.markOperationPending(op.key, op.token, { message: 'Issuing', deadlineAt: T0 + 86_400_000, replay: { requestId: 'sig-p', answer: { status: 202, body: { message: 'Issuing' } }, expiresAt: T0 + 600_000 } });
      assert.deepEqual(await store.claimOperation(credentialClaim('c1', 'r1', { requestId: 'sig-p', now: T0 + 1 })), { outcome: 'replayed', answer: { status: 202, body: { message: 'Issuing' } } });

      const other = await claimed(store, claimInput({ key: 'resource:r9', targetId: 'r9' }));
      const body = { message: 'Ready', credentials: { BONNETS_URL: 'https://u:p@bonnets.example' } };
      await store.commitOperation(other.key, other.token, { mutation: { type: 'none' }, replay: { requestId: 'sig-c', answer: { status: 201, body }, expiresAt: T0 + 600_000 } });
      const replayed = await store.claimOperation(claimInput({ key: 'resource:r9', targetId: 'r9', requestId: 'sig-c', now: T0 + 1 }));
      assert.deepEqual(replayed, { outcome: 'replayed', answer: { status: 201, body } });
    });

    test('pruneReplays deletes records past their time and answers how many', async (store) => {
      for (const [requestId, expiresAt] of [['old', T0 + 10], ['edge', T0 + 20], ['new', T0 + 30]] as const) {
        const op = await claimed(store, claimInput({ key: `resource:${requestId}`, targetId: requestId }));
        await store.commitOperation(op.key, op.token, { mutation: { type: 'none' }, replay: { requestId, answer: { status: 204 }, expiresAt } });
      }
      assert.equal(await store.pruneReplays(T0 + 20), 1);
      assert.equal((await store.claimOperation(claimInput({ key: 'resource:old', targetId: 'old', requestId: 'old', now: T0 + 21 }))).outcome, 'claimed');
      assert.equal((await store.claimOperation(claimInput({ key: 'resource:edge', targetId: 'edge', requestId: 'edge', now: T0 + 20 }))).outcome, 'replayed');
      assert.equal(await store.pruneReplays(T0 + 31), 2);
    });
  });
}
