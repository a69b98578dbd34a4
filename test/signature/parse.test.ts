import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SignatureError } from '../../src/errors.js';
import { parseDate, parseSignature, parseSignedHeaderList, parseSignedHeaders } from '../../src/signature/parse.js';
import { encodeBase64Url } from '../../src/lib/base64.js';
import { loadVectors } from './fixtures.js';

function rejects(fn: () => unknown, code: string): void {
  assert.throws(fn, (error: unknown) => error instanceof SignatureError && error.code === code && error.status === 401);
}

const [vector] = loadVectors();
const header = vector!.headers['x-signature']!;
const [requestSig, liveKey, endorsement] = header.split(' ') as [string, string, string];

describe('parseSignature', () => {
  it('decodes the three parts of the vector to 64, 32 and 64 bytes', () => {
    const parsed = parseSignature(header);
    assert.equal(parsed.requestSignature.length, 64);
    assert.equal(parsed.livePublicKey.length, 32);
    assert.equal(parsed.endorsement.length, 64);
    assert.equal(encodeBase64Url(parsed.livePublicKey), liveKey);
    assert.equal(parsed.endorsementText, `${liveKey} ${endorsement}`);
    assert.deepEqual(parseSignature([header]), parsed);
  });

  it('reports a missing header', () => {
    for (const missing of [undefined, '', []]) rejects(() => parseSignature(missing), 'ERR_SIGNATURE_MISSING');
  });

  it('refuses two parts, four parts and other separators', () => {
    const malformed = [
      `${requestSig} ${liveKey}`,
      `${requestSig} ${liveKey} ${endorsement} ${liveKey}`,
      `${requestSig}  ${liveKey} ${endorsement}`,
      `${requestSig}\t${liveKey}\t${endorsement}`,
      `${requestSig},${liveKey},${endorsement}`,
      ` ${requestSig} ${liveKey} ${endorsement}`,
      `${header}, ${header}`,
      [header, header],
    ];
    for (const value of malformed) rejects(() => parseSignature(value), 'ERR_SIGNATURE_MALFORMED');
  });

  it('refuses bad base64url: padding, standard alphabet, foreign characters', () => {
    const swap = (part: string, at: number, ch: string) => part.slice(0, at) + ch + part.slice(at + 1);
    const malformed = [
      `${swap(requestSig, 3, '+')} ${liveKey} ${endorsement}`,
      `${requestSig} ${swap(liveKey, 0, '/')} ${endorsement}`,
      `${requestSig} ${liveKey} ${swap(endorsement, 10, '.')}`,
      `${requestSig} ${liveKey.slice(0, 42)}= ${endorsement}`,
      `${requestSig} ${liveKey} ${endorsement.slice(0, 85)}=`,
    ];
    for (const value of malformed) rejects(() => parseSignature(value), 'ERR_SIGNATURE_MALFORMED');
  });

  it('refuses parts of the wrong length', () => {
    const bytes = (n: number) => encodeBase64Url(Buffer.alloc(n, 7));
    const malformed = [
      `${bytes(63)} ${liveKey} ${endorsement}`,
      `${bytes(65)} ${liveKey} ${endorsement}`,
      `${requestSig} ${bytes(31)} ${endorsement}`,
      `${requestSig} ${bytes(33)} ${endorsement}`,
      `${requestSig} ${liveKey} ${bytes(48)}`,
      `${endorsement} ${requestSig} ${liveKey}`,
    ];
    for (const value of malformed) rejects(() => parseSignature(value), 'ERR_SIGNATURE_MALFORMED');
  });
});

describe('parseSignedHeaders', () => {
  it('splits lowercase names on single spaces', () => {
    assert.deepEqual(parseSignedHeaders('host date x-callback-id content-type'), ['host', 'date', 'x-callback-id', 'content-type']);
    assert.deepEqual(parseSignedHeaders(' host date '), ['host', 'date']);
  });

  it('uses the first occurrence when repeated (array or comma-joined by Node)', () => {
    assert.deepEqual(parseSignedHeaders(['host date', 'x-other']), ['host', 'date']);
    assert.deepEqual(parseSignedHeaders('host date, x-other'), ['host', 'date']);
  });

  it('reports a missing header', () => {
    for (const missing of [undefined, '', '  ', [], ['']]) rejects(() => parseSignedHeaders(missing), 'ERR_SIGNED_HEADERS_MISSING');
  });

  it('refuses uppercase, double spaces, separators, duplicates and garbage', () => {
    const garbage = ['Host date', 'host  date', 'host/date', 'host;date', 'host\tdate', 'host date host', 'hÖst', 'host (date)', 'a:b', Array.from({ length: 65 }, (_, i) => `h${i}`).join(' ')];
    for (const value of garbage) rejects(() => parseSignedHeaders(value), 'ERR_SIGNED_HEADERS_MALFORMED');
  });

  it('answers the same list twice in a row as two arrays of its own', () => {
    const first = parseSignedHeaders('host date content-type');
    first.push('changed');
    const second = parseSignedHeaders('host date content-type');
    assert.deepEqual(second, ['host', 'date', 'content-type']);
    assert.notEqual(second, parseSignedHeaders('host date content-type'));
    // A refusal in between leaves the next answers alone.
    rejects(() => parseSignedHeaders('host  date'), 'ERR_SIGNED_HEADERS_MALFORMED');
    rejects(() => parseSignedHeaders(''), 'ERR_SIGNED_HEADERS_MISSING');
    assert.deepEqual(parseSignedHeaders('host date content-type'), ['host', 'date', 'content-type']);
  });
});

describe('parseSignedHeaderList', () => {
  it('takes one occurrence as sent: a comma makes the list malformed instead of ending it', () => {
    assert.deepEqual(parseSignedHeaderList('host date'), ['host', 'date']);
    rejects(() => parseSignedHeaderList('host date, x-other'), 'ERR_SIGNED_HEADERS_MALFORMED');
    for (const missing of [undefined, '', ' ']) rejects(() => parseSignedHeaderList(missing), 'ERR_SIGNED_HEADERS_MISSING');
  });
});

describe('parseDate', () => {
  it('accepts RFC 3339 date-times with Z, offsets and fractions', () => {
    assert.equal(parseDate('2017-04-06T19:17:03Z').toISOString(), '2017-04-06T19:17:03.000Z');
    assert.equal(parseDate('2017-04-06T21:17:03+02:00').toISOString(), '2017-04-06T19:17:03.000Z');
    assert.equal(parseDate('2017-04-06T19:17:03.250-00:30').toISOString(), '2017-04-06T19:47:03.250Z');
    assert.equal(parseDate('2017-04-06t19:17:03z').toISOString(), '2017-04-06T19:17:03.000Z');
    assert.equal(parseDate([' 2017-04-06T19:17:03Z ']).toISOString(), '2017-04-06T19:17:03.000Z');
  });

  it('reports a missing Date', () => {
    for (const missing of [undefined, '', []]) rejects(() => parseDate(missing), 'ERR_DATE_MISSING');
  });

  it('answers the same Date twice in a row as two Date objects of its own', () => {
    const first = parseDate('2017-04-06T19:17:03Z');
    first.setUTCFullYear(2000);
    const second = parseDate('2017-04-06T19:17:03Z');
    assert.equal(second.toISOString(), '2017-04-06T19:17:03.000Z');
    assert.notEqual(second, parseDate('2017-04-06T19:17:03Z'));
    rejects(() => parseDate('2017-02-30T00:00:00Z'), 'ERR_DATE_MALFORMED');
    assert.equal(parseDate('2017-04-06T19:17:03Z').toISOString(), '2017-04-06T19:17:03.000Z');
  });

  it('refuses other date formats and impossible fields', () => {
    const malformed = [
      'Thu, 06 Apr 2017 19:17:03 GMT',
      '2017-04-06 19:17:03Z',
      '2017-04-06T19:17Z',
      '2017-04-06T19:17:03',
      '2017-04-06T19:17:03+0200',
      '2017-02-30T00:00:00Z',
      '2017-13-01T00:00:00Z',
      '2017-04-06T24:00:00Z',
      '1491506223',
      '2017-04-06T19:17:03Z, 2017-04-06T19:17:03Z',
      ['2017-04-06T19:17:03Z', '2017-04-06T19:17:03Z'],
    ];
    for (const value of malformed) rejects(() => parseDate(value), 'ERR_DATE_MALFORMED');
  });
});
