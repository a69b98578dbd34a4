/**
 * The conformance suite as an adapter written outside this package runs it: from the testkit
 * entry, with node:test's describe and it, in a few lines. The memory store stands in for the
 * outside adapter; the cipher export seals and opens as the bundled stores do.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { memoryStore } from '../../src/index.js';
import { createCipher, DecryptionError, generateEncryptionKey, storeConformance } from '../../src/testkit/index.js';

storeConformance({
  name: 'memory store through the testkit export',
  describe,
  it,
  async makeStore() {
    const store = memoryStore();
    return { store, cleanup: () => store.close() };
  },
});

describe('testkit credential cipher', () => {
  it('seals a value bound to its row and opens it only there, with the same key', () => {
    const key = generateEncryptionKey();
    const sealed = createCipher(key).seal({ URL: 'https://u:secret@db.example' }, 'credential:c1');
    assert.equal(sealed.includes(Buffer.from('secret')), false);
    assert.deepEqual(createCipher(key).open(sealed, 'credential:c1'), { URL: 'https://u:secret@db.example' });
    assert.throws(() => createCipher(key).open(sealed, 'credential:c2'), DecryptionError);
    assert.throws(() => createCipher(generateEncryptionKey()).open(sealed, 'credential:c1'), DecryptionError);
  });
});
