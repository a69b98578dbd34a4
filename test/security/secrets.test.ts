import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import session from 'express-session';
import { pino } from 'pino';
import { accepted, marketplaceRouter, requireMarketplaceSession, type MarketplaceRouter, type ProviderHandlers } from '../../src/index.js';
import { deprecatedOAuthRouter, marketplaceEvents, platformRouter } from '../../src/platform/index.js';
import { sqliteStore } from '../../src/store/sqlite.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner, type Signer } from '../../src/testkit/signer.js';
import { listen, type Running } from '../helpers/http.js';
import { recordRejections, sendRaw, type RawAnswer } from './helpers.js';

// A whole provider lifecycle with every component logging at trace level WITHOUT redaction, so that
// the test proves the code never logs a secret rather than relying on pino's safety net. Every
// secret that exists during the run is collected, then searched for in every log line and in every
// error answer.

const rejections = recordRejections();
const secrets = new Map<string, string>();
const remember = (kind: string, value: string) => void secrets.set(value, kind);

const CLIENT_ID = 'secrets-test-client';
const CLIENT_SECRET = `client-secret-${randomBytes(12).toString('hex')}`;
const SESSION_SECRET = `session-secret-${randomBytes(12).toString('hex')}`;
const STORE_KEY = randomBytes(32).toString('base64');
const RESOURCE = '2secretsresource0000000000001';
const SLOW_RESOURCE = '2secretsresource0000000000002';
const OTHER_RESOURCE = '2secretsresource0000000000003';

const lines: string[] = [];
const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
const errorAnswers: { request: string; answer: RawAnswer }[] = [];

let fake: FakeConnector;
let router: MarketplaceRouter;
let target: Running;
let signer: Signer;
let directory: string;
const realFetch = globalThis.fetch;

/** Credential values the handlers hand out; each is a secret. */
function newCredential(): string {
  const value = `postgres://app:${randomBytes(16).toString('hex')}@db.internal:5432/bonnets`;
  remember('credential value', value);
  return value;
}

const handlers: ProviderHandlers = {
  provision: ({ id }) => (id === SLOW_RESOURCE ? accepted('Racking servers') : 'Your bonnet is ready'),
  changePlan: ({ plan }) => `Now on ${plan}`,
  deprovision: () => undefined,
  provisionCredentials: ({ id }) => (id.endsWith('slow') ? accepted('Creating a database user') : { credentials: { DATABASE_URL: newCredential(), DATABASE_PASSWORD: newCredential() } }),
  deprovisionCredentials: () => 'Revoked',
};

before(async () => {
  for (const [kind, value] of [['client secret', CLIENT_SECRET], ['session secret', SESSION_SECRET], ['store encryption key', STORE_KEY]] as const) remember(kind, value);
  fake = createFakeConnector({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
  await fake.listen();
  fake.addResource({ id: RESOURCE });
  fake.addResource({ id: OTHER_RESOURCE });

  // Every access token the connector grants (SSO and client_credentials) is recorded on its way in.
  globalThis.fetch = async (input, init) => {
    const response = await realFetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.endsWith('/v1/oauth/tokens') && response.ok) {
      const body = (await response.clone().json()) as { access_token?: unknown };
      if (typeof body.access_token === 'string') remember('access token', body.access_token);
    }
    return response;
  };

  const master = generateKeyPair();
  remember('master private key', master.privateKey);
  signer = createSigner({ masterPrivateKey: master.privateKey });
  directory = mkdtempSync(join(tmpdir(), 'em-secrets-'));
  router = marketplaceRouter({
    handlers,
    store: sqliteStore({ path: join(directory, 'provider.db'), encryptionKey: STORE_KEY, logger }),
    masterKey: master.publicKey,
    connector: { url: fake.url, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
    sso: true,
    outbox: { pollIntervalMs: 20 },
    logger,
  });
  const app = express();
  app.use(session({ secret: SESSION_SECRET, resave: false, saveUninitialized: false, store: new session.MemoryStore() }));
  app.use(router);
  app.get('/dashboard/:id', requireMarketplaceSession({ logger }), (_req, res) => void res.json({ resourceId: res.locals.marketplace?.resourceId }));
  target = await listen(app);
});

after(async () => {
  globalThis.fetch = realFetch;
  await target.close();
  await router.close();
  await fake.close();
  rmSync(directory, { recursive: true, force: true });
  rejections.dispose();
});

/** Sends a request signed like the marketplace's; the X-Signature is a secret to keep out of logs. */
async function signed(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<RawAnswer> {
  const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
  const headers = signer.sign({ method, url: path, host: target.host, headers: bytes.length > 0 ? { ...extra, 'content-type': 'application/json' } : extra, body: bytes });
  remember('x-signature', headers['x-signature']!);
  return record(`${method} ${path}`, await sendRaw(target, { method, path, headers: Object.entries(headers), body: bytes }));
}

async function browser(path: string, cookie?: string): Promise<RawAnswer> {
  return record(`GET ${path}`, await sendRaw(target, { method: 'GET', path, headers: [['host', target.host], ...(cookie === undefined ? [] : [['cookie', cookie] as [string, string]])] }));
}

function record(request: string, answer: RawAnswer): RawAnswer {
  if (answer.status >= 400) errorAnswers.push({ request, answer });
  return answer;
}

function sessionCookie(answer: RawAnswer): string | undefined {
  const raw = answer.headers['set-cookie'];
  const cookie = (Array.isArray(raw) ? raw : []).map((c) => c.split(';')[0]!).find((c) => c.startsWith('connect.sid='));
  if (cookie !== undefined) {
    const value = cookie.slice('connect.sid='.length);
    const decoded = decodeURIComponent(value);
    remember('session cookie', value);
    remember('session cookie (decoded)', decoded);
    remember('session id', decoded.slice(2, decoded.lastIndexOf('.')));
  }
  return cookie;
}

const provision = (id: string, plan = 'small') => ({ id, product: 'bonnets', plan, region: 'all::global', features: { size: 2 } });

describe('a whole lifecycle with trace logging', () => {
  it('provisions, rotates credentials, changes plan, reports usage and deprovisions', async () => {
    assert.equal((await signed('PUT', `/v1/resources/${RESOURCE}`, provision(RESOURCE))).status, 201);
    assert.equal((await signed('PUT', `/v1/resources/${RESOURCE}`, provision(RESOURCE))).status, 201, 'an identical repeat');
    assert.equal((await signed('PUT', `/v1/resources/${RESOURCE}`, provision(RESOURCE, 'large'))).status, 409);

    const first = await signed('PUT', '/v1/credentials/2secretscredential00000000001', { id: '2secretscredential00000000001', resource_id: RESOURCE });
    assert.equal(first.status, 201);
    const again = await signed('PUT', '/v1/credentials/2secretscredential00000000001', { id: '2secretscredential00000000001', resource_id: RESOURCE });
    assert.deepEqual(again.json, first.json, 'a repeat answers the same credentials');
    // Rotation: a new credential set, then the old one goes.
    const second = await signed('PUT', '/v1/credentials/2secretscredential00000000002', { id: '2secretscredential00000000002', resource_id: RESOURCE });
    assert.equal(second.status, 201);
    assert.notDeepEqual(second.json, first.json);
    assert.equal((await signed('DELETE', '/v1/credentials/2secretscredential00000000001')).status, 204);
    assert.equal((await signed('DELETE', '/v1/credentials/2secretscredential00000000001')).status, 404);
    assert.equal((await signed('PUT', '/v1/credentials/2secretscredential00000000009', { id: '2secretscredential00000000009', resource_id: 'unknown' })).status, 404);

    assert.equal((await signed('PATCH', `/v1/resources/${RESOURCE}`, { plan: 'large' })).status, 200);
    await router.recordUsage(RESOURCE, 'bonnet-hours', 3);
    const start = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1)).toISOString();
    const end = new Date(Date.now() + 86_400_000).toISOString();
    const measures = await signed('GET', `/v1/resources/${RESOURCE}/measures?period_start=${start}&period_end=${end}`);
    assert.equal(measures.status, 200);
    assert.equal((await signed('GET', `/v1/resources/${RESOURCE}/measures?period_start=nope`)).status, 400);
  });

  it('signs a user in through the fake connector, and refuses reused and tampered codes', async () => {
    const code = fake.issueSsoCode({ resourceId: RESOURCE });
    remember('sso code', code);
    const login = await browser(`/v1/sso?code=${encodeURIComponent(code)}&resource_id=${RESOURCE}`);
    assert.equal(login.status, 303);
    const cookie = sessionCookie(login);
    assert.ok(cookie !== undefined);
    assert.equal((await browser(`/dashboard/${RESOURCE}`, cookie)).status, 200);
    assert.equal((await browser(`/dashboard/${OTHER_RESOURCE}`, cookie)).status, 403);
    assert.equal((await browser(`/v1/sso?code=${encodeURIComponent(code)}&resource_id=${RESOURCE}`)).status, 401, 'a code works once');

    const tampered = fake.issueSsoCode({ resourceId: OTHER_RESOURCE });
    remember('sso code', tampered);
    assert.equal((await browser(`/v1/sso?code=${encodeURIComponent(tampered)}&resource_id=${RESOURCE}`)).status, 403);
    const forged = `forged-${randomBytes(8).toString('hex')}`;
    remember('sso code', forged);
    assert.equal((await browser(`/v1/sso?code=${forged}&resource_id=${RESOURCE}`)).status, 401);
  });

  it('completes long-running operations through callbacks, across a refused token and a failed delivery', async () => {
    const callbackUrl = (id: string) => ({ 'x-callback-id': id, 'x-callback-url': fake.callbackUrl(id) });
    assert.equal((await signed('PUT', `/v1/resources/${SLOW_RESOURCE}`, provision(SLOW_RESOURCE), callbackUrl('cbresource1'))).status, 202);
    assert.equal((await signed('PUT', '/v1/credentials/2secretscredential0000000slow', { id: '2secretscredential0000000slow', resource_id: RESOURCE }, callbackUrl('cbcredential1'))).status, 202);

    await router.complete({ entity: 'resource', id: SLOW_RESOURCE }, { state: 'done', message: 'Servers racked' });
    assert.equal((await fake.waitForCallback('cbresource1', 5000)).authOk, true);

    // The cached token is revoked and the next delivery fails once: the outbox logs both, and retries.
    fake.revokeTokens();
    fake.failNext('callbacks', 1, { status: 500 });
    await router.complete({ entity: 'credential', id: '2secretscredential0000000slow' }, { state: 'done', credentials: { DATABASE_URL: newCredential() } });
    const delivered = await fake.waitForCallback('cbcredential1', 8000);
    assert.equal(delivered.status, 204);
    assert.ok(fake.callbacks.filter((c) => c.id === 'cbcredential1').length >= 2, 'the delivery was retried');
  });

  it('refuses tampered and unsigned requests', async () => {
    const body = Buffer.from(JSON.stringify(provision('2secretsresource0000000000004')));
    const headers = signer.sign({ method: 'PUT', url: '/v1/resources/2secretsresource0000000000004', host: target.host, headers: { 'content-type': 'application/json' }, body });
    remember('x-signature', headers['x-signature']!);
    const tampered = Buffer.from(body);
    tampered[10]! ^= 1;
    const answer = record('tampered PUT', await sendRaw(target, { method: 'PUT', path: '/v1/resources/2secretsresource0000000000004', headers: Object.entries(headers), body: tampered }));
    assert.equal(answer.status, 401);
    const replayed = record('replayed elsewhere', await sendRaw(target, { method: 'PUT', path: '/v1/resources/2secretsresource0000000000005', headers: Object.entries(headers), body }));
    assert.equal(replayed.status, 401);
  });

  it('deprovisions the resource with its credentials', async () => {
    assert.equal((await signed('DELETE', `/v1/resources/${RESOURCE}`)).status, 204);
    assert.equal((await signed('DELETE', '/v1/credentials/2secretscredential00000000002')).status, 404, 'credentials went with the resource');
    assert.equal((await signed('DELETE', `/v1/resources/${RESOURCE}`)).status, 404);
  });
});

describe('the platform side with trace logging', () => {
  const PLATFORM_TOKEN = `platform-token-${randomBytes(12).toString('hex')}`;
  const OAUTH_SECRET = `oauth-secret-${randomBytes(12).toString('hex')}`;
  const HOOK_SECRET = `hook-secret-${randomBytes(12).toString('hex')}`;
  const CLIENT = { clientId: 'ab'.repeat(16), clientSecret: OAUTH_SECRET, redirectUri: 'https://marketplace.example/callback' };
  let platform: Running;

  before(async () => {
    for (const [kind, value] of [['platform access token', PLATFORM_TOKEN], ['oauth client secret', OAUTH_SECRET], ['webhook secret', HOOK_SECRET]] as const) remember(kind, value);
    const app = express();
    app.use(platformRouter({ accessTokens: [PLATFORM_TOKEN], logger, getProfile: (id) => (id === 'u-alice' ? { id, state: 'active' } : null), listUsers: () => [], authorize: () => true }));
    app.post('/v1/events', marketplaceEvents({ logger, verify: (req) => req.headers['x-hook-secret'] === HOOK_SECRET, handlers: { 'resource:provisioned': () => undefined } }));
    app.use(deprecatedOAuthRouter({ logger, clients: [CLIENT], getUser: () => ({ sub: 'u-alice', name: 'Alice', email: 'alice@example.com' }) }));
    platform = await listen(app);
  });
  after(async () => {
    await platform.close();
  });

  const call = async (method: string, path: string, headers: [string, string][] = [], body?: string) =>
    record(`platform ${method} ${path}`, await sendRaw(platform, { method, path, headers: [['host', platform.host], ...headers], body: body === undefined ? undefined : Buffer.from(body) }));
  const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  const formType: [string, string] = ['content-type', 'application/x-www-form-urlencoded'];

  it('serves the bearer-token endpoints and refuses wrong tokens', async () => {
    assert.equal((await call('GET', '/v1/profiles/u-alice', [['authorization', `Bearer ${PLATFORM_TOKEN}`]])).status, 200);
    assert.equal((await call('GET', '/v1/profiles/u-alice', [['authorization', `Bearer ${PLATFORM_TOKEN}x`]])).status, 401);
    assert.equal((await call('GET', '/v1/users?resource_id=r', [['authorization', `Bearer ${PLATFORM_TOKEN}`]])).status, 400);
  });

  it('receives verified webhooks and refuses unverified ones', async () => {
    const body = JSON.stringify({ event: 'resource:provisioned', version: 1, data: { resource_id: 'r1', subject: 'u-alice' } });
    const headers: [string, string][] = [['x-marketplace-event', 'resource:provisioned'], ['content-type', 'application/json']];
    assert.equal((await call('POST', '/v1/events', [...headers, ['x-hook-secret', HOOK_SECRET]], body)).status, 200);
    assert.equal((await call('POST', '/v1/events', [...headers, ['x-hook-secret', `${HOOK_SECRET}0`]], body)).status, 401);
  });

  it('runs the deprecated flow: code, tokens, refresh, UserInfo, and a replayed code', async () => {
    const login = await call('GET', `/oauth/login?client_id=${CLIENT.clientId}&redirect_uri=${encodeURIComponent(CLIENT.redirectUri)}&response_type=code&state=s1`);
    assert.equal(login.status, 302);
    const code = new URL(String(login.headers.location)).searchParams.get('code')!;
    remember('oauth code', code);
    const basic: [string, string] = ['authorization', `Basic ${Buffer.from(`${CLIENT.clientId}:${OAUTH_SECRET}`).toString('base64')}`];
    remember('oauth basic credentials', basic[1]);
    const tokens = await call('POST', '/oauth/token', [formType, basic], form({ grant_type: 'authorization_code', code, redirect_uri: CLIENT.redirectUri }));
    assert.equal(tokens.status, 200);
    const { access_token: access, refresh_token: refresh } = tokens.json as { access_token: string; refresh_token: string };
    remember('oauth access token', access);
    remember('oauth refresh token', refresh);
    assert.equal((await call('GET', '/oauth/userinfo', [['authorization', `Bearer ${access}`]])).status, 200);
    const refreshed = await call('POST', '/oauth/token', [formType, basic], form({ grant_type: 'refresh_token', refresh_token: refresh }));
    assert.equal(refreshed.status, 200);
    remember('oauth access token', (refreshed.json as { access_token: string }).access_token);
    remember('oauth refresh token', (refreshed.json as { refresh_token: string }).refresh_token);
    // A replayed code and a reused refresh token are refused, and revoke the grant (logged as such).
    assert.equal((await call('POST', '/oauth/token', [formType, basic], form({ grant_type: 'authorization_code', code, redirect_uri: CLIENT.redirectUri }))).status, 400);
    assert.equal((await call('POST', '/oauth/token', [formType, basic], form({ grant_type: 'refresh_token', refresh_token: refresh }))).status, 400);
    assert.equal((await call('GET', '/oauth/userinfo', [['authorization', `Bearer ${access}`]])).status, 401);
    const wrong = `wrong-${OAUTH_SECRET}`;
    remember('oauth client secret (wrong guess)', wrong);
    assert.equal((await call('POST', '/oauth/token', [formType], form({ grant_type: 'authorization_code', code, client_id: CLIENT.clientId, client_secret: wrong, redirect_uri: CLIENT.redirectUri }))).status, 401);
  });
});

describe('what was logged and answered', () => {
  it('captured the lifecycle from every component', (t) => {
    const text = lines.join('');
    for (const expected of ['"component":"provider"', '"component":"outbox"', '"component":"connector"', '"component":"store"', '"component":"sso"', 'single sign-on succeeded', 'callback delivered', 'marketplace request signature rejected', '"component":"platform"', '"component":"platform-oauth"', '"component":"platform-events"', 'authorization code replayed']) {
      assert.ok(text.includes(expected), `no log line with ${expected}: the capture is not seeing everything`);
    }
    t.diagnostic(`secrets test: ${lines.length} log lines, ${errorAnswers.length} error answers, ${secrets.size} secret values checked (${[...new Set(secrets.values())].join(', ')})`);
  });

  it('contains no secret in any log line or error answer', () => {
    assert.ok([...secrets.values()].filter((kind) => kind === 'access token').length >= 2, 'both kinds of access token were recorded');
    assert.ok([...secrets.values()].includes('session id'));
    for (const [value, kind] of secrets) {
      for (const line of lines) assert.ok(!line.includes(value), `a ${kind} appears in a log line: ${line.slice(0, 300)}`);
      for (const { request, answer } of errorAnswers) {
        assert.ok(!answer.text.includes(value) && !JSON.stringify(answer.headers).includes(value), `a ${kind} appears in the ${answer.status} answer to ${request}`);
      }
    }
  });

  it('left no promise rejection unhandled', () => {
    assert.deepEqual(rejections.list, []);
  });
});
