import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { releasingCallback, verifyEd25519, verifyEd25519Then } from '../../src/signature/ed25519.js';

const { publicKey, privateKey } = generateKeyPairSync('ed25519');
const message = Buffer.from('PUT /v1/resources/abc\n{"plan":"free"}');
const signature = sign(null, message, privateKey);

/** Answers of verifyEd25519Then for one call, collected until the next turn of the loop. */
function answersOf(data: Uint8Array, key: typeof publicKey, sig: Uint8Array): Promise<boolean[]> {
  const answers: boolean[] = [];
  return new Promise((resolve) => {
    verifyEd25519Then(data, key, sig, (valid) => {
      answers.push(valid);
      // Any second answer would arrive before the next turn.
      setImmediate(() => resolve(answers));
    });
  });
}

/** `gc()` for this process: the flag exposes it to contexts created after it is set. */
function exposedGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('verifyEd25519Then', () => {
  it('answers true, once, for a signature of the message', async () => {
    assert.deepEqual(await answersOf(message, publicKey, signature), [true]);
  });

  it('answers false, once, for another message or a damaged signature', async () => {
    assert.deepEqual(await answersOf(Buffer.from('PUT /v1/resources/abd'), publicKey, signature), [false]);
    const damaged = Buffer.from(signature);
    damaged[0] = damaged[0]! ^ 1;
    assert.deepEqual(await answersOf(message, publicKey, damaged), [false]);
  });

  it('answers false for what OpenSSL refuses outright (a signature of the wrong length)', async () => {
    assert.deepEqual(await answersOf(message, publicKey, signature.subarray(0, 10)), [false]);
    assert.equal(await verifyEd25519(message, publicKey, signature.subarray(0, 10)), false);
  });
});

describe('releasingCallback (the callback node:crypto holds)', () => {
  it('answers done once: whether the signature verified, false on an error', () => {
    const seen: boolean[] = [];
    const ok = releasingCallback((valid) => seen.push(valid));
    ok(null, true);
    ok(null, true);
    const failed = releasingCallback((valid) => seen.push(valid));
    failed(new Error('OpenSSL said no'), true);
    const refused = releasingCallback((valid) => seen.push(valid));
    refused(null, false);
    assert.deepEqual(seen, [true, false, false]);
  });

  it('lets go of done once it has run: what done holds (a request, in the routes) can be collected while node:crypto still holds the callback', async () => {
    const gc = exposedGc();
    const answers: boolean[] = [];
    // The request lives only in this function's scope: afterwards only done holds it.
    const { callback, payload } = ((): { callback: (error: Error | null, ok: boolean) => void; payload: WeakRef<object> } => {
      const request = { headers: { host: 'provider.example' }, body: Buffer.alloc(1024) };
      return {
        callback: releasingCallback((valid) => answers.push(valid && request.body.length > 0)),
        payload: new WeakRef(request),
      };
    })();
    callback(null, true);
    assert.deepEqual(answers, [true]);
    // A WeakRef's target stays alive through the turn that created or read it: collect in a later one.
    await nextTurn();
    gc();
    await nextTurn();
    assert.equal(payload.deref(), undefined, 'what done captured was collected, the callback itself still being held');
    // The callback is still here, and a second call answers nothing.
    callback(null, true);
    assert.deepEqual(answers, [true]);
  });
});
