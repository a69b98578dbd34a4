import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { memoryStore } from '../../src/store/memory.js';
import { putResource, resource } from '../../src/testkit/conformance/fixtures.js';
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
});
