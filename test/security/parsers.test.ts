import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { SignatureError } from '../../src/errors.js';
import { parseRfc3339 } from '../../src/lib/rfc3339.js';
import { decodeBase64Url, encodeBase64Url } from '../../src/lib/base64.js';
import { canonicalRequest, type RequestHeaders } from '../../src/signature/canonicalize.js';
import { parseDate, parseSignature, parseSignedHeaders } from '../../src/signature/parse.js';
import { createVerifier } from '../../src/signature/verifier.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { assertNoPollution, fieldValue, recordRejections, runs, tally } from './helpers.js';

// The pure parsers of outside input: whatever text arrives, they answer a value or a SignatureError
// (401), never another exception, and never look anything up on Object.prototype.

const rejections = recordRejections();
after(() => rejections.dispose());

const SIGNATURE_CODES = new Set(['ERR_SIGNATURE_MISSING', 'ERR_SIGNATURE_MALFORMED', 'ERR_SIGNED_HEADERS_MISSING', 'ERR_SIGNED_HEADERS_MALFORMED', 'ERR_SIGNED_HEADER_ABSENT', 'ERR_REQUIRED_HEADER_UNSIGNED', 'ERR_DATE_MISSING', 'ERR_DATE_MALFORMED', 'ERR_DATE_STALE', 'ERR_ENDORSEMENT_INVALID', 'ERR_REQUEST_SIGNATURE_INVALID']);

/** Runs `fn`; a throw must be a SignatureError with a known code and a 401 status. */
function valueOrSignatureError<T>(fn: () => T): T | SignatureError {
  try {
    return fn();
  } catch (error) {
    assert.ok(error instanceof SignatureError, `threw ${String(error)}`);
    assert.equal(error.status, 401);
    assert.ok(SIGNATURE_CODES.has(error.code), error.code);
    assert.ok(error.message.length >= 3 && error.message.length <= 256);
    return error;
  }
}

const B64URL = /^[A-Za-z0-9_-]*$/;
// Every kind of text a header can hold, and some it cannot (Node would refuse those on the wire).
const anyText = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fieldValue,
  fc.stringMatching(/^[A-Za-z0-9_\- =+/]{0,230}$/),
);
const headerValue = fc.oneof(fc.constant(undefined), anyText, fc.array(anyText, { maxLength: 3 }));

describe('X-Signature parser', () => {
  it('answers three decoded parts of 64, 32 and 64 bytes or a SignatureError, for any text', (t) => {
    const count = tally(t, 'parseSignature on arbitrary text');
    fc.assert(fc.property(headerValue, (value) => {
      count.hit();
      const parsed = valueOrSignatureError(() => parseSignature(value));
      if (parsed instanceof SignatureError) return;
      assert.equal(parsed.requestSignature.length, 64);
      assert.equal(parsed.livePublicKey.length, 32);
      assert.equal(parsed.endorsement.length, 64);
    }), runs(3000));
    count.report();
  });

  it('round-trips every byte string, and any other spelling of it is refused (one text per signature)', (t) => {
    const count = tally(t, 'parseSignature round trip + one-character edits');
    const parts = fc.tuple(fc.uint8Array({ minLength: 64, maxLength: 64 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ minLength: 64, maxLength: 64 }));
    const edit = fc.tuple(fc.nat(), fc.constantFrom(...Array.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/= .\t')));
    fc.assert(fc.property(parts, edit, ([sig, key, endorsement], [position, replacement]) => {
      count.hit();
      const text = `${encodeBase64Url(sig)} ${encodeBase64Url(key)} ${encodeBase64Url(endorsement)}`;
      const parsed = parseSignature(text);
      assert.deepEqual([...parsed.requestSignature], [...sig]);
      assert.deepEqual([...parsed.livePublicKey], [...key]);
      assert.deepEqual([...parsed.endorsement], [...endorsement]);
      const at = position % text.length;
      const edited = text.slice(0, at) + replacement + text.slice(at + 1);
      if (edited === text) return;
      const again = valueOrSignatureError(() => parseSignature(edited));
      // A strict decoder gives each byte string exactly one text: a different text is refused or means other bytes.
      if (!(again instanceof SignatureError)) {
        assert.ok(!again.requestSignature.equals(parsed.requestSignature) || !again.livePublicKey.equals(parsed.livePublicKey) || !again.endorsement.equals(parsed.endorsement));
      }
    }), runs(2000));
    count.report();
  });

  it('decodes base64url strictly: whatever it accepts re-encodes to the same text', (t) => {
    const count = tally(t, 'decodeBase64Url');
    fc.assert(fc.property(anyText, (text) => {
      count.hit();
      const bytes = decodeBase64Url(text);
      if (bytes !== undefined) {
        assert.ok(B64URL.test(text));
        assert.equal(encodeBase64Url(bytes), text);
      }
    }), runs(3000));
    count.report();
  });
});

describe('X-Signed-Headers parser', () => {
  const token = fc.stringMatching(/^[a-z0-9!#$%&'*+.^_`|~-]{1,20}$/);

  it('answers distinct lowercase HTTP tokens (at most 64) or a SignatureError, for any text', (t) => {
    const count = tally(t, 'parseSignedHeaders on arbitrary text');
    fc.assert(fc.property(headerValue, (value) => {
      count.hit();
      const names = valueOrSignatureError(() => parseSignedHeaders(value));
      if (names instanceof SignatureError) return;
      assert.ok(names.length >= 1 && names.length <= 64);
      assert.equal(new Set(names).size, names.length);
      for (const name of names) assert.match(name, /^[a-z0-9!#$%&'*+.^_`|~-]+$/);
    }), runs(3000));
    count.report();
  });

  it('round-trips lists, uses the first of repeated headers, and tolerates surrounding whitespace only', (t) => {
    const count = tally(t, 'parseSignedHeaders round trip');
    const list = fc.uniqueArray(fc.oneof(token, fc.constantFrom('__proto__', 'constructor', 'prototype', 'tostring')), { minLength: 1, maxLength: 64 });
    fc.assert(fc.property(list, fc.array(list, { maxLength: 2 }), fc.constantFrom('', ' ', '\t', ' \t '), (names, others, pad) => {
      count.hit();
      const text = names.join(' ');
      assert.deepEqual(parseSignedHeaders(`${pad}${text}${pad}`), names);
      assert.deepEqual(parseSignedHeaders([text, ...others.map((o) => o.join(' '))]), names);
      // Node joins repeats of an unknown header with ", ": the first occurrence is the list.
      assert.deepEqual(parseSignedHeaders([text, ...others.map((o) => o.join(' '))].join(', ')), names);
      if (names.length > 1) {
        assert.ok(valueOrSignatureError(() => parseSignedHeaders(names.join('  '))) instanceof SignatureError, 'two spaces');
        assert.ok(valueOrSignatureError(() => parseSignedHeaders(names.join(' ').toUpperCase())) instanceof SignatureError || names.join(' ') === names.join(' ').toUpperCase());
      }
      assert.ok(valueOrSignatureError(() => parseSignedHeaders(`${text} ${names[0]!}`)) instanceof SignatureError, 'a repeated name');
    }), runs(1500));
    count.report();
  });
});

describe('Date parsing (RFC 3339)', () => {
  it('never throws on any text; answers a finite time or refuses', (t) => {
    const count = tally(t, 'parseRfc3339 + parseDate on arbitrary text');
    const shaped = fc.stringMatching(/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{0,12})?([Zz]|[+-]\d{2}:?\d{2})?$/);
    fc.assert(fc.property(fc.oneof(anyText, shaped), (text) => {
      count.hit();
      const millis = parseRfc3339(text);
      assert.ok(millis === undefined || Number.isFinite(millis));
      const date = valueOrSignatureError(() => parseDate(text));
      if (!(date instanceof SignatureError)) assert.ok(Number.isFinite(date.getTime()));
    }), runs(4000));
    count.report();
  });

  it('agrees with the ECMAScript date-time parser on every valid RFC 3339 time, any year, offset and fraction', (t) => {
    const count = tally(t, 'parseRfc3339 against Date.parse');
    const pad = (n: number, width: number) => String(Math.abs(n)).padStart(width, '0');
    const parts = fc.record({
      at: fc.date({ min: new Date('0000-01-02T00:00:00Z'), max: new Date('9999-12-30T00:00:00Z'), noInvalidDate: true }),
      fraction: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      offset: fc.option(fc.integer({ min: -23 * 60 - 59, max: 23 * 60 + 59 }), { nil: undefined }),
      lowercase: fc.boolean(),
    });
    fc.assert(fc.property(parts, ({ at, fraction, offset, lowercase }) => {
      count.hit();
      const local = new Date(at.getTime() + (offset ?? 0) * 60_000);
      const frac = fraction === undefined ? '' : `.${pad(local.getUTCMilliseconds(), 3).slice(0, fraction)}`;
      const zone = offset === undefined ? 'Z' : `${offset < 0 ? '-' : '+'}${pad(Math.trunc(Math.abs(offset) / 60), 2)}:${pad(Math.abs(offset) % 60, 2)}`;
      let text = `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)}T${pad(local.getUTCHours(), 2)}:${pad(local.getUTCMinutes(), 2)}:${pad(local.getUTCSeconds(), 2)}${frac}${zone}`;
      fc.pre(local.getUTCFullYear() >= 0 && local.getUTCFullYear() <= 9999);
      const expected = Date.parse(text);
      if (lowercase) text = text.replace('T', 't').replace('Z', 'z');
      assert.equal(parseRfc3339(text), expected, text);
      assert.equal(parseDate(text).getTime(), expected, text);
    }), runs(3000));
    count.report();
  });

  it('reads years 0000 to 0099 literally (Date.UTC would make 0017 into 1917)', () => {
    assert.equal(parseRfc3339('0017-04-06T19:17:03Z'), Date.parse('0017-04-06T19:17:03Z'));
    assert.equal(new Date(parseRfc3339('0000-02-29T00:00:00Z')!).toISOString(), '0000-02-29T00:00:00.000Z');
    assert.equal(parseRfc3339('0100-02-29T00:00:00Z'), undefined);
  });

  it('refuses out-of-range fields instead of rolling them over (February 30, hour 24, month 13)', (t) => {
    const count = tally(t, 'parseRfc3339 out-of-range fields');
    const bad = fc.oneof(
      fc.tuple(fc.integer({ min: 0, max: 9999 }), fc.constantFrom(0, 13, 99), fc.integer({ min: 1, max: 28 })).map(([y, m, d]) => [y, m, d, 0, 0, 0]),
      fc.tuple(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 1, max: 12 }), fc.constantFrom(0, 32, 99)).map(([y, m, d]) => [y, m, d, 0, 0, 0]),
      fc.tuple(fc.integer({ min: 1, max: 9999 }).filter((y) => !(y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0))), fc.constant(2), fc.constant(29)).map(([y, m, d]) => [y, m, d, 0, 0, 0]),
      fc.tuple(fc.constantFrom(24, 25, 99), fc.integer({ min: 0, max: 59 })).map(([h, mi]) => [2017, 4, 6, h, mi, 0]),
      fc.tuple(fc.constantFrom(60, 99)).map(([mi]) => [2017, 4, 6, 12, mi, 0]),
      fc.constant([2017, 4, 6, 12, 0, 61]),
    );
    fc.assert(fc.property(bad, ([y, m, d, h, mi, s]) => {
      count.hit();
      const p = (n: number | undefined, w: number) => String(n).padStart(w, '0');
      const text = `${p(y, 4)}-${p(m, 2)}-${p(d, 2)}T${p(h, 2)}:${p(mi, 2)}:${p(s, 2)}Z`;
      assert.equal(parseRfc3339(text), undefined, text);
    }), runs(1000));
    count.report();
  });
});

describe('canonical form', () => {
  const pathChar = fc.stringMatching(/^(?:[A-Za-z0-9._~!$'()*+,;=:@-]|%[0-9A-Fa-f]{2})$/);
  const piece = fc.array(pathChar, { maxLength: 6 }).map((c) => c.join(''));
  const pairs = fc.array(fc.tuple(piece, fc.option(piece, { nil: undefined })).map(([n, v]) => (v === undefined ? n : `${n}=${v}`)), { maxLength: 6 });
  const names = fc.uniqueArray(fc.oneof(fc.stringMatching(/^x-[a-z]{1,8}$/), fc.constantFrom('__proto__', 'constructor', 'prototype', 'tostring', 'valueof', 'hasownproperty')), { maxLength: 6 });

  it('is one buffer or a SignatureError for any method, target, headers and signed-name list', (t) => {
    const count = tally(t, 'canonicalRequest on arbitrary input');
    const headers = fc.dictionary(fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('__proto__', 'constructor', 'host', 'date', 'x-signed-headers')), headerValue, { maxKeys: 6 });
    fc.assert(fc.property(anyText, anyText, headers, names, fc.uint8Array({ maxLength: 64 }), (method, url, given, signed, body) => {
      count.hit();
      const out = valueOrSignatureError(() => canonicalRequest({ method, url, headers: given, body, signedHeaders: signed }));
      if (!(out instanceof SignatureError)) assert.ok(Buffer.isBuffer(out) && out.length >= body.length);
    }), runs(3000));
    count.report();
  });

  it('never takes a signed header from Object.prototype: a listed name the request lacks is refused', (t) => {
    const count = tally(t, 'canonicalRequest with prototype-named headers');
    fc.assert(fc.property(names.filter((n) => n.length > 0), (signed) => {
      count.hit();
      const headers: RequestHeaders = { 'x-signed-headers': signed.join(' ') };
      const out = valueOrSignatureError(() => canonicalRequest({ method: 'PUT', url: '/v1/resources/x', headers, signedHeaders: signed }));
      assert.ok(out instanceof SignatureError && out.code === 'ERR_SIGNED_HEADER_ABSENT');
    }), runs(500));
    count.report();
  });

  it('does not depend on query order, header whitespace, or string-versus-array headers', (t) => {
    const count = tally(t, 'canonicalRequest invariances');
    fc.assert(fc.property(piece, pairs, fc.dictionary(fc.stringMatching(/^x-[a-z]{1,8}$/), fieldValue, { maxKeys: 4 }), fc.uint8Array({ maxLength: 32 }), fc.constantFrom(' ', '\t', ' \t'), (path, query, given, body, ows) => {
      count.hit();
      const signed = Object.keys(given);
      const base = { ...given, 'x-signed-headers': signed.join(' ') };
      const url = `/${path}${query.length === 0 ? '' : `?${query.join('&')}`}`;
      const reordered = `/${path}${query.length === 0 ? '' : `?${[...query].reverse().join('&')}`}`;
      const padded = Object.fromEntries(Object.entries(base).map(([k, v]) => [k, `${ows}${v}${ows}`]));
      const arrays = Object.fromEntries(Object.entries(base).map(([k, v]) => [k, [v]]));
      const reference = canonicalRequest({ method: 'PUT', url, headers: base, body, signedHeaders: signed });
      assert.ok(canonicalRequest({ method: 'put', url: reordered, headers: padded, body, signedHeaders: signed }).equals(reference));
      assert.ok(canonicalRequest({ method: 'Put', url, headers: arrays, body, signedHeaders: signed }).equals(reference));
    }), runs(1500));
    count.report();
  });
});

describe('verifier on arbitrary requests', () => {
  it('never resolves without a signature made by the endorsed chain, and only ever rejects with a SignatureError', async (t) => {
    const count = tally(t, 'verify on forged requests');
    const master = generateKeyPair();
    const signer = createSigner({ masterPrivateKey: master.privateKey });
    const verifier = createVerifier({ masterKey: master.publicKey });
    const genuine = signer.sign({ method: 'PUT', url: '/v1/resources/x', host: 'h', body: '{}' });
    const [, liveKey, endorsement] = genuine['x-signature']!.split(' ');
    // Shaped like a real X-Signature: random request signatures under the genuine endorsed key, or random everything.
    const forgedSignature = fc.oneof(
      fc.uint8Array({ minLength: 64, maxLength: 64 }).map((sig) => `${encodeBase64Url(sig)} ${liveKey!} ${endorsement!}`),
      fc.tuple(fc.uint8Array({ minLength: 64, maxLength: 64 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ minLength: 64, maxLength: 64 }))
        .map(([a, b, c]) => `${encodeBase64Url(a)} ${encodeBase64Url(b)} ${encodeBase64Url(c)}`),
      anyText,
    );
    const headers = fc.record({
      'x-signature': forgedSignature,
      'x-signed-headers': fc.oneof(fc.constant('host date'), fc.constant(genuine['x-signed-headers']!), anyText),
      date: fc.oneof(fc.constant(genuine.date!), anyText),
      host: fc.oneof(fc.constant('h'), anyText),
      'content-type': fc.constant('application/json'),
    }, { requiredKeys: [] });
    await fc.assert(fc.asyncProperty(headers, fc.constantFrom('PUT', 'GET', 'DELETE'), fc.uint8Array({ maxLength: 16 }), async (given, method, body) => {
      count.hit();
      await assert.rejects(verifier.verify({ method, url: '/v1/resources/x', headers: given, body }), (error: unknown) => error instanceof SignatureError && SIGNATURE_CODES.has(error.code));
    }), runs(600));
    count.report(`${verifier.cachedEndorsements()} endorsement(s) cached (only the genuine one may be)`);
    assert.ok(verifier.cachedEndorsements() <= 1);
  });
});

describe('after every parser property', () => {
  it('left Object.prototype untouched and no promise rejection unhandled', () => {
    assertNoPollution();
    assert.deepEqual(rejections.list, []);
  });
});
