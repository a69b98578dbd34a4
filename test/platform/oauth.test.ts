import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import supertest from 'supertest';
import { InvalidOptionsError } from '../../src/errors.js';
import {
  deprecatedOAuthRouter,
  MemoryOAuthStore,
  type CodeLimits,
  type DeprecatedOAuthOptions,
  type OAuthRecord,
  type OAuthRecordKind,
  type OAuthUser,
} from '../../src/platform/index.js';
import { capturedLogger, listen, manualClock, type Running } from './helpers.js';

const CLIENT_ID = '3f9a1c0e7b2d4a5f8e6c1b0a9d8e7f6a';
const CLIENT_SECRET = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const CALLBACK = 'https://marketplace.test/oauth/callback';
const OTHER_ID = 'other-client-0000000000000000000';
const OTHER_SECRET = 'other:secret+with/specials';
const OTHER_CALLBACK = 'https://other.test/cb?tenant=7';

const USERS: Record<string, OAuthUser> = {
  'u-alice': { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' },
};

/** A store that remembers what it was given, to show that only digests reach it. */
class RecordingStore extends MemoryOAuthStore {
  readonly saved: { kind: OAuthRecordKind; hash: string; record: OAuthRecord }[] = [];
  override saveCode(hash: string, record: OAuthRecord, limits: CodeLimits, now: number): Promise<'saved' | 'user-limit' | 'total-limit'> {
    this.saved.push({ kind: 'code', hash, record });
    return super.saveCode(hash, record, limits, now);
  }
  override saveToken(kind: 'access' | 'refresh', hash: string, record: OAuthRecord, now: number): Promise<'saved' | 'revoked'> {
    this.saved.push({ kind, hash, record });
    return super.saveToken(kind, hash, record, now);
  }
}

interface Harness {
  running: Running;
  http: () => supertest.Agent;
  clock: ReturnType<typeof manualClock>;
  logs: ReturnType<typeof capturedLogger>;
  store: RecordingStore;
  close(): Promise<void>;
}

async function start(overrides: Partial<DeprecatedOAuthOptions> = {}, before?: express.RequestHandler): Promise<Harness> {
  const clock = manualClock();
  const logs = capturedLogger();
  const store = new RecordingStore({ now: clock.now });
  const app = express();
  if (before !== undefined) app.use(before);
  app.use(
    deprecatedOAuthRouter({
      clients: [
        { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUri: CALLBACK },
        { clientId: OTHER_ID, clientSecret: ['retired-secret', OTHER_SECRET], redirectUri: OTHER_CALLBACK },
      ],
      // The test's stand-in for the platform's own session: a header naming the signed-in user.
      getUser: (req) => USERS[String(req.headers['x-signed-in'])] ?? null,
      now: clock.now,
      store,
      logger: logs.logger,
      ...overrides,
    }),
  );
  const running = await listen(app);
  return { running, http: () => supertest.agent(running.url), clock, logs, store, close: () => running.close() };
}

function authorizeQuery(overrides: Record<string, string | undefined> = {}): string {
  const params: Record<string, string | undefined> = {
    access_type: 'online',
    client_id: CLIENT_ID,
    redirect_uri: CALLBACK,
    response_type: 'code',
    state: 'st-4f2a',
    ...overrides,
  };
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) search.append(name, value);
  return search.toString();
}

async function getCode(h: Harness, overrides: Record<string, string | undefined> = {}): Promise<string> {
  const res = await h.http().get(`/oauth/login?${authorizeQuery(overrides)}`).set('X-Signed-In', 'u-alice').redirects(0);
  assert.equal(res.status, 302, JSON.stringify(res.body));
  const code = new URL(res.headers.location ?? '').searchParams.get('code');
  assert.ok(code);
  return code;
}

function exchange(h: Harness, fields: Record<string, string>, basic?: [string, string]) {
  const req = h.http().post('/oauth/token').type('form').set('Accept-Encoding', 'gzip');
  if (basic !== undefined) req.set('Authorization', `Basic ${Buffer.from(`${basic[0]}:${basic[1]}`).toString('base64')}`);
  return req.send(fields);
}

const codeGrant = (code: string, extra: Record<string, string> = {}) => ({
  grant_type: 'authorization_code',
  code,
  redirect_uri: CALLBACK,
  client_id: CLIENT_ID,
  client_secret: CLIENT_SECRET,
  ...extra,
});

const refreshGrant = (refresh_token: string) => ({ grant_type: 'refresh_token', refresh_token, client_id: CLIENT_ID, client_secret: CLIENT_SECRET });

function userInfo(h: Harness, token: string) {
  return h.http().get('/oauth/userinfo').set('Authorization', `Bearer ${token}`);
}

describe('deprecated OAuth: authorization endpoint', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  it('redirects the signed-in user to the registered callback with a code and the echoed state, without a prompt', async () => {
    const res = await h.http().get(`/oauth/login?${authorizeQuery({ state: 'a b&c=d/é' })}`).set('X-Signed-In', 'u-alice').redirects(0);
    assert.equal(res.status, 302);
    assert.equal(res.headers['cache-control'], 'no-store');
    const location = new URL(res.headers.location ?? '');
    assert.equal(`${location.origin}${location.pathname}`, CALLBACK);
    assert.equal(location.searchParams.get('state'), 'a b&c=d/é');
    assert.match(location.searchParams.get('code') ?? '', /^[A-Za-z0-9_-]{43}$/);
  });

  it('issues a different code each time', async () => {
    const codes = new Set([await getCode(h), await getCode(h), await getCode(h)]);
    assert.equal(codes.size, 3);
  });

  it('leaves state out when none was sent', async () => {
    const res = await h.http().get(`/oauth/login?${authorizeQuery({ state: undefined })}`).set('X-Signed-In', 'u-alice').redirects(0);
    assert.equal(new URL(res.headers.location ?? '').searchParams.has('state'), false);
  });

  it('keeps a query string that is part of the registered redirect_uri', async () => {
    const res = await h
      .http()
      .get(`/oauth/login?${authorizeQuery({ client_id: OTHER_ID, redirect_uri: OTHER_CALLBACK })}`)
      .set('X-Signed-In', 'u-alice')
      .redirects(0);
    assert.equal(res.status, 302);
    assert.ok(res.headers.location?.startsWith(`${OTHER_CALLBACK}&code=`), res.headers.location);
  });

  it('stores the code only as a digest', async () => {
    const code = await getCode(h);
    const saved = h.store.saved.filter((entry) => entry.kind === 'code');
    assert.ok(saved.length > 0);
    assert.ok(!JSON.stringify(saved).includes(code), 'the plain code reaches the store');
    assert.ok(saved.some((entry) => entry.hash !== code && entry.hash.length === 43));
  });

  const refusals: [string, Record<string, string | undefined>, string, RegExp][] = [
    ['no client_id', { client_id: undefined }, 'invalid_request', /client_id/],
    ['an unknown client_id', { client_id: 'nobody' }, 'invalid_request', /client_id/],
    ['no redirect_uri', { redirect_uri: undefined }, 'invalid_request', /redirect_uri/],
    ['a foreign redirect_uri', { redirect_uri: 'https://evil.example/steal' }, 'invalid_request', /redirect_uri/],
    ['a longer path', { redirect_uri: `${CALLBACK}/more` }, 'invalid_request', /redirect_uri/],
    ['a trailing slash', { redirect_uri: `${CALLBACK}/` }, 'invalid_request', /redirect_uri/],
    ['an added query', { redirect_uri: `${CALLBACK}?next=https://evil.example` }, 'invalid_request', /redirect_uri/],
    ['another case', { redirect_uri: CALLBACK.toUpperCase() }, 'invalid_request', /redirect_uri/],
    ['http instead of https', { redirect_uri: CALLBACK.replace('https:', 'http:') }, 'invalid_request', /redirect_uri/],
    ['another client’s redirect_uri', { redirect_uri: OTHER_CALLBACK }, 'invalid_request', /redirect_uri/],
    ['an empty client_id', { client_id: '' }, 'invalid_request', /client_id/],
    ['an empty redirect_uri', { redirect_uri: '' }, 'invalid_request', /redirect_uri/],
  ];
  for (const [name, overrides, error, description] of refusals) {
    it(`refuses ${name} with 400 JSON and never redirects`, async () => {
      const res = await h.http().get(`/oauth/login?${authorizeQuery(overrides)}`).set('X-Signed-In', 'u-alice').redirects(0);
      assert.equal(res.status, 400);
      assert.equal(res.headers.location, undefined);
      assert.match(res.headers['content-type'] ?? '', /^application\/json/);
      assert.equal(res.body.error, error);
      assert.match(res.body.error_description, description);
      assert.equal(res.body.message, res.body.error_description);
    });
  }

  // RFC 6749 §4.1.2.1: once client and redirect URI are known good, the error goes back to the client.
  const redirectedErrors: [string, Record<string, string | undefined>, string, RegExp, string | undefined][] = [
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type', /response_type must be code/, 'st-4f2a'],
    ['no response_type', { response_type: undefined }, 'invalid_request', /response_type is required/, 'st-4f2a'],
    ['an empty response_type', { response_type: '' }, 'invalid_request', /response_type is required/, 'st-4f2a'],
    ['an unknown scope', { scope: 'id admin' }, 'invalid_scope', /scope may only include: id email name/, 'st-4f2a'],
    ['a malformed code_challenge', { code_challenge: 'short' }, 'invalid_request', /code_challenge must be/, 'st-4f2a'],
    ['an unknown code_challenge_method', { code_challenge: 'a'.repeat(43), code_challenge_method: 'S512' }, 'invalid_request', /S256 or plain/, 'st-4f2a'],
    ['a code_challenge_method without a challenge', { code_challenge_method: 'S256' }, 'invalid_request', /without a code_challenge/, 'st-4f2a'],
    ['a state over 2048 characters (not echoed)', { state: 's'.repeat(2049) }, 'invalid_request', /state/, undefined],
  ];
  for (const [name, overrides, error, description, state] of redirectedErrors) {
    it(`redirects ${name} to the registered address with error, error_description and state`, async () => {
      const saved = h.store.saved.length;
      const res = await h.http().get(`/oauth/login?${authorizeQuery(overrides)}`).set('X-Signed-In', 'u-alice').redirects(0);
      assert.equal(res.status, 302);
      const location = new URL(res.headers.location ?? '');
      assert.equal(`${location.origin}${location.pathname}`, CALLBACK);
      assert.equal(location.searchParams.get('error'), error);
      assert.match(location.searchParams.get('error_description') ?? '', description);
      assert.equal(location.searchParams.get('state') ?? undefined, state);
      assert.equal(location.searchParams.get('code'), null);
      assert.equal(h.store.saved.length, saved, 'no code issued');
    });
  }

  it('treats empty optional parameters as omitted (state, scope, code_challenge)', async () => {
    const res = await h.http().get(`/oauth/login?${authorizeQuery({ state: '', scope: '', code_challenge: '', code_challenge_method: '' })}`).set('X-Signed-In', 'u-alice').redirects(0);
    assert.equal(res.status, 302);
    const location = new URL(res.headers.location ?? '');
    assert.ok(location.searchParams.get('code'));
    assert.equal(location.searchParams.has('state'), false);
  });

  it('refuses a repeated redirect_uri (even when one copy is the registered one)', async () => {
    const query = `${authorizeQuery()}&redirect_uri=${encodeURIComponent('https://evil.example/')}`;
    const res = await h.http().get(`/oauth/login?${query}`).set('X-Signed-In', 'u-alice').redirects(0);
    assert.equal(res.status, 400);
    assert.equal(res.headers.location, undefined);
  });

  it('answers 401 JSON when nobody is signed in, and issues no code', async () => {
    const before = h.store.saved.length;
    const res = await h.http().get(`/oauth/login?${authorizeQuery()}`).redirects(0);
    assert.equal(res.status, 401);
    assert.equal(res.headers.location, undefined);
    assert.equal(typeof res.body.message, 'string');
    assert.equal(h.store.saved.length, before);
  });

  it('hands an anonymous browser to onSignInRequired when given', async () => {
    const local = await start({
      onSignInRequired: (req, res) => res.redirect(302, `/login?return_to=${encodeURIComponent(req.originalUrl)}`),
    });
    try {
      const res = await local.http().get(`/oauth/login?${authorizeQuery()}`).redirects(0);
      assert.equal(res.status, 302);
      assert.ok(res.headers.location?.startsWith('/login?return_to=%2Foauth%2Flogin'));
    } finally {
      await local.close();
    }
  });

  for (const [name, getUser] of [
    ['throws', () => Promise.reject(new Error('session store down'))],
    ['returns a user without email', () => ({ sub: 'u', name: 'U' })],
    ['returns an empty sub', () => ({ sub: '', name: 'U', email: 'u@x' })],
  ] as const) {
    it(`answers 500 when getUser ${name}`, async () => {
      const local = await start({ getUser: getUser as DeprecatedOAuthOptions['getUser'] });
      try {
        const res = await local.http().get(`/oauth/login?${authorizeQuery()}`).redirects(0);
        assert.equal(res.status, 500);
        assert.equal(res.headers.location, undefined);
        assert.deepEqual(res.body, { message: 'Internal error' });
      } finally {
        await local.close();
      }
    });
  }
});

describe('deprecated OAuth: token endpoint, authorization_code grant', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  it('exchanges a code: no-store, application/json;charset=UTF-8, section 2.9 body', async () => {
    const res = await exchange(h, codeGrant(await getCode(h)));
    assert.equal(res.status, 200);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.equal(res.headers.pragma, 'no-cache');
    assert.equal(res.headers['content-type'], 'application/json;charset=UTF-8');
    assert.equal(res.headers['content-encoding'], 'gzip');
    assert.deepEqual(Object.keys(res.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type']);
    assert.equal(res.body.scope, 'id email name', 'the configured scopes are echoed');
    assert.equal(res.body.token_type, 'Bearer');
    assert.equal(res.body.expires_in, 7200);
    assert.match(res.body.access_token, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(res.body.access_token, res.body.refresh_token);
    const info = await userInfo(h, res.body.access_token);
    assert.equal(info.status, 200);
    assert.deepEqual(info.body, USERS['u-alice']);
  });

  it('authenticates the client by HTTP Basic', async () => {
    const { client_id: _id, client_secret: _secret, ...fields } = codeGrant(await getCode(h));
    const res = await exchange(h, fields, [CLIENT_ID, CLIENT_SECRET]);
    assert.equal(res.status, 200);
  });

  it('accepts a Basic secret form-encoded (RFC 6749 §2.3.1) or not, and every secret of a rotation list', async () => {
    const grant = async () => {
      const { client_id: _id, client_secret: _secret, ...fields } = codeGrant(await getCode(h, { client_id: OTHER_ID, redirect_uri: OTHER_CALLBACK }), {
        redirect_uri: OTHER_CALLBACK,
      });
      return fields;
    };
    assert.equal((await exchange(h, await grant(), [OTHER_ID, OTHER_SECRET])).status, 200);
    assert.equal((await exchange(h, await grant(), [OTHER_ID, encodeURIComponent(OTHER_SECRET)])).status, 200);
    assert.equal((await exchange(h, await grant(), [OTHER_ID, 'retired-secret'])).status, 200);
  });

  it('accepts client_id in the body next to Basic when it names the same client', async () => {
    const { client_secret: _secret, ...fields } = codeGrant(await getCode(h));
    assert.equal((await exchange(h, fields, [CLIENT_ID, CLIENT_SECRET])).status, 200);
  });

  it('makes a code single-use, and a replay revokes the tokens it produced', async () => {
    const code = await getCode(h);
    const first = await exchange(h, codeGrant(code));
    assert.equal(first.status, 200);
    const replay = await exchange(h, codeGrant(code));
    assert.equal(replay.status, 400);
    assert.equal(replay.body.error, 'invalid_grant');
    assert.equal((await userInfo(h, first.body.access_token)).status, 401);
    assert.equal((await exchange(h, refreshGrant(first.body.refresh_token))).body.error, 'invalid_grant');
    assert.match(h.logs.text(), /authorization code replayed/);
  });

  it('lets a code expire after codeTtlSeconds (default 60)', async () => {
    const fresh = await getCode(h);
    h.clock.advance(59_999);
    assert.equal((await exchange(h, codeGrant(fresh))).status, 200);
    const stale = await getCode(h);
    h.clock.advance(60_000);
    const res = await exchange(h, codeGrant(stale));
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_grant');
  });

  it('honours codeTtlSeconds within 30..60', async () => {
    const local = await start({ codeTtlSeconds: 30 });
    try {
      const code = await getCode(local);
      local.clock.advance(30_000);
      assert.equal((await exchange(local, codeGrant(code))).body.error, 'invalid_grant');
    } finally {
      await local.close();
    }
  });

  it('requires the redirect_uri of the authorization request; a mismatch burns the code', async () => {
    const code = await getCode(h);
    const wrong = await exchange(h, codeGrant(code, { redirect_uri: 'https://evil.example/cb' }));
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.error, 'invalid_grant');
    assert.equal((await exchange(h, codeGrant(code))).body.error, 'invalid_grant');
    const { redirect_uri: _uri, ...withoutUri } = codeGrant(await getCode(h));
    const missing = await exchange(h, withoutUri);
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error, 'invalid_request');
  });

  it('refuses a code issued to another client', async () => {
    const code = await getCode(h);
    const res = await exchange(h, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, client_id: OTHER_ID, client_secret: OTHER_SECRET });
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_grant');
  });

  it('refuses an unknown code', async () => {
    const res = await exchange(h, codeGrant('made-up-code'));
    assert.equal(res.body.error, 'invalid_grant');
  });

  const clientFailures: [string, Record<string, string>, [string, string] | undefined][] = [
    ['no client authentication', { grant_type: 'authorization_code', code: 'c', redirect_uri: CALLBACK }, undefined],
    ['a client_id without secret', { grant_type: 'authorization_code', code: 'c', redirect_uri: CALLBACK, client_id: CLIENT_ID }, undefined],
    ['a wrong secret in the body', { ...codeGrant('c'), client_secret: 'wrong' }, undefined],
    ['an unknown client in the body', { ...codeGrant('c'), client_id: 'nobody' }, undefined],
    ['a wrong secret by Basic', { grant_type: 'authorization_code', code: 'c', redirect_uri: CALLBACK }, [CLIENT_ID, 'wrong']],
    ['an unknown client by Basic', { grant_type: 'authorization_code', code: 'c', redirect_uri: CALLBACK }, ['nobody', CLIENT_SECRET]],
    ['another client’s secret', { ...codeGrant('c'), client_secret: OTHER_SECRET }, undefined],
  ];
  for (const [name, fields, basic] of clientFailures) {
    it(`answers 401 invalid_client with WWW-Authenticate for ${name}`, async () => {
      const res = await exchange(h, fields, basic);
      assert.equal(res.status, 401);
      assert.equal(res.body.error, 'invalid_client');
      assert.equal(typeof res.body.error_description, 'string');
      assert.match(res.headers['www-authenticate'] ?? '', /^Basic realm=/);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.headers['content-type'], 'application/json;charset=UTF-8');
    });
  }

  it('answers invalid_client for a malformed Basic header', async () => {
    const res = await h.http().post('/oauth/token').type('form').set('Authorization', 'Basic !!!').send({ grant_type: 'refresh_token' });
    assert.equal(res.status, 401);
    assert.equal(res.body.error, 'invalid_client');
    const noColon = await h.http().post('/oauth/token').type('form').set('Authorization', `Basic ${Buffer.from('justanid').toString('base64')}`).send({ grant_type: 'refresh_token' });
    assert.equal(noColon.body.error, 'invalid_client');
  });

  const requestFailures: [string, () => supertest.Test, number, string][] = [
    ['no grant_type', () => exchange(h, { client_id: CLIENT_ID, client_secret: CLIENT_SECRET }), 400, 'invalid_request'],
    ['grant_type=password', () => exchange(h, { ...codeGrant('c'), grant_type: 'password' }), 400, 'unsupported_grant_type'],
    ['grant_type=client_credentials', () => exchange(h, { client_id: CLIENT_ID, client_secret: CLIENT_SECRET, grant_type: 'client_credentials' }), 400, 'unsupported_grant_type'],
    ['no code', () => exchange(h, { grant_type: 'authorization_code', redirect_uri: CALLBACK, client_id: CLIENT_ID, client_secret: CLIENT_SECRET }), 400, 'invalid_request'],
    ['Basic and a body secret together', () => exchange(h, codeGrant('c'), [CLIENT_ID, CLIENT_SECRET]), 400, 'invalid_request'],
    ['a body client_id naming another client than Basic', () => exchange(h, { grant_type: 'refresh_token', refresh_token: 'r', client_id: OTHER_ID }, [CLIENT_ID, CLIENT_SECRET]), 400, 'invalid_request'],
    ['a repeated parameter', () => h.http().post('/oauth/token').type('form').send(`${new URLSearchParams(codeGrant('c')).toString()}&code=d`), 400, 'invalid_request'],
    ['a JSON body', () => h.http().post('/oauth/token').send(codeGrant('c')), 400, 'invalid_request'],
    ['a body over 16 KiB', () => exchange(h, { ...codeGrant('c'), padding: 'x'.repeat(17 * 1024) }), 413, 'invalid_request'],
    ['GET', () => h.http().get('/oauth/token'), 405, 'invalid_request'],
  ];
  for (const [name, send, status, error] of requestFailures) {
    it(`answers ${status} ${error} for ${name}`, async () => {
      const res = await send();
      assert.equal(res.status, status);
      assert.equal(res.body.error, error);
      assert.equal(typeof res.body.error_description, 'string');
      assert.equal(res.headers['cache-control'], 'no-store');
    });
  }

  it('reads a form that express.urlencoded() already parsed', async () => {
    const local = await start({}, express.urlencoded({ extended: false }));
    try {
      const res = await exchange(local, codeGrant(await getCode(local)));
      assert.equal(res.status, 200);
    } finally {
      await local.close();
    }
  });
});

describe('deprecated OAuth: refresh_token grant', () => {
  let h: Harness;
  before(async () => {
    h = await start({ refreshTokenTtlSeconds: 10_800 });
  });
  after(() => h.close());

  async function tokens() {
    const res = await exchange(h, codeGrant(await getCode(h)));
    assert.equal(res.status, 200);
    return res.body as { access_token: string; refresh_token: string };
  }

  it('exchanges a refresh token for new tokens after the access token expired', async () => {
    const first = await tokens();
    h.clock.advance(7200_000);
    assert.equal((await userInfo(h, first.access_token)).status, 401);
    const res = await exchange(h, refreshGrant(first.refresh_token));
    assert.equal(res.status, 200);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.equal(res.headers['content-type'], 'application/json;charset=UTF-8');
    assert.equal(res.body.token_type, 'Bearer');
    assert.notEqual(res.body.access_token, first.access_token);
    assert.notEqual(res.body.refresh_token, first.refresh_token);
    assert.deepEqual((await userInfo(h, res.body.access_token)).body, USERS['u-alice']);
  });

  it('rotates: the old refresh token stops working, and replaying it after the retry grace revokes the new tokens', async () => {
    const first = await tokens();
    const second = (await exchange(h, refreshGrant(first.refresh_token))).body as { access_token: string; refresh_token: string };
    h.clock.advance(30_001);
    const replay = await exchange(h, refreshGrant(first.refresh_token));
    assert.equal(replay.status, 400);
    assert.equal(replay.body.error, 'invalid_grant');
    assert.equal((await userInfo(h, second.access_token)).status, 401);
    assert.equal((await exchange(h, refreshGrant(second.refresh_token))).body.error, 'invalid_grant');
    assert.match(h.logs.text(), /refresh token replayed/);
  });

  it('refuses an expired refresh token', async () => {
    const first = await tokens();
    h.clock.advance(10_800_000);
    assert.equal((await exchange(h, refreshGrant(first.refresh_token))).body.error, 'invalid_grant');
  });

  it('refuses a refresh token of another client, an access token, and no token', async () => {
    const first = await tokens();
    const other = await exchange(h, { grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: OTHER_ID, client_secret: OTHER_SECRET });
    assert.equal(other.body.error, 'invalid_grant');
    assert.equal((await exchange(h, refreshGrant(first.access_token))).body.error, 'invalid_grant');
    const missing = await exchange(h, { grant_type: 'refresh_token', client_id: CLIENT_ID, client_secret: CLIENT_SECRET });
    assert.equal(missing.body.error, 'invalid_request');
  });
});

describe('deprecated OAuth: UserInfo', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  it('answers {sub, name, email} for a valid token, by GET and POST', async () => {
    const { access_token } = (await exchange(h, codeGrant(await getCode(h)))).body as { access_token: string };
    const res = await userInfo(h, access_token);
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'] ?? '', /^application\/json/);
    assert.deepEqual(res.body, { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' });
    const post = await h.http().post('/oauth/userinfo').set('Authorization', `Bearer ${access_token}`);
    assert.deepEqual(post.body, res.body);
  });

  const header = (res: supertest.Response) => res.headers['www-authenticate'] ?? '';

  it('answers 401 with error="invalid_token" and a description for an expired token', async () => {
    const { access_token } = (await exchange(h, codeGrant(await getCode(h)))).body as { access_token: string };
    h.clock.advance(7199_999);
    assert.equal((await userInfo(h, access_token)).status, 200);
    h.clock.advance(1);
    const res = await userInfo(h, access_token);
    assert.equal(res.status, 401);
    assert.match(header(res), /^Bearer /);
    assert.match(header(res), /error="invalid_token"/);
    assert.match(header(res), /error_description="The access token is unknown, expired or revoked"/);
    assert.equal(res.body.error, 'invalid_token');
  });

  for (const [name, authorization] of [
    ['an unknown token', 'Bearer not-a-token'],
    ['no token', undefined],
    ['another scheme', `Basic ${Buffer.from('a:b').toString('base64')}`],
  ] as const) {
    it(`answers 401 with error="invalid_token" for ${name}`, async () => {
      const req = h.http().get('/oauth/userinfo');
      if (authorization !== undefined) req.set('Authorization', authorization);
      const res = await req;
      assert.equal(res.status, 401);
      assert.match(header(res), /error="invalid_token", error_description="[^"]+"/);
    });
  }

  it('does not take a refresh token as an access token', async () => {
    const { refresh_token } = (await exchange(h, codeGrant(await getCode(h)))).body as { refresh_token: string };
    assert.equal((await userInfo(h, refresh_token)).status, 401);
  });
});

describe('deprecated OAuth: secrets stay out of logs and stores', () => {
  it('never logs a code, token or client secret through a whole flow', async () => {
    const h = await start();
    try {
      const code = await getCode(h);
      const issued = (await exchange(h, codeGrant(code))).body as { access_token: string; refresh_token: string };
      const rotated = (await exchange(h, refreshGrant(issued.refresh_token))).body as { access_token: string; refresh_token: string };
      await exchange(h, refreshGrant(issued.refresh_token)); // replay, logged as a warning
      await exchange(h, codeGrant(code)); // replay
      await exchange(h, { ...codeGrant('c'), client_secret: 'wrong-secret-value' });
      await exchange(h, { grant_type: 'refresh_token', refresh_token: 'r' }, [OTHER_ID, 'wrong-basic-secret']);
      await userInfo(h, rotated.access_token);
      const text = h.logs.text();
      assert.ok(text.includes('tokens issued'));
      for (const secret of [code, issued.access_token, issued.refresh_token, rotated.access_token, rotated.refresh_token, CLIENT_SECRET, OTHER_SECRET, 'wrong-secret-value', 'wrong-basic-secret']) {
        assert.ok(!text.includes(secret), `a secret reached the log: ${secret.slice(0, 6)}…`);
      }
      const stored = JSON.stringify(h.store.saved);
      for (const secret of [code, issued.access_token, issued.refresh_token, rotated.access_token, rotated.refresh_token]) {
        assert.ok(!stored.includes(secret), 'a plain secret reached the store');
      }
    } finally {
      await h.close();
    }
  });
});

describe('deprecated OAuth: paths, store and options', () => {
  it('serves configured paths', async () => {
    const h = await start({ authorizePath: '/auth/authorize', tokenPath: '/auth/token', userInfoPath: '/auth/me' });
    try {
      const login = await h.http().get(`/auth/authorize?${authorizeQuery()}`).set('X-Signed-In', 'u-alice').redirects(0);
      const code = new URL(login.headers.location ?? '').searchParams.get('code') ?? '';
      const token = await h.http().post('/auth/token').type('form').send(codeGrant(code));
      assert.equal(token.status, 200);
      assert.equal((await h.http().get('/auth/me').set('Authorization', `Bearer ${token.body.access_token}`)).status, 200);
      assert.equal((await h.http().get(`/oauth/login?${authorizeQuery()}`).set('X-Signed-In', 'u-alice').redirects(0)).status, 404);
    } finally {
      await h.close();
    }
  });

  const valid: DeprecatedOAuthOptions = {
    clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUri: CALLBACK }],
    getUser: () => null,
    logger: false,
  };
  const cases: [string, unknown, RegExp][] = [
    ['no clients', { ...valid, clients: [] }, /"clients" is required/],
    ['a client without secret', { ...valid, clients: [{ clientId: 'x', redirectUri: CALLBACK }] }, /clientSecret" is required/],
    ['a relative redirectUri', { ...valid, clients: [{ clientId: 'x', clientSecret: 's', redirectUri: '/cb' }] }, /redirectUri must be the absolute/],
    ['a redirectUri with a fragment', { ...valid, clients: [{ clientId: 'x', clientSecret: 's', redirectUri: `${CALLBACK}#f` }] }, /without a #fragment/],
    ['an ftp redirectUri', { ...valid, clients: [{ clientId: 'x', clientSecret: 's', redirectUri: 'ftp://x.test/cb' }] }, /redirectUri/],
    ['a client registered twice', { ...valid, clients: [...valid.clients, ...valid.clients] }, /registered twice/],
    ['a misspelled client field', { ...valid, clients: [{ clientId: 'x', clientSecret: 's', redirectURI: CALLBACK }] }, /did you mean "redirectUri"/],
    ['no getUser', { ...valid, getUser: undefined }, /"getUser" is required/],
    ['a code lifetime of 29 s', { ...valid, codeTtlSeconds: 29 }, /codeTtlSeconds" must be an integer from 30 to 60/],
    ['a code lifetime of 61 s', { ...valid, codeTtlSeconds: 61 }, /codeTtlSeconds" must be an integer from 30 to 60/],
    ['a relative path', { ...valid, tokenPath: 'oauth/token' }, /tokenPath" must be a path/],
    ['a store of the old shape', { ...valid, store: { save: () => undefined, find: () => undefined, consume: () => undefined, revokeGrant: () => undefined } }, /"store" must implement saveCode, saveToken, find, redeem/],
    ['an empty scope list', { ...valid, scopes: [] }, /"scopes" is required/],
    ['a scope with a space', { ...valid, scopes: ['id email'] }, /"scopes" must be scope tokens/],
    ['an issuer with a query', { ...valid, issuer: 'https://platform.test/?a=1' }, /"issuer" must be/],
    ['a grace beyond 5 minutes', { ...valid, refreshRetryGraceSeconds: 301 }, /refreshRetryGraceSeconds/],
    ['no room for codes', { ...valid, maxCodesPerUser: 0 }, /maxCodesPerUser/],
    ['a misspelled option', { ...valid, codeTTLSeconds: 30 }, /did you mean "codeTtlSeconds"/],
  ];
  for (const [name, options, message] of cases) {
    it(`throws InvalidOptionsError for ${name}`, () => {
      assert.throws(() => deprecatedOAuthRouter(options as DeprecatedOAuthOptions), (error: unknown) => {
        assert.ok(error instanceof InvalidOptionsError);
        assert.match(error.message, message);
        return true;
      });
    });
  }
});
