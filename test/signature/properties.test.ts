import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import * as ed from '@noble/ed25519';
import { SignatureError } from '../../src/errors.js';
import { encodeBase64Url } from '../../src/lib/base64.js';
import { canonicalRequest } from '../../src/signature/canonicalize.js';
import { importPublicKey, isWeakPublicKey, verifyEd25519 } from '../../src/signature/ed25519.js';
import { createVerifier, type SignedRequest } from '../../src/signature/verifier.js';
import { strictVerify } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';

// A fixed seed keeps every run identical (the suite must be deterministic); change it locally to explore.
const SEED = 20170406;
const NOW = Date.parse('2017-04-06T19:17:03Z');
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

const seed32 = fc.uint8Array({ minLength: 32, maxLength: 32 });
const pctChar = fc.stringMatching(/^(?:[A-Za-z0-9._~!$'()*+,;=:@-]|%[0-9A-Fa-f]{2})$/);
const piece = (max: number) => fc.array(pctChar, { maxLength: max }).map((chars) => chars.join(''));
const path = fc.array(piece(8), { minLength: 1, maxLength: 4 }).map((segments) => `/${segments.join('/')}`);
const pair = fc.tuple(piece(6), fc.option(piece(6), { nil: undefined })).map(([name, value]) => (value === undefined ? name : `${name}=${value}`));
const query = fc.array(pair, { maxLength: 6 }).map((pairs) => (pairs.length === 0 ? '' : `?${pairs.join('&')}`));
const method = fc.oneof(fc.constantFrom('GET', 'PUT', 'PATCH', 'DELETE', 'POST'), fc.stringMatching(/^[A-Z]{1,10}$/));
// Values as HTTP carries them: visible ISO-8859-1, inner spaces and tabs, none at the ends (Node strips those).
const value = fc.stringMatching(/^[\x21-\x7e\xa1-\xff](?:[\x20-\x7e\t\x80-\xff]{0,24}[\x21-\x7e\x80-\xff])?$/);
const headerName = fc.stringMatching(/^x-[a-z0-9-]{1,12}$/);
const headers = fc.dictionary(headerName, value, { maxKeys: 5 });
const host = fc.constantFrom('localhost:3000', 'api.example.com', '127.0.0.1:8080', '[::1]:443');
const body = fc.uint8Array({ maxLength: 256 });

const request = fc.record({ master: seed32, live: seed32, method, path, query, headers, body, host, arrays: fc.boolean() });
type Generated = typeof request extends fc.Arbitrary<infer T> ? T : never;

function signed(input: Generated): { verifierKey: string; request: SignedRequest & { headers: Record<string, string> } } {
  const signer = createSigner({ masterPrivateKey: encodeBase64Url(input.master), livePrivateKey: encodeBase64Url(input.live), now: () => NOW });
  const url = input.path + input.query;
  const sent = signer.sign({ method: input.method, url, host: input.host, headers: input.headers, body: input.body });
  return { verifierKey: signer.masterPublicKey, request: { method: input.method, url, headers: sent, body: input.body } };
}

function nodeStyle(headers: Record<string, string>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(headers).map(([name, v]) => [name, [v]]));
}

const verifiers = new Map<string, ReturnType<typeof createVerifier>>();
function verifierFor(masterKey: string) {
  let verifier = verifiers.get(masterKey);
  if (verifier === undefined) {
    verifier = createVerifier({ masterKey, now: () => NOW });
    verifiers.set(masterKey, verifier);
  }
  return verifier;
}

describe('sign → verify round trips', () => {
  it('accepts every request the signer produces, headers as strings or Node-style arrays', async () => {
    await fc.assert(
      fc.asyncProperty(request, async (input) => {
        const { verifierKey, request: req } = signed(input);
        const verified = await verifierFor(verifierKey).verify(input.arrays ? { ...req, headers: nodeStyle(req.headers) } : req);
        assert.deepEqual(verified.signedHeaders, ['host', 'date', ...Object.keys(input.headers)]);
      }),
      { seed: SEED, numRuns: 120 },
    );
  });

  it('rejects every one-byte change to method, path, query, a header value, X-Signature or the body', async () => {
    const target = fc.constantFrom('method', 'url', 'header', 'body', 'x-signature', 'x-signed-headers');
    await fc.assert(
      fc.asyncProperty(request, target, fc.nat(), fc.integer({ min: 1, max: 255 }), async (input, where, position, xor) => {
        const { verifierKey, request: req } = signed(input);
        const mutate = (text: string) => {
          const at = position % text.length;
          return text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) ^ xor) + text.slice(at + 1);
        };
        let changed: SignedRequest;
        if (where === 'method') {
          const at = position % req.method.length;
          // lowercase(METHOD) is what is signed, so a case flip of a letter is no change (and Node only parses uppercase methods).
          fc.pre(!(xor === 0x20 && /[A-Za-z]/.test(req.method[at]!)));
          changed = { ...req, method: mutate(req.method) };
        } else if (where === 'url') {
          changed = { ...req, url: mutate(req.url) };
        } else if (where === 'body') {
          fc.pre(req.body!.length > 0);
          const bytes = Buffer.from(req.body!);
          bytes[position % bytes.length]! ^= xor;
          changed = { ...req, body: bytes };
        } else {
          const names = where === 'header' ? ['host', 'date', ...Object.keys(input.headers)] : [where];
          const name = names[position % names.length]!;
          changed = { ...req, headers: { ...req.headers, [name]: mutate(req.headers[name]!) } };
        }
        await assert.rejects(verifierFor(verifierKey).verify(changed), (error: unknown) => error instanceof SignatureError && error.status === 401);
      }),
      { seed: SEED, numRuns: 250 },
    );
  });

  it('builds the same bytes as a naive reference implementation', () => {
    const wild = fc.record({
      method,
      url: fc.tuple(path, fc.array(fc.stringMatching(/^[A-Za-z0-9=%?#&]{0,6}$/), { maxLength: 5 })).map(([p, q]) => (q.length === 0 ? p : `${p}?${q.join('&')}`)),
      headers: fc.dictionary(headerName, fc.array(fc.stringMatching(/^[ \t]?[\x20-\x7e\xa0-\xff]{0,12}[ \t]?$/), { minLength: 1, maxLength: 3 }), { maxKeys: 4 }),
      body,
    });
    fc.assert(
      fc.property(wild, ({ method: m, url, headers: h, body: b }) => {
        const names = Object.keys(h);
        const all = { ...h, 'x-signed-headers': [names.join(' ')] };
        assert.deepEqual(canonicalRequest({ method: m, url, headers: all, body: b, signedHeaders: names }), reference(m, url, all, names, b));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });
});

/** The canonical form written as plainly as possible, to check the optimised one against. */
function reference(m: string, url: string, headers: Record<string, string[]>, names: string[], b: Uint8Array): Buffer {
  const mark = url.indexOf('?');
  const target = mark === -1 ? url : url.slice(0, mark);
  const q = mark === -1 ? '' : url.slice(mark + 1);
  const pairs = q.split('&').sort((x, y) => Buffer.compare(Buffer.from(x, 'latin1'), Buffer.from(y, 'latin1')));
  let text = `${m.toLowerCase()} ${target}${q === '' ? '' : `?${pairs.join('&')}`}\n`;
  for (const name of [...names, 'x-signed-headers']) {
    text += `${name}: ${headers[name]!.map((v) => v.replace(/^[ \t]+|[ \t]+$/g, '')).join(', ')}\n`;
  }
  return Buffer.concat([Buffer.from(text, 'latin1'), b]);
}

/** node:crypto as the verifier uses it: the weak-key screen, then OpenSSL on the thread pool. */
async function nodeAccepts(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): Promise<boolean> {
  if (isWeakPublicKey(publicKey)) return false;
  let key;
  try {
    key = importPublicKey(publicKey);
  } catch {
    return false;
  }
  return verifyEd25519(message, key, signature);
}

function le32(n: bigint): Uint8Array {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = Number((n >> BigInt(8 * i)) & 0xffn);
  return out;
}

function fromLe(bytes: Uint8Array): bigint {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]!);
  return n;
}

const SMALL_ORDER = [
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0000000000000000000000000000000000000000000000000000000000000080',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  // Non-canonical spellings (y >= p) of the identity and of y = 0, and identity with the sign bit.
  'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0100000000000000000000000000000000000000000000000000000000000080',
].map((hex) => Uint8Array.from(Buffer.from(hex, 'hex')));

describe('node:crypto and @noble/ed25519 (zip215: false) agree', () => {
  it('on valid, mutated and random signatures, keys and messages, and on non-canonical S', async () => {
    const mode = fc.constantFrom('valid', 'flip-signature', 'flip-message', 'flip-key', 'random-signature', 'random-key', 's-plus-l', 'r-noncanonical');
    await fc.assert(
      fc.asyncProperty(seed32, fc.uint8Array({ maxLength: 128 }), mode, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.uint8Array({ minLength: 64, maxLength: 64 }), async (seed, message, how, position, xor, noise) => {
        let publicKey = ed.getPublicKey(seed);
        let signature = ed.sign(message, seed);
        let msg = message;
        switch (how) {
          case 'flip-signature':
            signature = Uint8Array.from(signature);
            signature[position % 64]! ^= xor;
            break;
          case 'flip-message':
            fc.pre(message.length > 0);
            msg = Uint8Array.from(message);
            msg[position % msg.length]! ^= xor;
            break;
          case 'flip-key':
            publicKey = Uint8Array.from(publicKey);
            publicKey[position % 32]! ^= xor;
            break;
          case 'random-signature':
            signature = noise;
            break;
          case 'random-key':
            publicKey = noise.subarray(0, 32);
            break;
          case 's-plus-l': {
            const s = fromLe(signature.subarray(32)) + L;
            signature = Uint8Array.from([...signature.subarray(0, 32), ...le32(s)]);
            break;
          }
          case 'r-noncanonical': {
            // R replaced by a non-canonical encoding (y = p + k for small k, sign bit from the noise).
            const r = le32(2n ** 255n - 19n + BigInt(position % 19));
            r[31]! |= noise[0]! & 0x80;
            signature = Uint8Array.from([...r, ...signature.subarray(32)]);
            break;
          }
        }
        const expected = strictVerify(signature, msg, publicKey);
        assert.equal(await nodeAccepts(signature, msg, publicKey), expected);
        if (how === 'valid') assert.equal(expected, true);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('on small-order keys: noble refuses them and so does the verifier, though OpenSSL alone accepts a forgery', async () => {
    const message = Buffer.from('any request at all');
    const forged = Uint8Array.from([...ed.Point.BASE.toBytes(), 1, ...new Uint8Array(31)]);
    let openSslAccepted = 0;
    for (const key of SMALL_ORDER) {
      assert.equal(isWeakPublicKey(key), true);
      assert.equal(strictVerify(forged, message, key), false);
      assert.equal(await nodeAccepts(forged, message, key), false);
      try {
        if (await verifyEd25519(message, importPublicKey(key), forged)) openSslAccepted++;
      } catch {
        // OpenSSL may refuse to import some encodings; that is a refusal too.
      }
    }
    // Documents why the screen exists: the identity key verifies R = B, S = 1 for every message.
    assert.ok(openSslAccepted > 0);
  });

  it('on the torsion subgroup: every small-order point is screened', () => {
    const torsion = ed.Point.fromBytes(Uint8Array.from(Buffer.from(SMALL_ORDER[4]!)));
    let point = ed.Point.ZERO;
    for (let i = 0; i < 8; i++) {
      assert.equal(isWeakPublicKey(point.toBytes()), true, `T*${i}`);
      point = point.add(torsion);
    }
    assert.ok(point.equals(ed.Point.ZERO));
  });

  it('on mixed-order keys node:crypto is the stricter one: it never accepts what noble refuses', async () => {
    // A key A + T (T of order 8) with a signature made by its owner satisfies noble's cofactored
    // equation but OpenSSL's cofactorless one only when k is a multiple of 8. Only the master key's
    // holder can get such a live key endorsed, so the difference can only refuse, never admit.
    const torsion = ed.Point.fromBytes(Uint8Array.from(Buffer.from(SMALL_ORDER[4]!)));
    await fc.assert(
      fc.asyncProperty(seed32, fc.uint8Array({ maxLength: 64 }), fc.bigInt({ min: 1n, max: L - 1n }), async (seed, message, r) => {
        const { scalar, point } = ed.utils.getExtendedPublicKey(seed);
        const mixed = point.add(torsion).toBytes();
        const R = ed.Point.BASE.multiply(r).toBytes();
        const k = fromLe(createHash('sha512').update(R).update(mixed).update(message).digest()) % L;
        const signature = Uint8Array.from([...R, ...le32((r + k * scalar) % L)]);
        assert.equal(strictVerify(signature, message, mixed), true);
        assert.equal(await nodeAccepts(signature, message, mixed), k % 8n === 0n);
      }),
      { seed: SEED, numRuns: 40 },
    );
  });
});
