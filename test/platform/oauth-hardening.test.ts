/**
 * The deprecated OAuth flow against attackers and flaky networks: PKCE, scopes, replays racing a
 * redemption still saving, retried refreshes, codes presented by the wrong client, deleted users,
 * floods of authorizations, and the hook calls metrics are built on.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import express from 'express';
import supertest from 'supertest';
import { ServiceUnavailableError } from '../../src/errors.js';
import { noInstrumentation, type Instrumentation } from '../../src/observability/index.js';
import {
  deprecatedOAuthRouter,
  MemoryOAuthStore,
  type DeprecatedOAuthOptions,
  type OAuthRecord,
  type OAuthUser,
} from '../../src/platform/index.js';
import { capturedLogger, manualClock } from './helpers.js';

const CLIENT = { clientId: 'marketplace-client-0123456789abcdef', clientSecret: 'marketplace-secret-0123456789abcdef0123456789', redirectUri: 'https://marketplace.test/cb' };
const OTHER = { clientId: 'other-client-0123456789abcdef0000', clientSecret: 'other-secret-0123456789abcdef0123456789', redirectUri: 'https://other.test/cb' };
const VERIFIER = 'v'.repeat(20) + 'erifier-0123456789-abcdefghij';
const S256 = createHash('sha256').update(VERIFIER).digest('base64url');

function harness(overrides: Partial<DeprecatedOAuthOptions> = {}, store = new MemoryOAuthStore()) {
  const clock = manualClock();
  const logs = capturedLogger();
  const users = new Map<string, OAuthUser>([
    ['u-alice', { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' }],
    ['u-mallory', { sub: 'u-mallory', name: 'Mallory', email: 'mallory@example.com' }],
  ]);
  const tokenCalls: { grant: string; outcome: string }[] = [];
  const instrumentation: Instrumentation = { ...noInstrumentation, oauthToken: (event) => void tokenCalls.push(event) };
  const router = deprecatedOAuthRouter({
    clients: [CLIENT, OTHER],
    getUser: (req) => users.get(String(req.headers['x-signed-in'])) ?? null,
    getUserById: (sub) => users.get(sub) ?? null,
    store,
    now: clock.now,
    logger: logs.logger,
    ...overrides,
    ...({ instrumentation } as object),
  });
  const app = express();
  app.use(router);
  const http = supertest(app);

  async function authorize(query: Record<string, string> = {}, as = 'u-alice'): Promise<URL> {
    const params = new URLSearchParams({ client_id: CLIENT.clientId, redirect_uri: CLIENT.redirectUri, response_type: 'code', state: 's1', ...query });
    const res = await http.get(`/oauth/login?${params}`).set('X-Signed-In', as).redirects(0);
    assert.equal(res.status, 302, JSON.stringify(res.body));
    return new URL(res.headers.location ?? '');
  }
  async function code(query: Record<string, string> = {}, as = 'u-alice'): Promise<string> {
    const location = await authorize(query, as);
    const value = location.searchParams.get('code');
    assert.ok(value, location.toString());
    return value;
  }
  const token = (fields: Record<string, string>, client = CLIENT) =>
    http.post('/oauth/token').type('form').send({ client_id: client.clientId, client_secret: client.clientSecret, ...fields });
  const redeem = (value: string, extra: Record<string, string> = {}, client = CLIENT) =>
    token({ grant_type: 'authorization_code', code: value, redirect_uri: client.redirectUri, ...extra }, client);
  const refresh = (value: string, extra: Record<string, string> = {}, client = CLIENT) => token({ grant_type: 'refresh_token', refresh_token: value, ...extra }, client);
  const userInfo = (access: string) => http.get('/oauth/userinfo').set('Authorization', `Bearer ${access}`);
  return { http, router, clock, logs, users, tokenCalls, authorize, code, token, redeem, refresh, userInfo };
}

describe('deprecated OAuth: PKCE', () => {
  it('S256: the matching verifier gets tokens; a wrong or missing verifier is refused', async () => {
    const h = harness();
    assert.equal((await h.redeem(await h.code({ code_challenge: S256, code_challenge_method: 'S256' }), { code_verifier: VERIFIER })).status, 200);
    const wrong = await h.redeem(await h.code({ code_challenge: S256, code_challenge_method: 'S256' }), { code_verifier: `${VERIFIER}x` });
    assert.equal(wrong.status, 400);
    assert.deepEqual(wrong.body, { error: 'invalid_grant', error_description: 'code_verifier does not match the code_challenge' });
    const missing = await h.redeem(await h.code({ code_challenge: S256, code_challenge_method: 'S256' }));
    assert.match(missing.body.error_description, /code_verifier is required/);
  });

  it('plain (the default method): the verifier must equal the challenge', async () => {
    const h = harness();
    assert.equal((await h.redeem(await h.code({ code_challenge: VERIFIER }), { code_verifier: VERIFIER })).status, 200);
    assert.equal((await h.redeem(await h.code({ code_challenge: VERIFIER, code_challenge_method: 'plain' }), { code_verifier: S256 + 'aaaaaaa' })).body.error, 'invalid_grant');
  });

  it('refuses a code_verifier for a code issued without a challenge (RFC 9700 §2.1.1)', async () => {
    const h = harness();
    const res = await h.redeem(await h.code(), { code_verifier: VERIFIER });
    assert.equal(res.status, 400);
    assert.match(res.body.error_description, /no code_challenge/);
  });
});

describe('deprecated OAuth: scopes and metadata', () => {
  it('echoes the granted scope, narrows on request, and refuses a broader scope on refresh', async () => {
    const h = harness();
    const full = await h.redeem(await h.code());
    assert.equal(full.body.scope, 'id email name');
    const narrow = await h.redeem(await h.code({ scope: 'id email' }));
    assert.equal(narrow.body.scope, 'id email');
    const broader = await h.refresh(narrow.body.refresh_token, { scope: 'id email name' });
    assert.equal(broader.status, 400);
    assert.equal(broader.body.error, 'invalid_scope');
    const narrower = await h.refresh(full.body.refresh_token, { scope: 'id' });
    assert.equal(narrower.status, 200);
    assert.equal(narrower.body.scope, 'id');
  });

  it('serves RFC 8414 metadata listing endpoints, grants, PKCE methods and client authentication', async () => {
    const h = harness({ issuer: 'https://platform.test' });
    const res = await h.http.get('/.well-known/oauth-authorization-server');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      issuer: 'https://platform.test',
      authorization_endpoint: 'https://platform.test/oauth/login',
      token_endpoint: 'https://platform.test/oauth/token',
      userinfo_endpoint: 'https://platform.test/oauth/userinfo',
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256', 'plain'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      scopes_supported: ['id', 'email', 'name'],
    });
  });
});

describe('deprecated OAuth: codes and clients', () => {
  it('refuses a code presented by another client without burning it for its own client', async () => {
    const h = harness();
    const value = await h.code();
    const stolen = await h.redeem(value, {}, OTHER);
    assert.equal(stolen.status, 400);
    assert.equal(stolen.body.error, 'invalid_grant');
    assert.equal((await h.redeem(value)).status, 200, 'the rightful client still redeems it');
  });

  it('treats empty token request parameters as omitted', async () => {
    const h = harness();
    const res = await h.redeem(await h.code(), { code_verifier: '' });
    assert.equal(res.status, 200);
    assert.equal((await h.token({ grant_type: '', code: 'x' })).body.error_description, 'grant_type is required');
  });

  it('bounds outstanding codes per user with a clear redirected error and a log line; other users are unaffected', async () => {
    const h = harness({ maxCodesPerUser: 3 });
    for (let i = 0; i < 3; i += 1) await h.code({}, 'u-mallory');
    const refused = await h.authorize({}, 'u-mallory');
    assert.equal(refused.searchParams.get('error'), 'temporarily_unavailable');
    assert.match(refused.searchParams.get('error_description') ?? '', /Too many authorizations/);
    assert.equal(refused.searchParams.get('state'), 's1');
    assert.match(h.logs.text(), /authorization refused: this user already holds 3 unredeemed codes/);
    assert.equal((await h.redeem(await h.code())).status, 200, 'alice still signs in');
    h.clock.advance(60_000);
    assert.ok((await h.authorize({}, 'u-mallory')).searchParams.get('code'), 'expired codes free their places');
  });

  it('a flood of authorizations never evicts a live token', async () => {
    const h = harness({ maxCodesPerUser: 10_000, maxCodes: 50 });
    const victim = await h.redeem(await h.code());
    let refused = 0;
    for (let i = 0; i < 200; i += 1) if ((await h.authorize({}, 'u-mallory')).searchParams.get('error') === 'temporarily_unavailable') refused += 1;
    assert.equal(refused, 150);
    assert.match(h.logs.text(), /the server holds 50 unredeemed codes/);
    assert.equal((await h.userInfo(victim.body.access_token)).status, 200);
    assert.equal((await h.refresh(victim.body.refresh_token)).status, 200);
  });
});

describe('deprecated OAuth: replays and retries', () => {
  it('a code replayed while its first redemption is still saving revokes the tokens saved afterwards', async () => {
    let hold!: () => void;
    const held = new Promise<void>((resolve) => {
      hold = resolve;
    });
    let arrived!: () => void;
    const saving = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    class SlowStore extends MemoryOAuthStore {
      override async saveToken(kind: 'access' | 'refresh', hash: string, record: OAuthRecord, now: number): Promise<'saved' | 'revoked'> {
        if (kind === 'access') {
          arrived();
          await held;
        }
        return super.saveToken(kind, hash, record, now);
      }
    }
    const h = harness({}, new SlowStore());
    const value = await h.code();
    const first = h.redeem(value).then((res) => res);
    await saving;
    const replay = await h.redeem(value);
    assert.equal(replay.body.error, 'invalid_grant');
    hold();
    const answer = await first;
    assert.equal(answer.status, 400, 'the first redemption learns its grant was revoked');
    assert.equal(answer.body.error, 'invalid_grant');
  });

  it('a refresh retried within the grace period by the same client answers the same tokens', async () => {
    const h = harness();
    const first = await h.redeem(await h.code());
    const renewed = await h.refresh(first.body.refresh_token);
    h.clock.advance(29_000);
    const retried = await h.refresh(first.body.refresh_token);
    assert.equal(retried.status, 200);
    assert.equal(retried.body.access_token, renewed.body.access_token);
    assert.equal(retried.body.refresh_token, renewed.body.refresh_token);
    assert.equal((await h.userInfo(retried.body.access_token)).status, 200);
    assert.match(h.logs.text(), /refresh retried within the grace period/);
  });

  it('after the grace period (or once the new refresh token was used) reuse revokes the grant', async () => {
    const h = harness({ refreshRetryGraceSeconds: 10 });
    const first = await h.redeem(await h.code());
    const renewed = await h.refresh(first.body.refresh_token);
    h.clock.advance(10_001);
    assert.equal((await h.refresh(first.body.refresh_token)).body.error, 'invalid_grant');
    assert.equal((await h.userInfo(renewed.body.access_token)).status, 401);

    const again = await h.redeem(await h.code());
    const next = await h.refresh(again.body.refresh_token);
    const after = await h.refresh(next.body.refresh_token);
    assert.equal(after.status, 200);
    assert.equal((await h.refresh(again.body.refresh_token)).body.error, 'invalid_grant', 'the client had moved on: a replay');
    assert.equal((await h.userInfo(after.body.access_token)).status, 401);
  });

  it('another client presenting a used refresh token gets nothing and revokes nothing', async () => {
    const h = harness();
    const first = await h.redeem(await h.code());
    const renewed = await h.refresh(first.body.refresh_token);
    assert.equal((await h.refresh(first.body.refresh_token, {}, OTHER)).body.error, 'invalid_grant');
    assert.equal((await h.userInfo(renewed.body.access_token)).status, 200);
  });
});

describe('deprecated OAuth: users that change', () => {
  it('consults getUserById at UserInfo (current details) and refresh; a deleted user stops working', async () => {
    const h = harness();
    const tokens = await h.redeem(await h.code());
    h.users.set('u-alice', { sub: 'u-alice', name: 'Alice B.', email: 'alice.b@example.com' });
    assert.deepEqual((await h.userInfo(tokens.body.access_token)).body, { sub: 'u-alice', name: 'Alice B.', email: 'alice.b@example.com' });
    h.users.delete('u-alice');
    assert.equal((await h.userInfo(tokens.body.access_token)).status, 401);
    assert.equal((await h.refresh(tokens.body.refresh_token)).body.error, 'invalid_grant');
    h.users.set('u-alice', { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' });
    assert.equal((await h.userInfo(tokens.body.access_token)).status, 401, 'the grant was revoked, not just refused');
  });

  it('a refresh retried within the grace period for a user deleted meanwhile gets nothing', async () => {
    const h = harness();
    const tokens = await h.redeem(await h.code());
    assert.equal((await h.refresh(tokens.body.refresh_token)).status, 200);
    h.users.delete('u-alice');
    assert.equal((await h.refresh(tokens.body.refresh_token)).body.error, 'invalid_grant');
  });

  it('revokeSubject(sub) revokes every grant of the user, and only theirs', async () => {
    const h = harness();
    const one = await h.redeem(await h.code());
    const two = await h.redeem(await h.code());
    const other = await h.redeem(await h.code({}, 'u-mallory'));
    assert.equal(await h.router.revokeSubject('u-alice'), 2);
    assert.equal((await h.userInfo(one.body.access_token)).status, 401);
    assert.equal((await h.refresh(two.body.refresh_token)).body.error, 'invalid_grant');
    assert.equal((await h.userInfo(other.body.access_token)).status, 200);
  });
});

describe('deprecated OAuth: storage outages', () => {
  it('answers 503 temporarily_unavailable with Retry-After when the store is unreachable', async () => {
    class DownStore extends MemoryOAuthStore {
      override redeem(): Promise<never> {
        return Promise.reject(new ServiceUnavailableError());
      }
    }
    const h = harness({}, new DownStore());
    const res = await h.redeem(await h.code());
    assert.equal(res.status, 503);
    assert.equal(res.headers['retry-after'], '1');
    assert.equal(res.body.error, 'temporarily_unavailable');
  });
});

describe('deprecated OAuth: metrics hook', () => {
  it('calls oauthToken once per token answer with the grant and outcome', async () => {
    const h = harness();
    const tokens = await h.redeem(await h.code());
    await h.refresh(tokens.body.refresh_token);
    await h.redeem('not-a-code');
    await h.token({ grant_type: 'password' });
    assert.deepEqual(h.tokenCalls, [
      { grant: 'authorization_code', outcome: 'issued' },
      { grant: 'refresh_token', outcome: 'issued' },
      { grant: 'authorization_code', outcome: 'refused' },
      { grant: 'other', outcome: 'refused' },
    ]);
  });

  it('never logs codes, tokens, verifiers or client secrets', async () => {
    const h = harness();
    const value = await h.code({ code_challenge: S256, code_challenge_method: 'S256' });
    const tokens = await h.redeem(value, { code_verifier: VERIFIER });
    await h.refresh(tokens.body.refresh_token);
    await h.redeem(value, { code_verifier: VERIFIER });
    const text = h.logs.text();
    for (const secret of [value, tokens.body.access_token, tokens.body.refresh_token, VERIFIER, CLIENT.clientSecret]) assert.ok(!text.includes(secret));
  });
});
