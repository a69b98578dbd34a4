import { after, before, beforeEach, describe, it } from 'node:test';
import * as assert from 'node:assert/strict';
import express, { type Express } from 'express';
import session from 'express-session';
import request from 'supertest';
import { createConnectorClient, type ConnectorClient } from '../../src/connector/index.js';
import { ConnectorError, InvalidOptionsError } from '../../src/errors.js';
import { assertSessionMiddleware, requireMarketplaceSession, ssoHandler, type SsoHandlerOptions } from '../../src/sso/index.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { captureLogs, testClock } from '../connector/helpers.js';

const CLIENT_ID = 'sso-client';
const CLIENT_SECRET = 'sso-client-secret-value';
const TOKEN_TTL_S = 2 * 3600;
const HOUR = 3600 * 1000;
const RES_A = '2f1ak2x0b7xdwrnk7vz8y4q3cj9e1';
const RES_B = '0b7xdwrnk7vz8y4q3cj9e12f1ak2x';

/** Everything the browser ever saw (bodies and headers), to prove the token never reaches it. */
const seen: string[] = [];
const codes = new Set<string>();
const logs = captureLogs();

function record(res: request.Response): request.Response {
  seen.push(res.text ?? '', JSON.stringify(res.headers));
  return res;
}

function sessionCookie(res: request.Response): string | undefined {
  const raw = res.headers['set-cookie'] as unknown;
  const list = Array.isArray(raw) ? raw as string[] : typeof raw === 'string' ? [raw] : [];
  return list.map((c) => c.split(';')[0] ?? '').find((c) => c.startsWith('connect.sid='));
}

/** A session store whose writes can be made to fail, to check that a failed login leaves nothing. */
class FlakyStore extends session.MemoryStore {
  failWrites = false;
  override set(sid: string, data: session.SessionData, callback?: (err?: unknown) => void): void {
    if (this.failWrites) {
      callback?.(new Error('store is down'));
      return;
    }
    super.set(sid, data, callback);
  }
}

function buildApp(connector: SsoHandlerOptions['connector'], store: session.Store, now: () => number, extra: Partial<SsoHandlerOptions> = {}): Express {
  const app = express();
  app.use(session({ secret: 'test-session-secret', store, resave: false, saveUninitialized: false }));
  app.get('/visit', (req, res) => {
    (req.session as unknown as { visits?: number }).visits = 1;
    res.json({ ok: true });
  });
  app.get('/whoami', (req, res) => {
    res.json({ visits: (req.session as unknown as { visits?: number }).visits ?? 0, marketplace: req.session.marketplace !== undefined });
  });
  app.get('/v1/sso', ssoHandler({ connector, logger: logs.logger, now, ...extra }));
  app.get('/dashboard/:id', requireMarketplaceSession({ now, logger: logs.logger }), (_req, res) => {
    res.json({ resourceId: res.locals.marketplace?.resourceId });
  });
  app.get('/account', requireMarketplaceSession({ resourceParam: false, now, logger: logs.logger }), (_req, res) => {
    res.json({ resourceId: res.locals.marketplace?.resourceId });
  });
  app.get('/misrouted/:rid', requireMarketplaceSession({ now, logger: logs.logger }), (_req, res) => {
    res.json({ ok: true });
  });
  return app;
}

function storedTokens(store: session.MemoryStore): Promise<string[]> {
  return new Promise((resolve, reject) => {
    store.all((err, all) => {
      if (err !== null && err !== undefined) reject(err as Error);
      const sessions: session.SessionData[] = Object.values(all ?? {});
      resolve(sessions.map((s) => s.marketplace?.accessToken).filter((t): t is string => typeof t === 'string'));
    });
  });
}

describe('single sign-on against the fake connector', () => {
  const clock = testClock();
  let fake: FakeConnector;
  let connector: ConnectorClient;
  let store: FlakyStore;
  let app: Express;

  before(async () => {
    fake = createFakeConnector({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, tokenTtlSeconds: TOKEN_TTL_S, now: clock.now });
    const { url } = await fake.listen();
    connector = createConnectorClient({ connectorUrl: url, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, now: clock.now, logger: logs.logger });
    fake.addResource({ id: RES_A });
    fake.addResource({ id: RES_B });
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.resetFailures();
    store = new FlakyStore();
    app = buildApp(connector, store, clock.now);
  });

  function code(resourceId: string): string {
    const c = fake.issueSsoCode({ resourceId });
    codes.add(c);
    return c;
  }

  /** An agent with a pre-existing (non-marketplace) session; returns it and its cookie. */
  async function visitor(): Promise<{ agent: ReturnType<typeof request.agent>; cookie: string }> {
    const agent = request.agent(app);
    const res = record(await agent.get('/visit'));
    const cookie = sessionCookie(res);
    assert.ok(cookie !== undefined);
    return { agent, cookie };
  }

  async function assertNoLogin(agent: ReturnType<typeof request.agent>): Promise<void> {
    const who = record(await agent.get('/whoami'));
    assert.deepEqual(who.body, { visits: 1, marketplace: false }, 'the pre-existing session is untouched');
    assert.equal(record(await agent.get(`/dashboard/${RES_A}`)).status, 401);
    assert.deepEqual(await storedTokens(store), []);
  }

  it('logs in: 303 to the dashboard with a new session id, and the guard lets that resource in', async () => {
    const { agent, cookie: before } = await visitor();
    const res = record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A }));
    assert.equal(res.status, 303);
    assert.equal(res.headers.location, `/dashboard/${RES_A}`);
    assert.equal(res.headers['cache-control'], 'no-store');
    const afterLogin = sessionCookie(res);
    assert.ok(afterLogin !== undefined, 'a session cookie is set');
    assert.notEqual(afterLogin, before, 'the session id changed (regenerated, no fixation)');

    const dashboard = record(await agent.get(`/dashboard/${RES_A}`));
    assert.equal(dashboard.status, 200);
    assert.deepEqual(dashboard.body, { resourceId: RES_A });
    assert.deepEqual(record(await agent.get('/account')).body, { resourceId: RES_A });
    assert.deepEqual(record(await agent.get('/whoami')).body, { visits: 0, marketplace: true }, 'old session data did not carry over');

    // The session the browser had before login is gone from the store.
    const stale = record(await request(app).get('/whoami').set('Cookie', before));
    assert.deepEqual(stale.body, { visits: 0, marketplace: false });
    assert.equal((await storedTokens(store)).length, 1, 'the token is kept server-side');
  });

  it('refuses a dashboard of another resource with 403', async () => {
    const agent = request.agent(app);
    assert.equal(record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A })).status, 303);
    const foreign = record(await agent.get(`/dashboard/${RES_B}`));
    assert.equal(foreign.status, 403);
    assert.match(foreign.body.message as string, /another resource/);
  });

  it('refuses a reused code with 401 and creates no session', async () => {
    const reusable = code(RES_A);
    assert.equal(record(await request(app).get('/v1/sso').query({ code: reusable, resource_id: RES_A })).status, 303);
    const tokensBefore = (await storedTokens(store)).length;
    const { agent } = await visitor();
    const res = record(await agent.get('/v1/sso').query({ code: reusable, resource_id: RES_A }));
    assert.equal(res.status, 401);
    assert.match(res.body.message as string, /invalid, expired or already used/);
    assert.equal(sessionCookie(res), undefined);
    const who = record(await agent.get('/whoami'));
    assert.deepEqual(who.body, { visits: 1, marketplace: false });
    assert.equal((await storedTokens(store)).length, tokensBefore);
  });

  it('refuses a tampered resource_id with 403 and creates no session', async () => {
    const { agent } = await visitor();
    const res = record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_B }));
    assert.equal(res.status, 403);
    assert.equal(typeof res.body.message, 'string');
    assert.equal(sessionCookie(res), undefined);
    await assertNoLogin(agent);
  });

  it('refuses a resource the connector does not show (removed) with 403', async () => {
    const gone = 'gone0000000000000000000000000';
    fake.addResource({ id: gone });
    const c = code(gone);
    fake.removeResource(gone);
    const { agent } = await visitor();
    assert.equal(record(await agent.get('/v1/sso').query({ code: c, resource_id: gone })).status, 403);
    await assertNoLogin(agent);
  });

  it('refuses an expired login with 403 (at the token expiry, at most 24 h), then 401', async () => {
    const agent = request.agent(app);
    assert.equal(record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A })).status, 303);
    clock.advance(TOKEN_TTL_S * 1000 - 1);
    assert.equal(record(await agent.get(`/dashboard/${RES_A}`)).status, 200);
    clock.advance(1);
    const expired = record(await agent.get(`/dashboard/${RES_A}`));
    assert.equal(expired.status, 403);
    assert.match(expired.body.message as string, /expired/);
    assert.equal(record(await agent.get(`/dashboard/${RES_A}`)).status, 401, 'the expired login was removed');
  });

  it('answers 401 when the code exchange fails, 502 when the resource check does, and creates no session', async () => {
    for (const [target, failure, status] of [
      ['tokens', { drop: true }, 401],
      ['tokens', { status: 503 }, 401],
      ['resources', { status: 500 }, 502],
      ['resources', { drop: true }, 502],
    ] as const) {
      fake.setDown(target, failure);
      const { agent } = await visitor();
      const res = record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A }));
      assert.equal(res.status, status, `${target} ${JSON.stringify(failure)}`);
      assert.match(res.body.message as string, /try again/);
      assert.equal(sessionCookie(res), undefined);
      await assertNoLogin(agent);
      fake.setUp(target);
    }
  });

  it('answers 500 and leaves no login when the session store cannot save', async () => {
    const { agent } = await visitor();
    store.failWrites = true;
    const res = record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A }));
    store.failWrites = false;
    assert.equal(res.status, 500);
    assert.equal(sessionCookie(res), undefined);
    assert.deepEqual(await storedTokens(store), []);
    assert.equal(record(await agent.get(`/dashboard/${RES_A}`)).status, 401);
  });

  it('answers 400 for missing, repeated or malformed parameters without calling the connector', async () => {
    const before = fake.tokenRequests.length;
    for (const query of [
      `resource_id=${RES_A}`,
      'code=abc',
      `code=a&code=b&resource_id=${RES_A}`,
      `code=abc&resource_id=${RES_A}&resource_id=${RES_B}`,
      'code=abc&resource_id=..%2F..%2Fetc',
      `code=${'x'.repeat(600)}&resource_id=${RES_A}`,
      `code=a%20b&resource_id=${RES_A}`,
    ]) {
      const res = record(await request(app).get(`/v1/sso?${query}`));
      assert.equal(res.status, 400, query);
      assert.match(res.headers['content-type'] as string, /json/);
      assert.ok((res.body.message as string).length >= 3);
    }
    assert.equal(fake.tokenRequests.length, before);
  });

  it('answers 405 to HEAD without using up the code', async () => {
    const c = code(RES_A);
    const head = record(await request(app).head('/v1/sso').query({ code: c, resource_id: RES_A }));
    assert.equal(head.status, 405);
    assert.equal(head.headers.allow, 'GET');
    assert.equal(record(await request(app).get('/v1/sso').query({ code: c, resource_id: RES_A })).status, 303);
  });

  it('guards routes: 401 without a login, 500 for a route without the resource parameter', async () => {
    assert.equal(record(await request(app).get(`/dashboard/${RES_A}`)).status, 401);
    const agent = request.agent(app);
    await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A });
    assert.equal(record(await agent.get(`/misrouted/${RES_A}`)).status, 500);
    assert.ok(logs.lines.some((l) => l.includes('resourceParam')));
  });

  it('uses a custom dashboardUrl', async () => {
    const custom = buildApp(connector, store, clock.now, { dashboardUrl: (id) => `/app/resources/${id}?tab=overview` });
    const res = record(await request(custom).get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A }));
    assert.equal(res.status, 303);
    assert.equal(res.headers.location, `/app/resources/${RES_A}?tab=overview`);
  });

  it('never lets the access token or the code reach a response, a header, a cookie or a log line', async () => {
    const tokens = await storedTokens(store);
    // Earlier tests' stores are gone; log in once more here so there is a token to look for.
    const agent = request.agent(app);
    assert.equal(record(await agent.get('/v1/sso').query({ code: code(RES_A), resource_id: RES_A })).status, 303);
    tokens.push(...await storedTokens(store));
    assert.ok(tokens.length >= 1);
    assert.ok(seen.length > 20 && logs.lines.length > 5);
    for (const secret of [...tokens, ...codes, CLIENT_SECRET]) {
      for (const text of [...seen, ...logs.lines]) assert.ok(!text.includes(secret), `secret leaked into: ${text.slice(0, 200)}`);
    }
  });
});

describe('single sign-on without express-session', () => {
  const stub: SsoHandlerOptions['connector'] = {
    exchangeCode: () => Promise.reject(new Error('must not be called')),
    getResource: () => Promise.reject(new Error('must not be called')),
  };

  it('fails with 500 JSON and a log line that says how to mount it', async () => {
    const { logger, lines } = captureLogs();
    const app = express();
    app.get('/v1/sso', ssoHandler({ connector: stub, logger }));
    app.get('/dashboard/:id', requireMarketplaceSession({ logger }), (_req, res) => res.end());
    const res = await request(app).get('/v1/sso').query({ code: 'abc', resource_id: RES_A });
    assert.equal(res.status, 500);
    assert.match(res.body.message as string, /sessions/);
    assert.ok(lines.some((l) => l.includes('app.use(session(') && l.includes('before the marketplace')));
    assert.equal((await request(app).get(`/dashboard/${RES_A}`)).status, 500);
  });

  it('offers a start-up check', () => {
    const bare = express();
    bare.get('/v1/sso', ssoHandler({ connector: stub, logger: false }));
    assert.throws(() => assertSessionMiddleware(bare), (err: unknown) => err instanceof InvalidOptionsError && err.message.includes('app.use(session('));
    const mounted = express();
    mounted.use(session({ secret: 'x', resave: false, saveUninitialized: false }));
    assert.doesNotThrow(() => assertSessionMiddleware(mounted));
  });
});

describe('single sign-on with a stub connector', () => {
  const clock = testClock();

  function stubApp(connector: SsoHandlerOptions['connector']): { app: Express; store: session.MemoryStore } {
    const store = new session.MemoryStore();
    return { app: buildApp(connector, store, clock.now), store };
  }

  it('caps a login at 24 h even when the token lives longer', async () => {
    const { app } = stubApp({
      exchangeCode: async () => ({ accessToken: 'long-lived', tokenType: 'bearer', expiresAt: clock.now() + 48 * HOUR }),
      getResource: async (id) => ({ id }),
    });
    const agent = request.agent(app);
    assert.equal((await agent.get('/v1/sso').query({ code: 'abc', resource_id: RES_A })).status, 303);
    clock.advance(24 * HOUR - 1);
    assert.equal((await agent.get(`/dashboard/${RES_A}`)).status, 200);
    clock.advance(1);
    assert.equal((await agent.get(`/dashboard/${RES_A}`)).status, 403);
  });

  it('refuses with 403 when the connector returns another resource than requested', async () => {
    const { app, store } = stubApp({
      exchangeCode: async () => ({ accessToken: 'tok', tokenType: 'bearer', expiresAt: clock.now() + HOUR }),
      getResource: async () => ({ id: RES_B }),
    });
    assert.equal((await request(app).get('/v1/sso').query({ code: 'abc', resource_id: RES_A })).status, 403);
    assert.deepEqual(await storedTokens(store), []);
  });

  it('answers 401 when the connector refuses the provider\'s client credentials', async () => {
    const { app } = stubApp({
      exchangeCode: () => Promise.reject(new ConnectorError('ERR_CONNECTOR_AUTH', 'refused', 401)),
      getResource: async (id) => ({ id }),
    });
    assert.equal((await request(app).get('/v1/sso').query({ code: 'abc', resource_id: RES_A })).status, 401);
  });

  it('answers 500 for an unexpected error from the connector client', async () => {
    const { app } = stubApp({
      exchangeCode: () => Promise.reject(new Error('boom')),
      getResource: async (id) => ({ id }),
    });
    assert.equal((await request(app).get('/v1/sso').query({ code: 'abc', resource_id: RES_A })).status, 500);
  });
});

describe('single sign-on options', () => {
  const stub: SsoHandlerOptions['connector'] = { exchangeCode: async () => ({ accessToken: 't', tokenType: 'bearer', expiresAt: 0 }), getResource: async () => undefined };
  it('rejects missing, misspelled and out-of-range options at construction', () => {
    assert.throws(() => ssoHandler({} as never), /option "connector" is required/);
    assert.throws(() => ssoHandler({ connector: stub, dashboardURL: () => '/' } as never), /did you mean "dashboardUrl"/);
    assert.throws(() => ssoHandler({ connector: stub, tokenTtlMs: 25 * HOUR }), InvalidOptionsError);
    assert.throws(() => ssoHandler({ connector: stub, dashboardUrl: '/dashboard' as never }), InvalidOptionsError);
    assert.throws(() => requireMarketplaceSession({ resourceParam: '' }), InvalidOptionsError);
    assert.throws(() => requireMarketplaceSession({ resourceparam: 'id' } as never), /did you mean "resourceParam"/);
  });
});
