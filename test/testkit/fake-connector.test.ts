import { after, before, beforeEach, describe, it } from 'node:test';
import * as assert from 'node:assert/strict';
import { InvalidOptionsError } from '../../src/errors.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { basicAuth, testClock } from '../connector/helpers.js';

const CLIENT_ID = 'provider-client';
const CLIENT_SECRET = 's3cret+with spaces&symbols:é';

describe('fake connector', () => {
  const clock = testClock();
  let fake: FakeConnector;
  let url: string;

  before(async () => {
    fake = createFakeConnector({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, tokenTtlSeconds: 600, now: clock.now });
    url = (await fake.listen()).url;
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.resetFailures();
  });

  /** `auth` null sends no Authorization header. */
  async function token(body: Record<string, string>, auth: string | null = basicAuth(CLIENT_ID, CLIENT_SECRET)): Promise<Response> {
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (auth !== null) headers.authorization = auth;
    return fetch(`${url}/v1/oauth/tokens`, { method: 'POST', headers, body: new URLSearchParams(body).toString() });
  }
  async function ccToken(): Promise<string> {
    const res = await token({ grant_type: 'client_credentials' });
    assert.equal(res.status, 201);
    return ((await res.json()) as { access_token: string }).access_token;
  }
  async function ssoToken(resourceId: string): Promise<string> {
    const res = await token({ grant_type: 'authorization_code', code: fake.issueSsoCode({ resourceId }) });
    assert.equal(res.status, 201);
    return ((await res.json()) as { access_token: string }).access_token;
  }
  function callback(id: string, body: unknown, bearer?: string): Promise<Response> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (bearer !== undefined) headers.authorization = `Bearer ${bearer}`;
    return fetch(fake.callbackUrl(id), { method: 'PUT', headers, body: JSON.stringify(body) });
  }

  describe('token endpoint', () => {
    it('grants client_credentials with HTTP Basic (form-encoded id and secret): 201, bearer, expires_in, no-store', async () => {
      const res = await token({ grant_type: 'client_credentials' });
      assert.equal(res.status, 201);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      const body = (await res.json()) as Record<string, unknown>;
      assert.equal(typeof body.access_token, 'string');
      assert.equal(body.token_type, 'bearer');
      assert.equal(body.expires_in, 600);
      assert.equal(fake.tokenRequests.at(-1)?.clientAuth, 'basic');
    });

    it('accepts client authentication in a JSON body', async () => {
      const res = await fetch(`${url}/v1/oauth/tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET }),
      });
      assert.equal(res.status, 201);
      assert.equal(fake.tokenRequests.at(-1)?.clientAuth, 'body');
    });

    it('answers 401 invalid_client for a wrong secret or no authentication', async () => {
      for (const auth of [basicAuth(CLIENT_ID, 'wrong'), basicAuth('someone-else', CLIENT_SECRET), null]) {
        const res = await token({ grant_type: 'client_credentials' }, auth);
        assert.equal(res.status, 401);
        assert.match(res.headers.get('www-authenticate') ?? '', /^Basic/);
        assert.equal(((await res.json()) as { error: string }).error, 'invalid_client');
      }
    });

    it('answers 400 invalid_request for two authentication methods at once, and for a missing grant_type', async () => {
      let res = await token({ grant_type: 'client_credentials', client_secret: CLIENT_SECRET });
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_request');
      res = await token({});
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_request');
    });

    it('answers 400 unsupported_grant_type for other grants', async () => {
      const res = await token({ grant_type: 'password' });
      assert.equal(res.status, 400);
      assert.deepEqual(Object.keys((await res.json()) as object).sort(), ['error', 'error_description']);
    });

    it('exchanges an SSO code once: a second exchange, an unknown or an expired code is invalid_grant', async () => {
      const code = fake.issueSsoCode({ resourceId: 'res1' });
      assert.equal((await token({ grant_type: 'authorization_code', code })).status, 201);
      const reused = await token({ grant_type: 'authorization_code', code });
      assert.equal(reused.status, 400);
      assert.equal(((await reused.json()) as { error: string }).error, 'invalid_grant');
      assert.equal((await token({ grant_type: 'authorization_code', code: 'never-issued' })).status, 400);

      const late = fake.issueSsoCode({ resourceId: 'res1' });
      clock.advance(5 * 60 * 1000);
      assert.equal((await token({ grant_type: 'authorization_code', code: late })).status, 400);
      assert.equal((await token({ grant_type: 'authorization_code' })).status, 400);
    });
  });

  describe('resource check', () => {
    it('shows an SSO token its own resource, with the documented fields', async () => {
      fake.addResource({ id: 'own', plan: 'large', features: { seats: 3 } });
      const res = await fetch(`${url}/v1/resources/own`, { headers: { authorization: `Bearer ${await ssoToken('own')}` } });
      assert.equal(res.status, 200);
      const body = (await res.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(body).sort(), ['created_at', 'features', 'id', 'label', 'plan', 'product', 'region', 'updated_at']);
      assert.equal(body.plan, 'large');
      assert.deepEqual(body.features, { seats: 3 });
    });

    it('answers 404 for another resource, a resource it does not know, and client_credentials tokens', async () => {
      fake.addResource({ id: 'mine' });
      fake.addResource({ id: 'theirs' });
      const sso = await ssoToken('mine');
      assert.equal((await fetch(`${url}/v1/resources/theirs`, { headers: { authorization: `Bearer ${sso}` } })).status, 404);
      fake.removeResource('mine');
      assert.equal((await fetch(`${url}/v1/resources/mine`, { headers: { authorization: `Bearer ${sso}` } })).status, 404);
      const cc = await ccToken();
      assert.equal((await fetch(`${url}/v1/resources/theirs`, { headers: { authorization: `Bearer ${cc}` } })).status, 404);
    });

    it('answers 401 without a token, with an unknown one, or an expired one', async () => {
      fake.addResource({ id: 'r401' });
      assert.equal((await fetch(`${url}/v1/resources/r401`)).status, 401);
      assert.equal((await fetch(`${url}/v1/resources/r401`, { headers: { authorization: 'Bearer nope' } })).status, 401);
      const sso = await ssoToken('r401');
      clock.advance(600 * 1000);
      const res = await fetch(`${url}/v1/resources/r401`, { headers: { authorization: `Bearer ${sso}` } });
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
    });
  });

  describe('callbacks', () => {
    it('requires a client_credentials bearer token (an SSO token is not enough)', async () => {
      assert.equal((await callback('cb-auth', { state: 'done', message: 'Ready now' })).status, 401);
      const res = await callback('cb-auth', { state: 'done', message: 'Ready now' }, await ssoToken('x'));
      assert.equal(res.status, 401);
      assert.equal(fake.callbacks.at(-1)?.authOk, false);
      assert.equal(fake.acceptedCallback('cb-auth'), undefined);
    });

    it('answers 204 first and for an identical repeat, 409 for a different payload', async () => {
      const bearer = await ccToken();
      const first = { state: 'done', message: 'Credentials ready', credentials: { USER: 'u', PASSWORD: 'p' } };
      assert.equal((await callback('cb-idem', first, bearer)).status, 204);
      const reordered = { credentials: { PASSWORD: 'p', USER: 'u' }, message: 'Credentials ready', state: 'done' };
      assert.equal((await callback('cb-idem', reordered, bearer)).status, 204);
      const other = await callback('cb-idem', { state: 'error', message: 'Failed after all' }, bearer);
      assert.equal(other.status, 409);
      assert.equal(typeof ((await other.json()) as { message: string }).message, 'string');
      assert.deepEqual(fake.acceptedCallback('cb-idem'), first);
      assert.deepEqual(fake.callbacks.filter((c) => c.id === 'cb-idem').map((c) => c.status), [204, 204, 409]);
    });

    it('answers 400 for an invalid payload', async () => {
      const bearer = await ccToken();
      for (const body of [{ state: 'maybe', message: 'Hmm hmm' }, { state: 'done', message: 'x' }, { state: 'done', message: 'Fine', credentials: { lower: 'v' } }, ['done']]) {
        assert.equal((await callback('cb-400', body, bearer)).status, 400);
      }
      assert.equal(fake.acceptedCallback('cb-400'), undefined);
    });

    it('waitForCallback resolves when the callback arrives and rejects after its timeout', async () => {
      const bearer = await ccToken();
      const waiting = fake.waitForCallback('cb-wait', 5000);
      await callback('cb-wait', { state: 'done', message: 'Provisioned' }, bearer);
      const received = await waiting;
      assert.deepEqual(received.body, { state: 'done', message: 'Provisioned' });
      assert.equal(received.authOk, true);
      assert.equal((await fake.waitForCallback('cb-wait', 10)).id, 'cb-wait');
      await assert.rejects(fake.waitForCallback('cb-never', 20), /no callback accepted/);
    });
  });

  describe('failure switches', () => {
    it('failNext answers the given status the given number of times, then behaves again', async () => {
      const bearer = await ccToken();
      fake.failNext('callbacks', 2, { status: 500 });
      fake.failNext('callbacks', 1, { status: 429, retryAfter: '7' });
      assert.equal((await callback('cb-fail', { state: 'done', message: 'Done now' }, bearer)).status, 500);
      assert.equal((await callback('cb-fail', { state: 'done', message: 'Done now' }, bearer)).status, 500);
      const limited = await callback('cb-fail', { state: 'done', message: 'Done now' }, bearer);
      assert.equal(limited.status, 429);
      assert.equal(limited.headers.get('retry-after'), '7');
      assert.equal((await callback('cb-fail', { state: 'done', message: 'Done now' }, bearer)).status, 204);
    });

    it('drop closes the connection without an answer', async () => {
      const bearer = await ccToken();
      fake.failNext('callbacks', 1, { drop: true });
      await assert.rejects(callback('cb-drop', { state: 'done', message: 'Done now' }, bearer));
      assert.equal(fake.callbacks.at(-1)?.status, 'dropped');
      assert.equal((await callback('cb-drop', { state: 'done', message: 'Done now' }, bearer)).status, 204);
    });

    it('setDown fails every request to a target until setUp', async () => {
      fake.setDown('tokens');
      assert.equal((await token({ grant_type: 'client_credentials' })).status, 503);
      assert.equal((await token({ grant_type: 'client_credentials' })).status, 503);
      fake.setUp('tokens');
      assert.equal((await token({ grant_type: 'client_credentials' })).status, 201);
      fake.setDown('resources', { status: 500 });
      assert.equal((await fetch(`${url}/v1/resources/any`)).status, 500);
    });

    it('delayMs holds the request, then handles it normally', async () => {
      fake.failNext('tokens', 1, { delayMs: 30 });
      assert.equal((await token({ grant_type: 'client_credentials' })).status, 201);
    });

    it('revokeTokens invalidates every token granted so far', async () => {
      const bearer = await ccToken();
      fake.revokeTokens();
      assert.equal((await callback('cb-revoked', { state: 'done', message: 'Done now' }, bearer)).status, 401);
    });

    it('rejects an unknown target', () => {
      assert.throws(() => fake.failNext('nope' as 'tokens', 1, { status: 500 }), /unknown target/);
    });
  });
});

describe('fake connector lifecycle and options', () => {
  it('rejects a misspelled option with a hint', () => {
    assert.throws(
      () => createFakeConnector({ clientId: 'a', clientSecret: 'b', tokenTTLSeconds: 5 } as never),
      (err: unknown) => err instanceof InvalidOptionsError && /did you mean "tokenTtlSeconds"/.test(err.message),
    );
    assert.throws(() => createFakeConnector({ clientId: 'a' } as never), InvalidOptionsError);
  });

  it('callbackUrl needs a listening fake; close rejects pending waits', async () => {
    const fake = createFakeConnector({ clientId: 'a', clientSecret: 'b' });
    assert.throws(() => fake.callbackUrl('x'), /not listening/);
    const { url, close } = await fake.listen();
    assert.equal(fake.callbackUrl('a b'), `${url}/v1/callbacks/a%20b`);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const waiting = fake.waitForCallback('x', 60_000);
    await close();
    await assert.rejects(waiting, /closed/);
  });
});
