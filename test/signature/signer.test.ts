import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { verify } from 'node:crypto';
import { InvalidOptionsError } from '../../src/errors.js';
import { decodeBase64Url } from '../../src/lib/base64.js';
import { importPublicKey } from '../../src/signature/ed25519.js';
import { createVerifier } from '../../src/signature/verifier.js';
import { generateKeyPair, publicKeyOf } from '../../src/testkit/keys.js';
import { createSigner, type SignerOptions, type SignInput } from '../../src/testkit/signer.js';
import { loadVectors } from './fixtures.js';

const NOW = Date.parse('2017-04-06T19:17:03.456Z');

describe('generateKeyPair', () => {
  it('gives 32-byte base64url keys whose public half matches the private seed', () => {
    const pair = generateKeyPair();
    assert.match(pair.publicKey, /^[A-Za-z0-9_-]{43}$/);
    assert.match(pair.privateKey, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(publicKeyOf(pair.privateKey), pair.publicKey);
    assert.equal(publicKeyOf(`${Buffer.from(decodeBase64Url(pair.privateKey)!).toString('base64')}`), pair.publicKey);
    assert.notEqual(generateKeyPair().privateKey, pair.privateKey);
  });
});

describe('createSigner', () => {
  const master = generateKeyPair();
  const live = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, now: () => NOW });

  it('endorses the live key by signing its 32 raw bytes, as the marketplace vector does', () => {
    const headers = signer.sign({ method: 'GET', url: '/v1/x', host: 'h' });
    const [, key, endorsement] = headers['x-signature']!.split(' ') as [string, string, string];
    assert.equal(key, live.publicKey);
    assert.equal(signer.livePublicKey, live.publicKey);
    assert.equal(signer.masterPublicKey, master.publicKey);
    const masterKey = importPublicKey(decodeBase64Url(master.publicKey)!);
    assert.equal(verify(null, decodeBase64Url(key)!, masterKey, decodeBase64Url(endorsement)!), true);
    assert.equal(verify(null, Buffer.from(key), masterKey, decodeBase64Url(endorsement)!), false);

    const [vector] = loadVectors();
    const [, vectorKey, vectorEndorsement] = vector!.headers['x-signature']!.split(' ') as [string, string, string];
    const vectorMaster = importPublicKey(decodeBase64Url(vector!.master_public_key)!);
    assert.equal(verify(null, decodeBase64Url(vectorKey)!, vectorMaster, decodeBase64Url(vectorEndorsement)!), true);
  });

  it('lists host, date, then every header set, in order, and writes Date as RFC 3339 to the second', () => {
    const headers = signer.sign({
      method: 'PUT',
      url: '/v1/resources/abc',
      host: 'localhost:3000',
      headers: { 'X-Callback-ID': 'cb', 'x-callback-url': 'http://localhost:5000/v1/callbacks/cb', 'Content-Type': 'application/json' },
      body: '{}',
    });
    assert.equal(headers['x-signed-headers'], 'host date x-callback-id x-callback-url content-type');
    assert.equal(headers.date, '2017-04-06T19:17:03Z');
    assert.equal(headers.host, 'localhost:3000');
    assert.equal(headers['x-callback-id'], 'cb');
    assert.deepEqual(Object.keys(headers), ['host', 'date', 'x-callback-id', 'x-callback-url', 'content-type', 'x-signed-headers', 'x-signature']);
  });

  it('is deterministic for the same keys, clock and request', () => {
    const again = createSigner({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, now: () => new Date(NOW) });
    const input = { method: 'DELETE', url: '/v1/resources/abc', host: 'h' };
    assert.deepEqual(again.sign(input), signer.sign(input));
  });

  it('lets an explicit date replace the clock (to test stale requests)', () => {
    const headers = signer.sign({ method: 'GET', url: '/v1/x', host: 'h', headers: { Date: '2000-01-01T00:00:00Z' } });
    assert.equal(headers.date, '2000-01-01T00:00:00Z');
    assert.equal(headers['x-signed-headers'], 'host date');
  });

  it('drops a #fragment, as HTTP clients do', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW });
    const headers = signer.sign({ method: 'GET', url: '/v1/x?a=1#section', host: 'h' });
    await verifier.verify({ method: 'GET', url: '/v1/x?a=1', headers });
    assert.deepEqual(headers, signer.sign({ method: 'GET', url: '/v1/x?a=1', host: 'h' }));
  });

  it('accepts keys in padded standard base64', async () => {
    const standard = (key: string) => Buffer.from(decodeBase64Url(key)!).toString('base64');
    const other = createSigner({ masterPrivateKey: standard(master.privateKey), livePrivateKey: standard(live.privateKey), now: () => NOW });
    assert.equal(other.masterPublicKey, master.publicKey);
    assert.equal(other.livePublicKey, live.publicKey);
  });

  it('generates a live key when none is given', () => {
    const fresh = createSigner({ masterPrivateKey: master.privateKey });
    assert.notEqual(fresh.livePublicKey, live.publicKey);
    assert.match(fresh.sign({ method: 'GET', url: '/', host: 'h' }).date!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it('refuses input it cannot sign faithfully', () => {
    const bad: SignInput[] = [
      { method: 'GET', url: 'v1/x', host: 'h' },
      { method: 'GET', url: '/v1/a b', host: 'h' },
      { method: 'GET', url: '/v1/caf\u00e9', host: 'h' },
      { method: 'G T', url: '/v1/x', host: 'h' },
      { method: 'GET', url: '/v1/x', host: 'h h' },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { host: 'other' } },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { 'X-Signature': 'x' } },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { 'x-signed-headers': 'x' } },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { 'x-a': 'one', 'X-A': 'two' } },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { 'x-a': 'line\r\nbreak' } },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { 'x-a': '\u0100' } },
      { method: 'GET', url: '/v1/x', host: 'h', headers: { 'bad name': 'v' } },
    ];
    for (const input of bad) assert.throws(() => signer.sign(input), TypeError, JSON.stringify(input));
  });

  it('checks its options at construction', () => {
    const invalid = (options: unknown, pattern: RegExp) =>
      assert.throws(() => createSigner(options as SignerOptions), (error: unknown) => error instanceof InvalidOptionsError && pattern.test(error.message));
    invalid({}, /masterPrivateKey/);
    invalid({ masterPrivateKey: 'short' }, /masterPrivateKey/);
    invalid({ masterPrivateKey: master.privateKey, livePrivateKey: 7 }, /livePrivateKey/);
    invalid({ masterPrivateKey: master.privateKey, masterPublicKey: master.publicKey }, /unknown option "masterPublicKey"/);
    invalid({ masterPrivateKey: master.privateKey, now: 5 }, /now/);
  });
});
