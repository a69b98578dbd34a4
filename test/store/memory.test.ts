import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { memoryStore } from '../../src/store/memory.js';
import { claimed, claimInput, commit, credential, FOREVER, putCredential, putResource, resource, T0 } from '../../src/testkit/conformance/fixtures.js';
import { operationTableContract, storeContract } from './contract.js';

const open = async () => {
  const store = memoryStore();
  return { store, cleanup: () => store.close() };
};

storeContract('memory', open);
operationTableContract('memory', open);

// memoryStore keeps copies, as a database would: what a caller hands in or gets back is never the
// stored object, and a copy has structuredClone's result (plain objects walked directly, anything
// else by structuredClone itself).
describe('memoryStore copies records in and out', () => {
  it('a caller mutating what it stored or what it read changes nothing stored', async () => {
    const store = memoryStore();
    const record = resource('r-copy');
    await putResource(store, record);
    record.plan = 'changed-after-commit';
    (record.features as Record<string, unknown>).seats = 99;
    const read = (await store.getResource('r-copy'))!;
    assert.equal(read.plan, 'small');
    assert.deepEqual(read.features, { seats: 3, sso: true, tier: 'gold' });
    read.plan = 'changed-after-read';
    (read.features as Record<string, unknown>).sso = false;
    assert.deepEqual(await store.getResource('r-copy'), resource('r-copy'));
  });

  it('copies what is not a tree of plain objects as structuredClone does: arrays, shared references, an own __proto__ key', async () => {
    const store = memoryStore();
    const shared = { seats: 3 };
    // Features are flat in the interface; the store's copy must still be faithful for any record.
    const features = { list: [1, { two: 2 }], first: shared, second: shared, ...(JSON.parse('{"__proto__": {"polluted": true}}') as object) } as never;
    await putResource(store, resource('r-odd', { features }));
    const read = (await store.getResource('r-odd'))!.features as unknown as { list: unknown[]; first: object; second: object; polluted?: unknown };
    assert.deepEqual(read.list, [1, { two: 2 }]);
    assert.notEqual(read.list, (features as { list: unknown[] }).list, 'the array is a copy');
    assert.equal(read.first, read.second, 'a shared object stays shared within the copy, as structuredClone keeps it');
    assert.notEqual(read.first, shared);
    assert.ok(Object.hasOwn(read, '__proto__'), 'an own __proto__ key stays an own key');
    assert.equal(read.polluted, undefined, 'and never becomes the prototype');
    assert.equal(({} as { polluted?: unknown }).polluted, undefined);
  });

  it('keeps its own copy of every free-form part: an operation\'s request, a credential\'s values, a recorded answer\'s body', async () => {
    const store = memoryStore();
    // The operation: the claim's request, and the record read back.
    const request = { kind: 'provision', product: 'bonnets', plan: 'small', region: 'aws::us-east-1', features: { seats: 3 } } as const;
    const input = claimInput({ key: 'resource:r-op', targetId: 'r-op', request: { ...request, features: { ...request.features } } });
    const held = await claimed(store, input);
    (input.request as { features: Record<string, unknown> }).features.seats = 99;
    (held.request as { plan: string }).plan = 'changed-after-claim';
    const read = (await store.getOperation('resource:r-op'))!;
    assert.deepEqual(read.request, request);
    (read.request as { features: Record<string, unknown> }).features.seats = 7;
    assert.deepEqual((await store.getOperation('resource:r-op'))!.request, request);

    // The credential: its values, as committed and as read.
    await putResource(store, resource('r-cred'));
    const record = credential('c-copy', 'r-cred');
    const values = { ...record.values };
    await putCredential(store, record);
    record.values.BONNETS_URL = 'https://changed-after-commit.example';
    const stored = (await store.getCredential('c-copy'))!;
    assert.deepEqual(stored.values, values);
    stored.values.BONNETS_URL = 'https://changed-after-read.example';
    assert.deepEqual((await store.getCredential('c-copy'))!.values, values);

    // The answer recorded against a signature, by a commit: what the replay answers.
    const body = { message: 'Resource provisioned' };
    const answer = { status: 201, body: { ...body } };
    await commit(store, held, { mutation: { type: 'putResource', resource: resource('r-op') }, replay: { requestId: 'sig-copy', answer, expiresAt: FOREVER } });
    answer.body.message = 'changed-after-commit';
    const replayed = await store.claimOperation(claimInput({ key: 'resource:r-op', targetId: 'r-op', requestId: 'sig-copy', replayExpiresAt: FOREVER, now: T0 + 1 }));
    assert.equal(replayed.outcome, 'replayed');
    assert.deepEqual(replayed.outcome === 'replayed' ? replayed.answer : undefined, { status: 201, body });
    if (replayed.outcome === 'replayed') (replayed.answer.body as { message: string }).message = 'changed-after-read';
    const again = await store.recordReplay({ requestId: 'sig-copy', answer: { status: 500, body: { message: 'Internal error' } }, expiresAt: FOREVER }, T0 + 2);
    assert.deepEqual(again, { status: 201, body }, 'the first answer stands, unchanged by what its readers did');
  });
});
