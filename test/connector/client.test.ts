import { after, before, beforeEach, describe, it } from 'node:test';
import * as assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createConnectorClient, type ConnectorClient, type ConnectorClientOptions } from '../../src/connector/index.js';
import { ConnectorError, InvalidOptionsError } from '../../src/errors.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { captureLogs, testClock } from './helpers.js';

const CLIENT_ID = 'client id:with+odd chars';
const CLIENT_SECRET = 'TOPSECRET-c0nnect0r+/= &é:';
const TTL_S = 3600;

/** Every secret the client handles in these tests; none may reach a log line or an error message. */
const secrets = new Set<string>([CLIENT_SECRET, Buffer.from(CLIENT_SECRET).toString('base64')]);
const errorMessages: string[] = [];
const logs = captureLogs();

async function expectConnectorError(promise: Promise<unknown>, code: string): Promise<ConnectorError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof ConnectorError, `expected a ConnectorError ${code}, got ${String(caught)}`);
  assert.equal(caught.code, code);
  assert.equal(caught.status, 502);
  errorMessages.push(caught.message, JSON.stringify(caught));
  return caught;
}

function freePort(): Promise<number> {
  const server = createServer();
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    server.close(() => resolve(port));
  }));
}

describe('connector client against the fake connector', () => {
  const clock = testClock();
  let fake: FakeConnector;
  let url: string;
  let client: ConnectorClient;
  const make = (extra: Partial<ConnectorClientOptions> = {}): ConnectorClient => createConnectorClient({
    connectorUrl: url, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, now: clock.now, logger: logs.logger, ...extra,
  });

  before(async () => {
    fake = createFakeConnector({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, tokenTtlSeconds: TTL_S, now: clock.now });
    url = (await fake.listen()).url;
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.resetFailures();
    client = make();
  });

  describe('exchangeCode', () => {
    it('exchanges a code with HTTP Basic client authentication (form-encoded id and secret)', async () => {
      const code = fake.issueSsoCode({ resourceId: 'res-a' });
      secrets.add(code);
      const token = await client.exchangeCode(code);
      secrets.add(token.accessToken);
      assert.equal(token.tokenType, 'bearer');
      assert.equal(token.expiresAt, clock.now() + TTL_S * 1000);
      assert.equal(fake.tokenRequests.at(-1)?.clientAuth, 'basic');
      assert.equal(fake.tokenRequests.at(-1)?.grantType, 'authorization_code');
    });

    it('maps a reused code to ERR_CONNECTOR_INVALID_GRANT', async () => {
      const code = fake.issueSsoCode({ resourceId: 'res-a' });
      secrets.add(code);
      secrets.add((await client.exchangeCode(code)).accessToken);
      const err = await expectConnectorError(client.exchangeCode(code), 'ERR_CONNECTOR_INVALID_GRANT');
      assert.equal(err.upstreamStatus, 400);
    });

    it('maps refused client credentials to ERR_CONNECTOR_AUTH', async () => {
      const wrong = make({ clientSecret: 'not-the-secret' });
      secrets.add('not-the-secret');
      const code = fake.issueSsoCode({ resourceId: 'res-a' });
      secrets.add(code);
      const err = await expectConnectorError(wrong.exchangeCode(code), 'ERR_CONNECTOR_AUTH');
      assert.equal(err.upstreamStatus, 401);
    });

    it('never retries: a dropped connection or a 500 is one request and one error', async () => {
      const before = fake.tokenRequests.length;
      fake.failNext('tokens', 1, { drop: true });
      const code = fake.issueSsoCode({ resourceId: 'res-a' });
      secrets.add(code);
      await expectConnectorError(client.exchangeCode(code), 'ERR_CONNECTOR_UNREACHABLE');
      assert.equal(fake.tokenRequests.length, before + 1);
      fake.failNext('tokens', 1, { status: 500 });
      const err = await expectConnectorError(client.exchangeCode(code), 'ERR_CONNECTOR_RESPONSE');
      assert.equal(err.upstreamStatus, 500);
      assert.equal(fake.tokenRequests.length, before + 2);
    });

    it('times out with ERR_CONNECTOR_UNREACHABLE', async () => {
      fake.failNext('tokens', 1, { delayMs: 400 });
      const quick = make({ timeoutMs: 50 });
      const code = fake.issueSsoCode({ resourceId: 'res-a' });
      secrets.add(code);
      const err = await expectConnectorError(quick.exchangeCode(code), 'ERR_CONNECTOR_UNREACHABLE');
      assert.match(err.message, /timed out after 50 ms/);
    });

    it('reports an unreachable connector', async () => {
      const port = await freePort();
      const nowhere = createConnectorClient({ connectorUrl: `http://127.0.0.1:${port}`, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, logger: logs.logger });
      const err = await expectConnectorError(nowhere.exchangeCode('abc'), 'ERR_CONNECTOR_UNREACHABLE');
      assert.match(err.message, /network error/);
    });
  });

  describe('clientCredentialsToken', () => {
    it('makes one token request for many concurrent callers, then serves the cache', async () => {
      const before = fake.tokenRequests.length;
      const tokens = await Promise.all(Array.from({ length: 20 }, () => client.clientCredentialsToken()));
      assert.equal(new Set(tokens).size, 1);
      tokens.forEach((t) => secrets.add(t));
      assert.equal(fake.tokenRequests.length, before + 1);
      assert.equal(fake.tokenRequests.at(-1)?.grantType, 'client_credentials');
      assert.equal(await client.clientCredentialsToken(), tokens[0]);
      assert.equal(fake.tokenRequests.length, before + 1);
    });

    it('renews shortly (tokenRefreshSkewMs) before expiry', async () => {
      const skewed = make({ tokenRefreshSkewMs: 60_000 });
      const first = await skewed.clientCredentialsToken();
      secrets.add(first);
      const before = fake.tokenRequests.length;
      clock.advance(TTL_S * 1000 - 60_001);
      assert.equal(await skewed.clientCredentialsToken(), first);
      clock.advance(2);
      const second = await skewed.clientCredentialsToken();
      secrets.add(second);
      assert.notEqual(second, first);
      assert.equal(fake.tokenRequests.length, before + 1);
    });

    it('does not cache a failure; concurrent callers share it', async () => {
      fake.failNext('tokens', 1, { status: 503 });
      const before = fake.tokenRequests.length;
      const results = await Promise.allSettled([client.clientCredentialsToken(), client.clientCredentialsToken(), client.clientCredentialsToken()]);
      assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected', 'rejected']);
      assert.equal(fake.tokenRequests.length, before + 1);
      await expectConnectorError(Promise.reject((results[0] as PromiseRejectedResult).reason), 'ERR_CONNECTOR_RESPONSE');
      const token = await client.clientCredentialsToken();
      secrets.add(token);
      assert.equal(fake.tokenRequests.length, before + 2);
    });
  });

  describe('getResource', () => {
    it('returns the resource the SSO token may see, undefined for any other', async () => {
      fake.addResource({ id: 'res-b', plan: 'pro', region: 'aws::eu-west-1' });
      fake.addResource({ id: 'res-c' });
      const code = fake.issueSsoCode({ resourceId: 'res-b' });
      secrets.add(code);
      const token = await client.exchangeCode(code);
      secrets.add(token.accessToken);
      const resource = await client.getResource('res-b', token.accessToken);
      assert.equal(resource?.id, 'res-b');
      assert.equal(resource?.plan, 'pro');
      assert.equal(resource?.region, 'aws::eu-west-1');
      assert.equal(await client.getResource('res-c', token.accessToken), undefined);
    });

    it('maps 401 to ERR_CONNECTOR_AUTH and a down resource check to ERR_CONNECTOR_RESPONSE', async () => {
      await expectConnectorError(client.getResource('res-b', 'invalid-token'), 'ERR_CONNECTOR_AUTH');
      fake.setDown('resources', { status: 500 });
      await expectConnectorError(client.getResource('res-b', 'invalid-token'), 'ERR_CONNECTOR_RESPONSE');
      fake.setDown('resources', { drop: true });
      await expectConnectorError(client.getResource('res-b', 'invalid-token'), 'ERR_CONNECTOR_UNREACHABLE');
    });

    it('encodes the id into the path and keeps a connector path prefix', async () => {
      const seen: string[] = [];
      const fakeFetch: typeof fetch = async (input) => {
        seen.push(String(input));
        return new Response(JSON.stringify({ message: 'Not found' }), { status: 404 });
      };
      const prefixed = createConnectorClient({ connectorUrl: 'https://connector.example.com/api/', clientId: 'a', clientSecret: 'b', fetch: fakeFetch, logger: false });
      assert.equal(await prefixed.getResource('a/b c?d', 'tok'), undefined);
      assert.deepEqual(seen, ['https://connector.example.com/api/v1/resources/a%2Fb%20c%3Fd']);
    });
  });

  describe('sendCallback', () => {
    it('delivers with a client_credentials bearer token; an identical repeat is delivered too', async () => {
      const payload = { state: 'done' as const, message: 'Credentials are ready', credentials: { DB_PASSWORD: 'hunter2-secret-value' } };
      secrets.add('hunter2-secret-value');
      assert.deepEqual(await client.sendCallback(fake.callbackUrl('cb-ok'), payload), { outcome: 'delivered', status: 204 });
      assert.deepEqual(await client.sendCallback(fake.callbackUrl('cb-ok'), payload), { outcome: 'delivered', status: 204 });
      assert.deepEqual(fake.acceptedCallback('cb-ok'), payload);
      assert.ok(fake.callbacks.filter((c) => c.id === 'cb-ok').every((c) => c.authOk));
    });

    it('reports a different payload (409) as rejected: final', async () => {
      await client.sendCallback(fake.callbackUrl('cb-409'), { state: 'done', message: 'All done here' });
      const result = await client.sendCallback(fake.callbackUrl('cb-409'), { state: 'error', message: 'It failed after all' });
      assert.equal(result.outcome, 'rejected');
      assert.equal(result.outcome === 'rejected' ? result.status : 0, 409);
      fake.failNext('callbacks', 1, { status: 404 });
      const gone = await client.sendCallback(fake.callbackUrl('cb-404'), { state: 'done', message: 'All done here' });
      assert.deepEqual({ outcome: gone.outcome, status: gone.status }, { outcome: 'rejected', status: 404 });
    });

    it('asks for a retry on 500, 503, 429 (with Retry-After), a dropped connection and a timeout', async () => {
      const target = fake.callbackUrl('cb-retry');
      const payload = { state: 'done' as const, message: 'Provisioned at last' };
      fake.failNext('callbacks', 1, { status: 500 });
      fake.failNext('callbacks', 1, { status: 503, retryAfter: 'Tue, 01 Jan 2030 00:00:30 GMT' });
      fake.failNext('callbacks', 1, { status: 429, retryAfter: '7' });
      fake.failNext('callbacks', 1, { drop: true });
      const r500 = await client.sendCallback(target, payload);
      assert.deepEqual({ outcome: r500.outcome, status: r500.status }, { outcome: 'retry', status: 500 });
      const r503 = await client.sendCallback(target, payload);
      assert.equal(r503.outcome, 'retry');
      assert.equal(r503.outcome === 'retry' ? r503.retryAfterMs : -1, Math.max(0, Date.parse('2030-01-01T00:00:30Z') - clock.now()));
      const r429 = await client.sendCallback(target, payload);
      assert.deepEqual(r429.outcome === 'retry' ? [r429.status, r429.retryAfterMs] : [], [429, 7000]);
      const dropped = await client.sendCallback(target, payload);
      assert.equal(dropped.outcome, 'retry');
      assert.equal(dropped.status, undefined);
      // The answer comes far after the client's timeout, and the timeout is long enough for the
      // token request on a loaded machine: the attempt can only end by timing out on the callback.
      fake.failNext('callbacks', 1, { delayMs: 20_000 });
      const slowClient = make({ timeoutMs: 2000 });
      await slowClient.clientCredentialsToken();
      const slow = await slowClient.sendCallback(target, payload);
      assert.equal(slow.outcome, 'retry');
      assert.match(slow.outcome === 'retry' ? slow.reason : '', /timed out/);
      assert.deepEqual(await client.sendCallback(target, payload), { outcome: 'delivered', status: 204 });
    });

    it("ends an attempt when the caller's signal aborts, before its own timeout", async () => {
      const target = fake.callbackUrl('cb-abort');
      const payload = { state: 'done' as const, message: 'Provisioned at last' };
      await client.clientCredentialsToken();
      // The fake would answer 204 after 20 s and the client's own timeout is 60 s: a 'retry' can
      // only be the abort's doing, whatever the machine's load.
      fake.failNext('callbacks', 1, { delayMs: 20_000 });
      const controller = new AbortController();
      const attempt = make({ timeoutMs: 60_000 }).sendCallback(target, payload, { signal: controller.signal });
      setImmediate(() => controller.abort());
      const result = await attempt;
      assert.equal(result.outcome, 'retry');
    });

    it('on 401 drops the cached token and asks for a retry; the next attempt gets a new token', async () => {
      const target = fake.callbackUrl('cb-401');
      const payload = { state: 'done' as const, message: 'Provisioned at last' };
      const old = await client.clientCredentialsToken();
      secrets.add(old);
      fake.revokeTokens();
      const before = fake.tokenRequests.length;
      const first = await client.sendCallback(target, payload);
      assert.deepEqual({ outcome: first.outcome, status: first.status }, { outcome: 'retry', status: 401 });
      assert.equal(fake.tokenRequests.length, before, 'the refused token is not replaced eagerly');
      assert.deepEqual(await client.sendCallback(target, payload), { outcome: 'delivered', status: 204 });
      assert.equal(fake.tokenRequests.length, before + 1);
      secrets.add(await client.clientCredentialsToken());
    });

    it('asks for a retry when no token can be obtained', async () => {
      fake.setDown('tokens', { status: 503 });
      const result = await client.sendCallback(fake.callbackUrl('cb-notoken'), { state: 'done', message: 'Provisioned at last' });
      assert.equal(result.outcome, 'retry');
      assert.match(result.outcome === 'retry' ? result.reason : '', /client_credentials token/);
      assert.equal(fake.callbacks.some((c) => c.id === 'cb-notoken'), false);
    });

    it('never follows a redirect: 3xx is a retry and the target is not contacted', async () => {
      let redirector: Server | undefined;
      try {
        redirector = createServer((_req, res) => {
          res.writeHead(307, { location: fake.callbackUrl('cb-redirected') });
          res.end();
        });
        await new Promise<void>((resolve) => redirector?.listen(0, '127.0.0.1', resolve));
        const origin = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`;
        const withRedirector = make({ allowedCallbackOrigins: [origin] });
        const result = await withRedirector.sendCallback(`${origin}/v1/callbacks/cb-redirected`, { state: 'done', message: 'Provisioned at last' });
        assert.deepEqual({ outcome: result.outcome, status: result.status }, { outcome: 'retry', status: 307 });
        assert.equal(fake.callbacks.some((c) => c.id === 'cb-redirected'), false);
      } finally {
        await new Promise<void>((resolve) => (redirector === undefined ? resolve() : redirector.close(() => resolve())));
      }
    });

    it('refuses, without any request, a URL outside the policy or an invalid payload', async () => {
      const tokensBefore = fake.tokenRequests.length;
      const callbacksBefore = fake.callbacks.length;
      const foreign = await client.sendCallback('https://attacker.example.net/v1/callbacks/x', { state: 'done', message: 'Provisioned at last' });
      assert.equal(foreign.outcome, 'rejected');
      assert.equal(foreign.status, undefined);
      const userinfo = await client.sendCallback(fake.callbackUrl('x').replace('http://', 'http://u:p@'), { state: 'done', message: 'Provisioned at last' });
      assert.equal(userinfo.outcome, 'rejected');
      const invalid = await client.sendCallback(fake.callbackUrl('x'), { state: 'done', message: 'no' });
      assert.equal(invalid.outcome, 'rejected');
      const badCredentials = await client.sendCallback(fake.callbackUrl('x'), { state: 'done', message: 'Done here', credentials: { password: 'leak-me-not' } });
      assert.equal(badCredentials.outcome, 'rejected');
      assert.ok(!JSON.stringify(badCredentials).includes('leak-me-not'));
      secrets.add('leak-me-not');
      assert.equal(fake.tokenRequests.length, tokensBefore);
      assert.equal(fake.callbacks.length, callbacksBefore);
      assert.equal(client.isAllowedCallbackUrl(fake.callbackUrl('y')), true);
      assert.equal(client.checkCallbackUrl('https://attacker.example.net/').allowed, false);
    });
  });

  it('puts no secret (client secret, code, token, credential value) in any log line or error message', () => {
    assert.ok(logs.lines.length > 10, 'the tests above produced log lines');
    assert.ok(errorMessages.length > 10, 'the tests above produced errors');
    const haystack = [...logs.lines, ...errorMessages];
    for (const secret of secrets) {
      for (const text of haystack) assert.ok(!text.includes(secret), `a secret leaked into: ${text.slice(0, 200)}`);
    }
  });
});

describe('createConnectorClient options', () => {
  const base = { connectorUrl: 'https://connector.example.com', clientId: 'id', clientSecret: 'secret' };
  it('rejects a misspelled or missing option with a hint', () => {
    assert.throws(() => createConnectorClient({ ...base, timeoutMS: 5 } as never), /did you mean "timeoutMs"/);
    assert.throws(() => createConnectorClient({ ...base, clientSecret: '' }), (err: unknown) => err instanceof InvalidOptionsError && /clientSecret/.test(err.message));
    assert.throws(() => createConnectorClient({ ...base, timeoutMs: 0 }), InvalidOptionsError);
    assert.throws(() => createConnectorClient({ ...base, fetch: 'nope' } as never), InvalidOptionsError);
  });
  it('requires https for a non-loopback connector and refuses userinfo without echoing it', () => {
    assert.throws(() => createConnectorClient({ ...base, connectorUrl: 'http://connector.example.com' }), /https/);
    assert.doesNotThrow(() => createConnectorClient({ ...base, connectorUrl: 'http://connector.example.com', allowInsecureHttp: true }));
    assert.doesNotThrow(() => createConnectorClient({ ...base, connectorUrl: 'http://localhost:4000' }));
    assert.throws(
      () => createConnectorClient({ ...base, connectorUrl: 'https://id:hunter2@connector.example.com' }),
      (err: unknown) => err instanceof InvalidOptionsError && !err.message.includes('hunter2'),
    );
  });
});
