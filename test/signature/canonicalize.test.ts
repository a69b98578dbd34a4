import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalRequest, type CanonicalRequestInput } from '../../src/signature/canonicalize.js';
import { SignatureError } from '../../src/errors.js';
import { loadVectors, vectorRequest } from './fixtures.js';

const base = {
  method: 'GET',
  headers: { host: 'h', date: 'd', 'x-signed-headers': 'host date' },
  signedHeaders: ['host', 'date'],
};

function text(input: Partial<CanonicalRequestInput> & { url: string }): string {
  return canonicalRequest({ ...base, ...input }).toString('latin1');
}

function targetLine(url: string): string {
  return text({ url }).split('\n')[0]!;
}

function rejects(fn: () => unknown, code: string): void {
  assert.throws(fn, (error: unknown) => error instanceof SignatureError && error.code === code && error.status === 401);
}

describe('canonicalRequest: target line', () => {
  it('renders the documentation example exactly', () => {
    const bytes = canonicalRequest({
      method: 'PUT',
      url: '/v1/resources/abc?b=2&a=1',
      headers: { host: 'localhost:3000', date: '2017-04-06T19:17:03Z', 'x-signed-headers': 'host date' },
      body: Buffer.from('{}'),
      signedHeaders: ['host', 'date'],
    });
    assert.equal(bytes.toString(), 'put /v1/resources/abc?a=1&b=2\nhost: localhost:3000\ndate: 2017-04-06T19:17:03Z\nx-signed-headers: host date\n{}');
  });

  it('renders the marketplace vector as the marketplace signed it', () => {
    const [vector] = loadVectors();
    const request = vectorRequest(vector!);
    const bytes = canonicalRequest({ ...request, signedHeaders: request.headers['x-signed-headers']!.split(' ') });
    assert.equal(
      bytes.toString(),
      [
        'put /v1/resources/2682z97t9kecmkzqhjztmm3cjynmu',
        'host: localhost:3000',
        'date: 2017-04-06T19:17:03Z',
        'x-callback-id: 24ph1gyxrcgrt8a6pyf74bafyfcqr',
        'x-callback-url: http://localhost:5000/v1/callbacks/24ph1gyxrcgrt8a6pyf74bafyfcqr',
        'content-type: application/json',
        'content-length: 100',
        'x-signed-headers: host date x-callback-id x-callback-url content-type content-length',
        vector!.body,
      ].join('\n'),
    );
  });

  it('lowercases the method and keeps the path as sent, escapes included', () => {
    assert.equal(targetLine('/v1/a%2Fb/%7Ex'), 'get /v1/a%2Fb/%7Ex');
    assert.equal(text({ url: '/', method: 'PATCH' }).split('\n')[0], 'patch /');
  });

  it('sorts raw query pairs bytewise and keeps percent-encoding', () => {
    assert.equal(targetLine('/p?b=2&a=%2F&A=1&a=1&a=%20'), 'get /p?A=1&a=%20&a=%2F&a=1&b=2');
    assert.equal(targetLine('/p?z=%7e&z=%7E'), 'get /p?z=%7E&z=%7e');
  });

  it('keeps duplicate names, pairs without "=" and empty pieces', () => {
    assert.equal(targetLine('/p?a=2&a=1'), 'get /p?a=1&a=2');
    assert.equal(targetLine('/p?flag&a=1'), 'get /p?a=1&flag');
    assert.equal(targetLine('/p?a=1&&b=2&'), 'get /p?&&a=1&b=2');
    assert.equal(targetLine('/p?single'), 'get /p?single');
  });

  it('treats an empty query after "?" as no query', () => {
    assert.equal(targetLine('/p?'), 'get /p');
    assert.equal(targetLine('/p'), 'get /p');
  });

  it('treats "#" as an ordinary byte of what was received', () => {
    assert.equal(targetLine('/p?b=1#frag&a=1'), 'get /p?a=1&b=1#frag');
    assert.equal(targetLine('/p#x'), 'get /p#x');
  });
});

describe('canonicalRequest: header lines', () => {
  const signed = (headers: Record<string, string | string[] | undefined>, names: string[], extra: Partial<CanonicalRequestInput> = {}) =>
    canonicalRequest({ method: 'GET', url: '/', headers: { 'x-signed-headers': names.join(' '), ...headers }, signedHeaders: names, ...extra }).toString('latin1');

  it('follows the listed order, then x-signed-headers', () => {
    assert.equal(signed({ a: '1', b: '2' }, ['b', 'a']), 'get /\nb: 2\na: 1\nx-signed-headers: b a\n');
  });

  it('joins repeated headers with ", " whether given as an array or already joined', () => {
    const fromArray = signed({ 'x-a': ['one', ' two ', 'three'] }, ['x-a']);
    const fromJoined = signed({ 'x-a': 'one, two, three' }, ['x-a']);
    assert.equal(fromArray, 'get /\nx-a: one, two, three\nx-signed-headers: x-a\n');
    assert.equal(fromJoined, fromArray);
    assert.equal(signed({ 'x-a': ['only'] }, ['x-a']), 'get /\nx-a: only\nx-signed-headers: x-a\n');
  });

  it('removes optional whitespace around values and keeps the inside', () => {
    assert.equal(signed({ 'x-a': ' \t a  b \t ' }, ['x-a']), 'get /\nx-a: a  b\nx-signed-headers: x-a\n');
    assert.equal(signed({ 'x-a': '' }, ['x-a']), 'get /\nx-a: \nx-signed-headers: x-a\n');
  });

  it('renders every X-Signed-Headers occurrence in its own line, like any repeated header', () => {
    const out = canonicalRequest({ method: 'GET', url: '/', headers: { a: '1', 'x-signed-headers': ['a', 'b c'] }, signedHeaders: ['a'] });
    assert.equal(out.toString(), 'get /\na: 1\nx-signed-headers: a, b c\n');
  });

  it('refuses a listed header that is absent instead of rendering it empty', () => {
    rejects(() => signed({}, ['x-callback-id']), 'ERR_SIGNED_HEADER_ABSENT');
    rejects(() => signed({ 'x-a': [] }, ['x-a']), 'ERR_SIGNED_HEADER_ABSENT');
    rejects(() => signed({ 'x-a': undefined }, ['x-a']), 'ERR_SIGNED_HEADER_ABSENT');
    rejects(() => canonicalRequest({ method: 'GET', url: '/', headers: {}, signedHeaders: [] }), 'ERR_SIGNED_HEADER_ABSENT');
  });

  it('never finds a listed name on Object.prototype', () => {
    rejects(() => signed({}, ['constructor']), 'ERR_SIGNED_HEADER_ABSENT');
    rejects(() => signed({}, ['__proto__']), 'ERR_SIGNED_HEADER_ABSENT');
    rejects(() => signed({}, ['hasownproperty']), 'ERR_SIGNED_HEADER_ABSENT');
  });

  it('uses hostOverride for host only', () => {
    assert.equal(
      signed({ host: 'internal:8080', 'x-a': 'v' }, ['host', 'x-a'], { hostOverride: 'api.example.com' }),
      'get /\nhost: api.example.com\nx-a: v\nx-signed-headers: host x-a\n',
    );
  });

  it('writes values as the wire bytes Node decoded them from (ISO-8859-1)', () => {
    const out = canonicalRequest({ method: 'GET', url: '/', headers: { 'x-a': 'caf\u00e9', 'x-signed-headers': 'x-a' }, signedHeaders: ['x-a'] });
    assert.deepEqual(out.subarray(6, 14), Buffer.from([0x78, 0x2d, 0x61, 0x3a, 0x20, 0x63, 0x61, 0x66]));
    assert.equal(out[14], 0xe9);
  });

  it('refuses line breaks, controls and characters HTTP cannot carry', () => {
    for (const value of ['a\nb', 'a\rb', 'a\u0000b', 'caf\u0113']) rejects(() => signed({ 'x-a': value }, ['x-a']), 'ERR_SIGNATURE_MALFORMED');
    rejects(() => text({ url: '/p a' }), 'ERR_SIGNATURE_MALFORMED');
    rejects(() => text({ url: '/\u0100' }), 'ERR_SIGNATURE_MALFORMED');
    rejects(() => text({ url: '/', method: 'GET /x\nhost:' }), 'ERR_SIGNATURE_MALFORMED');
  });
});

describe('canonicalRequest: body', () => {
  it('appends the body bytes unchanged, binary included', () => {
    const body = Buffer.from([0, 255, 10, 13, 0x80]);
    const out = canonicalRequest({ ...base, url: '/', body });
    assert.deepEqual(out.subarray(out.length - body.length), body);
    assert.equal(out.length, 'get /\nhost: h\ndate: d\nx-signed-headers: host date\n'.length + body.length);
  });

  it('treats an absent and an empty body alike', () => {
    assert.deepEqual(canonicalRequest({ ...base, url: '/' }), canonicalRequest({ ...base, url: '/', body: new Uint8Array(0) }));
  });
});
