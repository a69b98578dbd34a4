import { describe, it } from 'node:test';
import * as assert from 'node:assert/strict';
import { callbackUrlPolicy, parseRetryAfter } from '../../src/connector/index.js';
import { InvalidOptionsError } from '../../src/errors.js';

describe('callbackUrlPolicy', () => {
  const policy = callbackUrlPolicy({ connectorUrl: 'https://connector.example.com/api' });

  it('accepts only the connector origin (exact scheme, host and port) by default', () => {
    assert.equal(policy.isAllowed('https://connector.example.com/v1/callbacks/abc'), true);
    assert.equal(policy.isAllowed('https://connector.example.com:443/v1/callbacks/abc'), true, 'default port is the same origin');
    for (const url of [
      'https://evil.example.net/v1/callbacks/abc',
      'https://connector.example.com.evil.net/v1/callbacks/abc',
      'https://sub.connector.example.com/v1/callbacks/abc',
      'https://connector.example.com:8443/v1/callbacks/abc',
      'http://connector.example.com/v1/callbacks/abc',
    ]) {
      assert.equal(policy.isAllowed(url), false, url);
    }
    assert.deepEqual(policy.origins, ['https://connector.example.com']);
  });

  it('refuses userinfo, other schemes, non-strings, garbage and overlong URLs, without echoing them', () => {
    const cases: unknown[] = [
      'https://user:pass@connector.example.com/v1/callbacks/abc',
      'https://user@connector.example.com/v1/callbacks/abc',
      'javascript:alert(1)',
      'ftp://connector.example.com/x',
      '/v1/callbacks/abc',
      'not a url',
      '',
      undefined,
      ['https://connector.example.com/v1/callbacks/abc'],
      `https://connector.example.com/${'a'.repeat(3000)}`,
    ];
    for (const url of cases) {
      const verdict = policy.check(url);
      assert.equal(verdict.allowed, false, String(url));
      if (!verdict.allowed) {
        assert.ok(verdict.reason.length >= 3 && verdict.reason.length <= 256);
        assert.ok(!verdict.reason.includes('pass') && !verdict.reason.includes('alert'));
      }
    }
  });

  it('allows plain http for loopback connectors and for explicitly allowed origins', () => {
    const local = callbackUrlPolicy({ connectorUrl: 'http://127.0.0.1:8080', allowedOrigins: ['http://connector.internal:9000', 'https://eu.connector.example.com'] });
    assert.equal(local.isAllowed('http://127.0.0.1:8080/v1/callbacks/x'), true);
    assert.equal(local.isAllowed('http://127.0.0.1:8081/v1/callbacks/x'), false);
    assert.equal(local.isAllowed('http://connector.internal:9000/v1/callbacks/x'), true);
    assert.equal(local.isAllowed('https://eu.connector.example.com/v1/callbacks/x'), true);
    assert.equal(local.isAllowed('http://eu.connector.example.com/v1/callbacks/x'), false);
  });

  it('requires https for a non-loopback connector unless allowInsecureHttp is set', () => {
    assert.throws(() => callbackUrlPolicy({ connectorUrl: 'http://connector.internal' }), InvalidOptionsError);
    const insecure = callbackUrlPolicy({ connectorUrl: 'http://connector.internal', allowInsecureHttp: true });
    assert.equal(insecure.isAllowed('http://connector.internal/v1/callbacks/x'), true);
  });

  it('rejects bad options at construction', () => {
    assert.throws(() => callbackUrlPolicy({ connectorUrl: 'https://c.example.com', allowedOrigins: ['https://c.example.com/path'] }), InvalidOptionsError);
    assert.throws(() => callbackUrlPolicy({ connectorUrl: 'https://c.example.com', allowedOrigins: 'https://x.example.com' as never }), InvalidOptionsError);
    assert.throws(() => callbackUrlPolicy({ connectorUrl: 'https://c.example.com', allowedOrigin: [] } as never), /did you mean "allowedOrigins"/);
    assert.throws(() => callbackUrlPolicy({ connectorUrl: 'https://u:topsecret@c.example.com' }), (err: unknown) => err instanceof InvalidOptionsError && !err.message.includes('topsecret'));
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  it('reads delay-seconds and HTTP-dates, never negative', () => {
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter(' 0 ', now), 0);
    assert.equal(parseRetryAfter('Tue, 01 Jan 2030 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Mon, 31 Dec 2029 23:00:00 GMT', now), 0);
  });
  it('ignores absent or unreadable values', () => {
    for (const value of [null, undefined, '', '-5', '1.5', 'soon', '2030-01-01']) assert.equal(parseRetryAfter(value, now), undefined, String(value));
  });
});

describe('callbackUrlPolicy: the callback route only', () => {
  const policy = callbackUrlPolicy({ connectorUrl: 'https://connector.example.com' });

  it('accepts <origin>/v1/callbacks/<X-Callback-ID> and nothing else on the origin', () => {
    assert.equal(policy.isAllowed('https://connector.example.com/v1/callbacks/abc123', 'abc123'), true);
    for (const url of [
      'https://connector.example.com/v1/oauth/tokens',
      'https://connector.example.com/v1/callbacks/other',
      'https://connector.example.com/v1/callbacks/abc123/extra',
      'https://connector.example.com/v1/callbacks/abc123?x=1',
      'https://connector.example.com/v1/callbacks/abc123#frag',
      'https://connector.example.com/v1/callbacks/../oauth/tokens',
      'https://connector.example.com/v1/callbacks/%2e%2e',
      'https://connector.example.com/v1/resources/abc123',
      'https://connector.example.com/',
    ]) {
      const verdict = policy.check(url, 'abc123');
      assert.equal(verdict.allowed, false, url);
      if (!verdict.allowed) assert.match(verdict.reason, /callback route \/v1\/callbacks\/<X-Callback-ID>/);
    }
  });

  it('takes another route prefix, checked at construction', () => {
    const prefixed = callbackUrlPolicy({ connectorUrl: 'https://connector.example.com', callbackPathPrefix: '/api/v2/callbacks/' });
    assert.equal(prefixed.isAllowed('https://connector.example.com/api/v2/callbacks/abc', 'abc'), true);
    assert.equal(prefixed.isAllowed('https://connector.example.com/v1/callbacks/abc', 'abc'), false);
    for (const bad of ['v1/callbacks/', '/v1/callbacks', '/v1/../', 42]) {
      assert.throws(() => callbackUrlPolicy({ connectorUrl: 'https://connector.example.com', callbackPathPrefix: bad as string }), InvalidOptionsError, String(bad));
    }
  });
});
