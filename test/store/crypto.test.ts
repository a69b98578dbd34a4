import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidOptionsError } from '../../src/errors.js';
import { createCipher, DecryptionError, generateEncryptionKey, resolveEncryptionKeys } from '../../src/store/crypto.js';

const raw = randomBytes(32);
const secret = { BONNETS_URL: 'https://user:pässwörd🔑@bonnets.example/r1' };

describe('createCipher', () => {
  it('round-trips JSON values under the same context', () => {
    const cipher = createCipher(raw);
    for (const value of [secret, { state: 'done', message: 'ok ✓', credentials: { A: '' } }, 'text', 0, null, [1, 'two']]) {
      assert.deepEqual(cipher.open(cipher.seal(value, 'credential:c1'), 'credential:c1'), value);
    }
  });

  it('uses a fresh IV every time and never stores the plaintext', () => {
    const cipher = createCipher(raw);
    const a = cipher.seal(secret, 'credential:c1');
    const b = cipher.seal(secret, 'credential:c1');
    assert.notDeepEqual(a, b);
    assert.notDeepEqual(a.subarray(2, 14), b.subarray(2, 14));
    assert.equal(a.includes(Buffer.from('pässwörd')), false);
    assert.equal(a[0], 1, 'format version');
    assert.equal(a[1], 1, 'key id of a plain key');
  });

  it('rejects a value moved to another row (context mismatch)', () => {
    const cipher = createCipher(raw);
    const sealed = cipher.seal(secret, 'credential:c1');
    assert.throws(() => cipher.open(sealed, 'credential:c2'), DecryptionError);
  });

  it('rejects any one-byte change', () => {
    const cipher = createCipher(raw);
    const sealed = cipher.seal(secret, 'credential:c1');
    fc.assert(
      fc.property(fc.nat({ max: sealed.length - 1 }), fc.integer({ min: 1, max: 255 }), (index, flip) => {
        const tampered = Buffer.from(sealed);
        tampered[index] = tampered[index]! ^ flip;
        assert.throws(() => cipher.open(tampered, 'credential:c1'), DecryptionError);
      }),
    );
    assert.throws(() => cipher.open(sealed.subarray(0, 20), 'credential:c1'), DecryptionError);
    assert.throws(() => cipher.open(Buffer.concat([sealed, Buffer.from([0])]), 'credential:c1'), DecryptionError);
  });

  it('rejects the wrong key with a message that names no secret', () => {
    const sealed = createCipher(raw).seal(secret, 'credential:c1');
    assert.throws(
      () => createCipher(randomBytes(32)).open(sealed, 'credential:c1'),
      (error: unknown) => error instanceof DecryptionError && error.code === 'ERR_DECRYPTION_FAILED' && !/pässwörd|user/.test(error.message),
    );
  });

  it('accepts a key as bytes, base64, base64url (padded or not) or hex, all the same key', () => {
    const sealed = createCipher(raw).seal(secret, 'x');
    const b64 = raw.toString('base64');
    for (const form of [raw, new Uint8Array(raw), b64, b64.replace(/=+$/, ''), raw.toString('base64url'), raw.toString('hex'), raw.toString('hex').toUpperCase(), ` ${b64}\n`]) {
      assert.deepEqual(createCipher(form).open(sealed, 'x'), secret);
    }
    assert.equal(Buffer.from(generateEncryptionKey(), 'base64').length, 32);
  });

  it('rejects missing or malformed keys with a hint on how to make one', () => {
    for (const bad of [undefined, '', 'short', randomBytes(16), randomBytes(33), randomBytes(48).toString('base64'), 'z'.repeat(64), 42, {}, { current: { id: 300, key: raw } }]) {
      assert.throws(
        () => createCipher(bad as never),
        (error: unknown) => error instanceof InvalidOptionsError && error.code === 'ERR_INVALID_OPTIONS',
        `key ${String(bad)} must be refused`,
      );
    }
    assert.throws(() => createCipher(undefined as never), /randomBytes\(32\)\.toString\('base64'\)/);
  });

  it('rotates keys: values sealed with a previous key still open; new ones use the current key', () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const before = createCipher(oldKey).seal(secret, 'credential:c1');
    const ring = createCipher({ current: { id: 2, key: newKey }, previous: [{ id: 1, key: oldKey }] });
    assert.equal(ring.keyId, 2);
    assert.deepEqual(ring.open(before, 'credential:c1'), secret);
    const after = ring.seal(secret, 'credential:c1');
    assert.equal(after[1], 2);
    assert.throws(() => createCipher(oldKey).open(after, 'credential:c1'), /key id 2, which is not configured/);
    assert.throws(() => createCipher({ current: { id: 2, key: newKey }, previous: [{ id: 2, key: oldKey }] }), /used twice/);
    assert.throws(() => resolveEncryptionKeys({ current: { id: 1, key: raw }, extra: true }), /unknown field "extra"/);
  });
});
