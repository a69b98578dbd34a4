import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as ed from '@noble/ed25519';
import { InvalidOptionsError, SignatureError } from '../../src/errors.js';
import { decodeBase64Url, encodeBase64Url } from '../../src/lib/base64.js';
import {
  createVerifier,
  DEFAULT_TOLERANCE_MS,
  PRODUCTION_MASTER_PUBLIC_KEY,
  verifierInternals,
  type SignedRequest,
  type VerifierOptions,
} from '../../src/signature/verifier.js';
import { decodeKey, generateKeyPair, signBytes } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { loadVectors, signCustom, vectorRequest } from './fixtures.js';

const [vector] = loadVectors();
const NOW = Date.parse(vector!.now);

async function rejection(promise: Promise<unknown>): Promise<SignatureError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof SignatureError, `expected a SignatureError, got ${String(error)}`);
    assert.equal(error.status, 401);
    return error;
  }
  assert.fail('expected the verification to fail');
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<void> {
  const error = await rejection(promise);
  assert.equal(error.code, code);
}

function flip(text: string, at: number): string {
  return text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) ^ 0x01) + text.slice(at + 1);
}

describe('the marketplace vector', () => {
  const verifier = createVerifier({ masterKey: vector!.master_public_key, now: () => new Date(vector!.now) });

  it('is accepted with the clock frozen at its now', async () => {
    const verified = await verifier.verify(vectorRequest(vector!));
    assert.equal(verified.livePublicKey, vector!.headers['x-signature']!.split(' ')[1]);
    assert.deepEqual(verified.signedHeaders, ['host', 'date', 'x-callback-id', 'x-callback-url', 'content-type', 'content-length']);
    assert.equal(verified.date.toISOString(), '2017-04-06T19:17:03.000Z');
  });

  it('is accepted in Node-style headers (arrays) and with the key in padded standard base64', async () => {
    const standardKey = Buffer.from(decodeBase64Url(vector!.master_public_key)!).toString('base64');
    const other = createVerifier({ masterKey: standardKey, now: () => NOW });
    const request = vectorRequest(vector!);
    const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, [value]]));
    await other.verify({ ...request, headers });
  });

  it('is rejected after any one-byte change to the body', async () => {
    const request = vectorRequest(vector!);
    for (let i = 0; i < request.body.length; i++) {
      const body = Buffer.from(request.body);
      body[i]! ^= 0x01;
      await rejectsWith(verifier.verify({ ...request, body }), 'ERR_REQUEST_SIGNATURE_INVALID');
    }
    await rejection(verifier.verify({ ...request, body: request.body.subarray(1) }));
    await rejection(verifier.verify({ ...request, body: Buffer.concat([request.body, Buffer.from(' ')]) }));
  });

  it('is rejected after any one-byte change to each signed header value and to X-Signed-Headers', async () => {
    const request = vectorRequest(vector!);
    for (const name of [...request.headers['x-signed-headers']!.split(' '), 'x-signed-headers']) {
      const value = request.headers[name]!;
      for (let i = 0; i < value.length; i++) {
        await rejection(verifier.verify({ ...request, headers: { ...request.headers, [name]: flip(value, i) } }));
      }
    }
  });

  it('is rejected after any one-byte change to the method and to the path', async () => {
    const request = vectorRequest(vector!);
    for (let i = 0; i < request.method.length; i++) {
      await rejectsWith(verifier.verify({ ...request, method: flip(request.method, i) }), 'ERR_REQUEST_SIGNATURE_INVALID');
    }
    for (let i = 0; i < request.url.length; i++) {
      await rejectsWith(verifier.verify({ ...request, url: flip(request.url, i) }), 'ERR_REQUEST_SIGNATURE_INVALID');
    }
    await rejection(verifier.verify({ ...request, url: `${request.url}?a=1` }));
    await rejection(verifier.verify({ ...request, url: `${request.url}/` }));
  });

  it('is rejected after any one-character change to X-Signature', async () => {
    const request = vectorRequest(vector!);
    const value = request.headers['x-signature']!;
    for (let i = 0; i < value.length; i++) {
      await rejection(verifier.verify({ ...request, headers: { ...request.headers, 'x-signature': flip(value, i) } }));
    }
  });

  it('is rejected under the production master key', async () => {
    const production = createVerifier({ now: () => NOW });
    assert.equal(production.masterPublicKey, PRODUCTION_MASTER_PUBLIC_KEY);
    await rejectsWith(production.verify(vectorRequest(vector!)), 'ERR_ENDORSEMENT_INVALID');
  });
});

describe('failure codes', () => {
  const master = generateKeyPair();
  const live = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, now: () => NOW });
  const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW });
  const host = 'provider.example:8443';
  const body = Buffer.from('{"plan":"low"}');

  function signed(headers: Record<string, string> = {}): SignedRequest & { headers: Record<string, string | undefined> } {
    return { method: 'PATCH', url: '/v1/resources/abc', headers: signer.sign({ method: 'PATCH', url: '/v1/resources/abc', host, headers, body }), body };
  }

  function without(request: ReturnType<typeof signed>, name: string): SignedRequest {
    const headers = { ...request.headers };
    delete headers[name];
    return { ...request, headers };
  }

  function custom(signedHeaders: string[], headers: Record<string, string>): SignedRequest {
    const all = { ...headers, 'x-signed-headers': signedHeaders.join(' ') };
    const signature = signCustom({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, method: 'GET', url: '/v1/x', headers: all, signedHeaders });
    return { method: 'GET', url: '/v1/x', headers: { ...all, 'x-signature': signature } };
  }

  it('accepts what the signer produces', async () => {
    const verified = await verifier.verify(signed({ 'content-type': 'application/json' }));
    assert.equal(verified.livePublicKey, live.publicKey);
    assert.deepEqual(verified.signedHeaders, ['host', 'date', 'content-type']);
  });

  it('ERR_SIGNATURE_MISSING without X-Signature', async () => {
    await rejectsWith(verifier.verify(without(signed(), 'x-signature')), 'ERR_SIGNATURE_MISSING');
  });

  it('ERR_SIGNATURE_MALFORMED for two parts, bad base64 and wrong lengths', async () => {
    const request = signed();
    const [sig, key, endorsement] = request.headers['x-signature']!.split(' ') as [string, string, string];
    const short = encodeBase64Url(Buffer.alloc(31, 1));
    for (const value of [`${sig} ${key}`, `${sig} ${key} ${endorsement.replace(/.$/, '*')}`, `${sig} ${short} ${endorsement}`, `${sig.slice(4)} ${key} ${endorsement}`]) {
      await rejectsWith(verifier.verify({ ...request, headers: { ...request.headers, 'x-signature': value } }), 'ERR_SIGNATURE_MALFORMED');
    }
  });

  it('ERR_SIGNED_HEADERS_MISSING and ERR_SIGNED_HEADERS_MALFORMED', async () => {
    const request = signed();
    await rejectsWith(verifier.verify(without(request, 'x-signed-headers')), 'ERR_SIGNED_HEADERS_MISSING');
    await rejectsWith(verifier.verify({ ...request, headers: { ...request.headers, 'x-signed-headers': 'Host Date' } }), 'ERR_SIGNED_HEADERS_MALFORMED');
  });

  it('ERR_REQUIRED_HEADER_UNSIGNED when host or date is left out of a valid signature', async () => {
    const headers = { host, date: vector!.now, 'x-a': '1' };
    await verifier.verify(custom(['host', 'date', 'x-a'], headers));
    await rejectsWith(verifier.verify(custom(['date', 'x-a'], headers)), 'ERR_REQUIRED_HEADER_UNSIGNED');
    await rejectsWith(verifier.verify(custom(['host', 'x-a'], headers)), 'ERR_REQUIRED_HEADER_UNSIGNED');
  });

  it('ERR_DATE_MISSING without Date, ERR_DATE_MALFORMED for a signed non-RFC 3339 Date', async () => {
    await rejectsWith(verifier.verify(without(signed(), 'date')), 'ERR_DATE_MISSING');
    await rejectsWith(verifier.verify(signed({ date: 'Thu, 06 Apr 2017 19:17:03 GMT' })), 'ERR_DATE_MALFORMED');
  });

  it('ERR_DATE_STALE past tolerance + 1 s either way, accepted at tolerance - 1 s', async () => {
    const request = signed();
    for (const offset of [DEFAULT_TOLERANCE_MS + 1000, -(DEFAULT_TOLERANCE_MS + 1000)]) {
      await rejectsWith(createVerifier({ masterKey: master.publicKey, now: () => NOW + offset }).verify(request), 'ERR_DATE_STALE');
    }
    for (const offset of [DEFAULT_TOLERANCE_MS - 1000, -(DEFAULT_TOLERANCE_MS - 1000), DEFAULT_TOLERANCE_MS]) {
      await createVerifier({ masterKey: master.publicKey, now: () => new Date(NOW + offset) }).verify(request);
    }
  });

  it('honours toleranceMs: 0 as exact and a custom tolerance', async () => {
    const request = signed();
    await createVerifier({ masterKey: master.publicKey, toleranceMs: 0, now: () => NOW }).verify(request);
    await rejectsWith(createVerifier({ masterKey: master.publicKey, toleranceMs: 0, now: () => NOW + 1000 }).verify(request), 'ERR_DATE_STALE');
    await createVerifier({ masterKey: master.publicKey, toleranceMs: 3_600_000, now: () => NOW + 3_000_000 }).verify(request);
  });

  it('fails closed when the clock yields an invalid date', async () => {
    await rejectsWith(createVerifier({ masterKey: master.publicKey, now: () => new Date(Number.NaN) }).verify(signed()), 'ERR_DATE_STALE');
  });

  it('ERR_SIGNED_HEADER_ABSENT when a listed header was not received', async () => {
    const request = signed({ 'x-callback-id': '24ph1gyxrcgrt8a6pyf74bafyfcqr' });
    await verifier.verify(request);
    await rejectsWith(verifier.verify(without(request, 'x-callback-id')), 'ERR_SIGNED_HEADER_ABSENT');
    await rejectsWith(verifier.verify(without(request, 'host')), 'ERR_SIGNED_HEADER_ABSENT');
  });

  it('ERR_ENDORSEMENT_INVALID for a live key endorsed by another master key', async () => {
    const stranger = createSigner({ masterPrivateKey: generateKeyPair().privateKey, livePrivateKey: live.privateKey, now: () => NOW });
    const headers = stranger.sign({ method: 'GET', url: '/v1/x', host });
    await rejectsWith(verifier.verify({ method: 'GET', url: '/v1/x', headers }), 'ERR_ENDORSEMENT_INVALID');
  });

  it('ERR_REQUEST_SIGNATURE_INVALID for a request signed by a different live key than the one endorsed', async () => {
    const request = signed();
    const intruder = createSigner({ masterPrivateKey: master.privateKey, now: () => NOW });
    const theirs = intruder.sign({ method: 'PATCH', url: '/v1/resources/abc', host, body });
    const [theirSignature] = theirs['x-signature']!.split(' ');
    const [, ourKey, ourEndorsement] = request.headers['x-signature']!.split(' ');
    // The intruder's signature is valid for its own (endorsed) key, not for the key it travels with.
    await verifier.verify({ ...request, headers: theirs });
    await rejectsWith(
      verifier.verify({ ...request, headers: { ...theirs, 'x-signature': `${theirSignature} ${ourKey} ${ourEndorsement}` } }),
      'ERR_REQUEST_SIGNATURE_INVALID',
    );
  });

  it('refuses a small-order live key even with a genuine endorsement (OpenSSL alone would accept a forged request)', async () => {
    const identity = Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 1 : 0));
    const endorsement = signBytes(identity, decodeKey(master.privateKey, 'master'));
    // With the identity as key, R = B and S = 1 satisfy the cofactorless equation for any message.
    const forged = new Uint8Array(64);
    forged.set(ed.Point.BASE.toBytes(), 0);
    forged[32] = 1;
    const request = signed();
    const xSignature = `${encodeBase64Url(forged)} ${encodeBase64Url(identity)} ${encodeBase64Url(endorsement)}`;
    await rejectsWith(verifier.verify({ ...request, headers: { ...request.headers, 'x-signature': xSignature } }), 'ERR_ENDORSEMENT_INVALID');
  });

  it('keeps messages short and free of key material and header values', async () => {
    const request = signed({ 'x-callback-id': 'secretish-callback-value' });
    const attempts = [
      () => verifier.verify({ ...request, body: Buffer.from('tampered') }),
      () => verifier.verify(without(request, 'x-callback-id')),
      () => createVerifier({ masterKey: generateKeyPair().publicKey, now: () => NOW }).verify(request),
    ];
    for (const attempt of attempts) {
      const error = await rejection(attempt());
      assert.ok(error.message.length >= 3 && error.message.length <= 256);
      for (const part of [...request.headers['x-signature']!.split(' '), 'secretish-callback-value', master.publicKey]) {
        assert.ok(!error.message.includes(part), error.message);
      }
    }
  });
});

describe('publicHost', () => {
  const master = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey, now: () => NOW });
  const headers = signer.sign({ method: 'DELETE', url: '/v1/resources/abc', host: 'api.example.com' });
  // What the app sees behind a proxy that rewrote Host.
  const received = { method: 'DELETE', url: '/v1/resources/abc', headers: { ...headers, host: '10.0.0.7:3000' } };

  it('rejects a rewritten Host by default', async () => {
    await rejectsWith(createVerifier({ masterKey: master.publicKey, now: () => NOW }).verify(received), 'ERR_REQUEST_SIGNATURE_INVALID');
  });

  it('verifies against the configured public host instead of the received one', async () => {
    await createVerifier({ masterKey: master.publicKey, now: () => NOW, publicHost: 'api.example.com' }).verify(received);
    await rejectsWith(createVerifier({ masterKey: master.publicKey, now: () => NOW, publicHost: 'other.example.com' }).verify(received), 'ERR_REQUEST_SIGNATURE_INVALID');
  });
});

describe('endorsement cache', () => {
  const master = generateKeyPair();
  const signers = Array.from({ length: 10 }, () => createSigner({ masterPrivateKey: master.privateKey, now: () => NOW }));
  const request = (index: number): SignedRequest => ({ method: 'GET', url: '/v1/x', headers: signers[index]!.sign({ method: 'GET', url: '/v1/x', host: 'h' }) });

  it('never holds more than endorsementCacheSize keys under rotating live keys', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW, endorsementCacheSize: 4 });
    assert.equal(verifier.cachedEndorsements(), 0);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < signers.length; i++) {
        await verifier.verify(request(i));
        assert.ok(verifier.cachedEndorsements() <= 4);
      }
    }
    assert.equal(verifier.cachedEndorsements(), 4);
  });

  it('evicts the least recently used endorsement', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW, endorsementCacheSize: 2 });
    const internals = verifierInternals(verifier)!;
    // One use of a live key: true when its endorsement was cached (known at once), false when it
    // had to be checked (a promise, awaited so that it is cached before the next use).
    const use = async (index: number) => {
      const checked = internals.check(request(index).headers, false);
      if (!(checked instanceof Promise)) return true;
      await checked;
      return false;
    };
    const cached: boolean[] = [];
    for (const index of [0, 1, 0, 2, 1, 2, 2, 3, 1, 3, 1, 0, 1]) cached.push(await use(index));
    assert.deepEqual(cached, [false, false, true, false, false, true, true, false, false, true, true, false, true]);
    assert.equal(verifier.cachedEndorsements(), 2);
  });

  it('keeps one entry for a steady live key and none for refused endorsements', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW });
    for (let i = 0; i < 5; i++) await verifier.verify(request(0));
    assert.equal(verifier.cachedEndorsements(), 1);
    const foreign = createSigner({ masterPrivateKey: generateKeyPair().privateKey, now: () => NOW });
    for (let i = 0; i < 5; i++) {
      await rejectsWith(verifier.verify({ method: 'GET', url: '/v1/x', headers: foreign.sign({ method: 'GET', url: '/v1/x', host: 'h' }) }), 'ERR_ENDORSEMENT_INVALID');
    }
    assert.equal(verifier.cachedEndorsements(), 1);
  });

  it('does not let a cached live key vouch for a different endorsement text', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW });
    const good = request(1);
    await verifier.verify(good);
    const [sig, key, endorsement] = String(good.headers['x-signature']).split(' ') as [string, string, string];
    const bytes = decodeBase64Url(endorsement)!;
    bytes[0]! ^= 1;
    await rejectsWith(verifier.verify({ ...good, headers: { ...good.headers, 'x-signature': `${sig} ${key} ${encodeBase64Url(bytes)}` } }), 'ERR_ENDORSEMENT_INVALID');
  });

  it('works with the cache turned off', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW, endorsementCacheSize: 0 });
    await verifier.verify(request(2));
    await verifier.verify(request(2));
    assert.equal(verifier.cachedEndorsements(), 0);
  });
});

describe('createVerifier options', () => {
  const invalid = (options: unknown, pattern: RegExp) =>
    assert.throws(() => createVerifier(options as VerifierOptions), (error: unknown) => error instanceof InvalidOptionsError && pattern.test(error.message));

  it('rejects a bad or weak master key', () => {
    invalid({ masterKey: 'abc' }, /masterKey/);
    invalid({ masterKey: `${PRODUCTION_MASTER_PUBLIC_KEY}AA` }, /masterKey/);
    invalid({ masterKey: 42 }, /masterKey/);
    invalid({ masterKey: encodeBase64Url(Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 1 : 0))) }, /masterKey/);
    invalid({ masterKey: new Uint8Array(31) }, /masterKey/);
  });

  it('accepts the key as bytes', () => {
    const verifier = createVerifier({ masterKey: decodeBase64Url(PRODUCTION_MASTER_PUBLIC_KEY)! });
    assert.equal(verifier.masterPublicKey, PRODUCTION_MASTER_PUBLIC_KEY);
  });

  it('rejects negative or non-finite tolerances, bad hosts, bad cache sizes and clocks', () => {
    invalid({ toleranceMs: -1 }, /toleranceMs/);
    invalid({ toleranceMs: Number.NaN }, /toleranceMs/);
    invalid({ toleranceMs: '300000' }, /toleranceMs/);
    invalid({ publicHost: 'a b' }, /publicHost/);
    invalid({ publicHost: '' }, /publicHost/);
    invalid({ endorsementCacheSize: -1 }, /endorsementCacheSize/);
    invalid({ endorsementCacheSize: 1.5 }, /endorsementCacheSize/);
    invalid({ now: Date.now() }, /now/);
  });

  it('names the closest option for a misspelling', () => {
    invalid({ masterkey: PRODUCTION_MASTER_PUBLIC_KEY }, /unknown option "masterkey".*did you mean "masterKey"/);
    invalid({ tolerance: 5 }, /unknown option "tolerance"/);
    invalid(null, /options object/);
  });
});

describe('checkHeaders then verify(body)', () => {
  it('verifies the body against the checked headers, refuses a changed body, and re-checks the Date', async () => {
    let now = NOW;
    const verifier = createVerifier({ masterKey: vector!.master_public_key, now: () => now });
    const { body, ...request } = vectorRequest(vector!);
    const check = await verifier.checkHeaders(request);
    assert.equal((await check.verify(body)).date.toISOString(), new Date(vector!.now).toISOString());
    await rejectsWith(check.verify(Buffer.from(flip(vector!.body, 5), 'utf8')), 'ERR_REQUEST_SIGNATURE_INVALID');
    // A body that took longer than the tolerance to arrive: the Date is stale by then.
    now += DEFAULT_TOLERANCE_MS + 1000;
    await rejectsWith(check.verify(body), 'ERR_DATE_STALE');
  });
});
