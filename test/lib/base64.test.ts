import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { decodeBase64Any, decodeBase64Url, encodeBase64Url } from '../../src/lib/base64.js';
import { PRODUCTION_MASTER_PUBLIC_KEY } from '../../src/signature/verifier.js';

describe('base64url (strict, unpadded)', () => {
  it('round-trips every length from 0 to 70 bytes', () => {
    for (let n = 0; n <= 70; n++) {
      const bytes = randomBytes(n);
      const text = encodeBase64Url(bytes);
      assert.match(text, /^[A-Za-z0-9_-]*$/);
      assert.deepEqual(decodeBase64Url(text), bytes);
    }
  });

  it('encodes a subarray view by its own bytes only', () => {
    const whole = Buffer.from([1, 2, 3, 0xfb, 0xff, 9]);
    assert.equal(encodeBase64Url(whole.subarray(3, 5)), '-_8');
  });

  it('refuses padding, the standard alphabet, whitespace and impossible lengths', () => {
    for (const bad of ['AQ==', 'AQ=', 'A+8', 'A/8', 'AQ ID', ' AQID', 'AQID\n', 'A', 'AQIDB', 'AQ.D', 'Ä']) {
      assert.equal(decodeBase64Url(bad), undefined, bad);
    }
  });

  it('refuses stray bits in the last character, so each byte string has one text', () => {
    assert.deepEqual(decodeBase64Url('AQ'), Buffer.from([1]));
    assert.equal(decodeBase64Url('AR'), undefined);
    assert.deepEqual(decodeBase64Url('AQI'), Buffer.from([1, 2]));
    assert.equal(decodeBase64Url('AQJ'), undefined);
  });
});

describe('base64 in either alphabet (keys)', () => {
  it('accepts the production key in all four spellings', () => {
    const raw = decodeBase64Url(PRODUCTION_MASTER_PUBLIC_KEY)!;
    assert.equal(raw.length, 32);
    const standard = raw.toString('base64');
    for (const text of [PRODUCTION_MASTER_PUBLIC_KEY, `${PRODUCTION_MASTER_PUBLIC_KEY}=`, standard, standard.replace(/=+$/, '')]) {
      assert.deepEqual(decodeBase64Any(text), raw, text);
    }
  });

  it('refuses mixed alphabets, misplaced or excess padding and foreign characters', () => {
    for (const bad of ['+-AA', 'AQ=', 'AQ===', 'AQID=', 'A=QD', '=AQD', 'AQ==AQ==', 'AQ*D', 'AR==', 'A===']) {
      assert.equal(decodeBase64Any(bad), undefined, bad);
    }
  });

  it('decodes padded and unpadded standard base64 to the same bytes', () => {
    const bytes = Buffer.from([0xfb, 0xff, 0xfe, 0x01]);
    assert.deepEqual(decodeBase64Any('+//+AQ=='), bytes);
    assert.deepEqual(decodeBase64Any('+//+AQ'), bytes);
    assert.deepEqual(decodeBase64Any('-__-AQ'), bytes);
  });
});
