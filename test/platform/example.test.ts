import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import supertest from 'supertest';
import type { SessionData } from 'express-session';
import { boundedSessionStore, createPlatformApp, parsePort, PlatformConfigError, type PlatformEnv } from '../../examples/platform-app.js';
import { capturedLogger, listen, type Running } from './helpers.js';

const ENV: PlatformEnv = {
  PLATFORM_ACCESS_TOKEN: 'example-platform-token-91b2',
  OAUTH_CLIENT_ID: '0a1b2c3d4e5f60718293a4b5c6d7e8f9',
  OAUTH_CLIENT_SECRET: '9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0',
  MARKETPLACE_CALLBACK_URL: 'https://marketplace.test/oauth/callback',
  EVENTS_SECRET: 'events-secret-5c1d9e0f7a2b4c6d8e',
  SESSION_SECRET: 'session-secret-for-the-example-tests',
};
const eventsAuth = { 'X-Marketplace-Secret': ENV.EVENTS_SECRET! };
const auth = { Authorization: `Bearer ${ENV.PLATFORM_ACCESS_TOKEN}` };
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('example platform: configuration', () => {
  for (const [name, env, message] of [
    ['no PLATFORM_ACCESS_TOKEN', {}, /PLATFORM_ACCESS_TOKEN is required/],
    ['an empty PLATFORM_ACCESS_TOKEN', { PLATFORM_ACCESS_TOKEN: ' ' }, /PLATFORM_ACCESS_TOKEN is required/],
    ['part of the OAuth settings', { PLATFORM_ACCESS_TOKEN: 't', OAUTH_CLIENT_ID: 'id' }, /missing: OAUTH_CLIENT_SECRET, MARKETPLACE_CALLBACK_URL/],
  ] as const) {
    it(`refuses ${name}`, () => {
      assert.throws(() => createPlatformApp(env, { logger: false }), (error: unknown) => error instanceof PlatformConfigError && message.test(error.message));
    });
  }

  it('reads PORT with 4568 as the default', () => {
    assert.equal(parsePort(undefined), 4568);
    assert.equal(parsePort(''), 4568);
    assert.equal(parsePort('8080'), 8080);
    assert.throws(() => parsePort('http'), PlatformConfigError);
    assert.throws(() => parsePort('70000'), PlatformConfigError);
  });
});

describe('example platform over HTTP', () => {
  let running: Running;
  let logs: ReturnType<typeof capturedLogger>;
  let app: ReturnType<typeof createPlatformApp>;
  before(async () => {
    logs = capturedLogger();
    app = createPlatformApp(ENV, { logger: logs.logger });
    running = await listen(app);
  });
  after(() => running.close());
  const http = () => supertest.agent(running.url);

  it('requires the platform access token', async () => {
    assert.equal((await http().get('/v1/profiles/u-alice')).status, 401);
    assert.equal((await http().get('/v1/profiles/u-alice').set('Authorization', 'Bearer wrong')).status, 401);
  });

  it('serves the profiles of u-alice, u-bob and t-acme', async () => {
    const alice = await http().get('/v1/profiles/u-alice').set(auth).set('Content-Type', 'application/x-www-form-urlencoded').set('Accept-Encoding', 'gzip');
    assert.equal(alice.status, 200);
    assert.equal(alice.headers['content-encoding'], 'gzip');
    assert.deepEqual(alice.body, {
      id: 'u-alice',
      state: 'active',
      standing: 'good',
      is_email_verified: true,
      is_phone_verified: false,
      is_2fa_enabled: false,
      has_payment_method: true,
      has_first_payment: false,
      name: 'Alice',
      email: 'alice@example.com',
    });
    const bob = await http().get('/v1/profiles/u-bob').set(auth);
    assert.deepEqual(bob.body, {
      id: 'u-bob',
      state: 'active',
      is_email_verified: false,
      is_phone_verified: false,
      is_2fa_enabled: false,
      has_payment_method: false,
      has_first_payment: false,
      name: 'Bob',
      email: 'bob@example.com',
    });
    const team = await http().get('/v1/profiles/t-acme').set(auth);
    assert.equal(team.status, 200);
    assert.equal(team.body.id, 't-acme');
    assert.equal(team.body.state, 'active');
    assert.equal(team.body.has_payment_method, true, 'a team reports its owner’s billing facts');
    assert.equal(team.body.is_email_verified, true);
    assert.equal((await http().get('/v1/profiles/u-carol').set(auth)).status, 404);
  });

  it('lists the users of a resource by its owner', async () => {
    const team = await http().get('/v1/users?resource_id=2687m6q19x63bt5krx5jgvpaq8c4m&owner_id=t-acme').set(auth);
    assert.equal(team.status, 200);
    assert.deepEqual(team.body, {
      users: [
        { id: 'u-alice', role: 'owner', name: 'Alice', email: 'alice@example.com' },
        { id: 'u-bob', role: 'member', name: 'Bob', email: 'bob@example.com' },
      ],
    });
    const own = await http().get('/v1/users?resource_id=r1&owner_id=u-bob').set(auth);
    assert.deepEqual(own.body, { users: [{ id: 'u-bob', role: 'owner', name: 'Bob', email: 'bob@example.com' }] });
    assert.equal((await http().get('/v1/users?resource_id=r1&owner_id=t-nobody').set(auth)).status, 404);
    assert.equal((await http().get('/v1/users?owner_id=t-acme').set(auth)).status, 400);
  });

  const VERBS = ['CREATE', 'READ', 'UPDATE', 'CHANGE_PLAN', 'SSO', 'DELETE', 'READ_CREDENTIALS', 'READ_INVOICE'];
  const MEMBER = new Set(['READ', 'SSO', 'READ_CREDENTIALS']);
  const table: [string, string, string, boolean, boolean][] = [];
  for (const verb of VERBS) {
    for (const priced of [false, true]) {
      table.push(['u-alice', 't-acme', verb, priced, true]); // owner with a payment method
      table.push(['u-alice', 'u-alice', verb, priced, true]);
      table.push(['u-bob', 't-acme', verb, priced, MEMBER.has(verb) && !priced]); // member without payment method
      table.push(['u-bob', 'u-bob', verb, priced, !priced]); // owner of his own, but no payment method
      table.push(['u-alice', 'u-bob', verb, priced, false]); // no relation
      table.push(['u-carol', 't-acme', verb, priced, false]); // unknown actor
      table.push(['t-acme', 't-acme', verb, priced, false]); // a team is not an actor
      table.push(['u-alice', 't-nobody', verb, priced, false]); // unknown owner
    }
  }
  it(`applies the policy (${table.length} cases): owners everything, members READ/SSO/READ_CREDENTIALS, priced needs the actor’s payment method`, async () => {
    for (const [actor, owner, verb, priced, expected] of table) {
      const res = await http()
        .get(`/v1/resources/authorized?actor_id=${actor}&owner_id=${owner}&verb=${verb}&priced=${priced}&resource_ids=r-1|r-2`)
        .set(auth);
      assert.equal(res.status, 200);
      assert.deepEqual(
        res.body,
        { resources: [{ resource_id: 'r-1', authorized: expected }, { resource_id: 'r-2', authorized: expected }] },
        `${actor} ${verb} on ${owner}'s resources, priced=${priced}`,
      );
    }
  });

  it('receives webhook events on POST /v1/events and logs them', async () => {
    const res = await http()
      .post('/v1/events')
      .set(eventsAuth)
      .set('X-Marketplace-Event', 'resource:provisioned')
      .send({ event: 'resource:provisioned', version: 1, data: { resource_id: 'res-1', subject: 't-acme' } });
    assert.equal(res.status, 200);
    assert.equal((app.locals.resources as Map<string, string>).get('res-1'), 't-acme');
    assert.ok(logs.entries().some((entry) => entry.event === 'resource:provisioned' && entry.resource_id === 'res-1'));
    const gone = await http()
      .post(`/v1/events/${ENV.EVENTS_SECRET!}`)
      .set('X-Marketplace-Event', 'resource:deprovisioned')
      .send({ event: 'resource:deprovision', version: 1, data: { resource_id: 'res-1', subject: 't-acme' } });
    assert.equal(gone.status, 200);
    assert.equal((app.locals.resources as Map<string, string>).has('res-1'), false);
    const unknown = await http().post('/v1/events').set(eventsAuth).set('X-Marketplace-Event', 'resource:renamed').send({});
    assert.equal(unknown.status, 200);
  });

  it('refuses unauthenticated event deliveries: a forged event reassigns nothing', async () => {
    const forged = { event: 'resource:provisioned', version: 1, data: { resource_id: 'res-forged', subject: 'u-bob' } };
    const none = await http().post('/v1/events').set('X-Marketplace-Event', 'resource:provisioned').send(forged);
    assert.equal(none.status, 401);
    const wrong = await http().post('/v1/events').set({ 'X-Marketplace-Secret': 'guessed-secret-0000000000' }).set('X-Marketplace-Event', 'resource:provisioned').send(forged);
    assert.equal(wrong.status, 401);
    assert.equal((await http().post('/v1/events/guessed-secret-0000000000').set('X-Marketplace-Event', 'resource:provisioned').send(forged)).status, 401);
    assert.equal((app.locals.resources as Map<string, string>).has('res-forged'), false);
  });

  it('answers 404 for ids on the prototype chain (constructor, __proto__, toString)', async () => {
    for (const id of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const res = await http().get(`/v1/profiles/${id}`).set(auth);
      assert.equal(res.status, 404, id);
      assert.ok(typeof res.body.message === 'string', id);
      const users = await http().get('/v1/users').query({ resource_id: 'r1', owner_id: id }).set(auth);
      assert.equal(users.status, 404, `users of ${id}`);
    }
    const authorized = await http().get('/v1/resources/authorized').query({ actor_id: 'constructor', owner_id: 'constructor', verb: 'READ', priced: 'false', resource_ids: 'r-1' }).set(auth);
    assert.equal(authorized.status, 200);
    assert.deepEqual(authorized.body, { resources: [{ resource_id: 'r-1', authorized: false }] });
  });

  it('signs a user in with GET /login?as=<user id>', async () => {
    const agent = http();
    const res = await agent.get('/login?as=u-bob');
    assert.equal(res.status, 200);
    assert.equal(res.body.user.id, 'u-bob');
    assert.match(String(res.headers['set-cookie']), /platform\.sid=.*HttpOnly/i);
    assert.equal((await http().get('/login')).status, 400);
    assert.equal((await http().get('/login?as=u-carol')).status, 404);
    assert.equal((await http().get('/login?as=t-acme')).status, 404, 'a team cannot sign in');
    const back = await http().get('/login?as=u-alice&return_to=%2Foauth%2Flogin%3Fstate%3Dx').redirects(0);
    assert.equal(back.status, 303);
    assert.equal(back.headers.location, '/oauth/login?state=x');
    for (const target of ['//evil.example/x', 'https://evil.example/', '/\\evil.example']) {
      const offsite = await http().get(`/login?as=u-alice&return_to=${encodeURIComponent(target)}`).redirects(0);
      assert.equal(offsite.status, 200, target);
      assert.equal(offsite.headers.location, undefined);
    }
  });

  it('runs the deprecated OAuth flow for the signed-in user, without secrets in the logs', async () => {
    const agent = http();
    const query = new URLSearchParams({
      access_type: 'online',
      client_id: ENV.OAUTH_CLIENT_ID!,
      redirect_uri: ENV.MARKETPLACE_CALLBACK_URL!,
      response_type: 'code',
      state: 'st-1',
    });
    const anonymous = await agent.get(`/oauth/login?${query}`).redirects(0);
    assert.equal(anonymous.status, 401);
    const login = await agent.get('/login?as=u-alice');
    const cookie = /platform\.sid=([^;]+)/.exec(String(login.headers['set-cookie']))?.[1] ?? '';
    const authorize = await agent.get(`/oauth/login?${query}`).redirects(0);
    assert.equal(authorize.status, 302);
    const location = new URL(authorize.headers.location ?? '');
    assert.equal(`${location.origin}${location.pathname}`, ENV.MARKETPLACE_CALLBACK_URL);
    assert.equal(location.searchParams.get('state'), 'st-1');
    const code = location.searchParams.get('code') ?? '';

    const evil = await agent.get(`/oauth/login?${query.toString().replace(encodeURIComponent(ENV.MARKETPLACE_CALLBACK_URL!), encodeURIComponent('https://evil.example/cb'))}`).redirects(0);
    assert.equal(evil.status, 400);
    assert.equal(evil.headers.location, undefined);

    const token = await supertest(running.url)
      .post('/oauth/token')
      .type('form')
      .auth(ENV.OAUTH_CLIENT_ID!, ENV.OAUTH_CLIENT_SECRET!)
      .send({ grant_type: 'authorization_code', code, redirect_uri: ENV.MARKETPLACE_CALLBACK_URL! });
    assert.equal(token.status, 200);
    assert.equal(token.headers['content-type'], 'application/json;charset=UTF-8');
    const info = await supertest(running.url).get('/oauth/userinfo').set('Authorization', `Bearer ${token.body.access_token}`);
    assert.deepEqual(info.body, { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' });

    const text = logs.text();
    for (const secret of [code, token.body.access_token, token.body.refresh_token, ENV.OAUTH_CLIENT_SECRET!, ENV.PLATFORM_ACCESS_TOKEN!, cookie]) {
      assert.ok(secret.length > 0 && !text.includes(secret), 'a secret reached the log');
    }
  });

  it('answers JSON 404 elsewhere', async () => {
    const res = await http().get('/nowhere');
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { message: 'Not found' });
  });
});

describe('example platform: sessions and secrets', () => {
  it('warns when SESSION_SECRET is generated and turns the events receiver off without EVENTS_SECRET', async () => {
    const logs = capturedLogger();
    const running = await listen(createPlatformApp({ PLATFORM_ACCESS_TOKEN: 't' }, { logger: logs.logger }));
    try {
      assert.match(logs.text(), /SESSION_SECRET is not set/);
      assert.match(logs.text(), /EVENTS_SECRET is not set/);
      const res = await supertest(running.url).post('/v1/events').set('X-Marketplace-Event', 'resource:provisioned').send({ version: 1, data: { resource_id: 'r', subject: 'u-bob' } });
      assert.equal(res.status, 404);
    } finally {
      await running.close();
    }
  });

  it('keeps sessions bounded (refusing new ones when full) and expiring', async () => {
    let at = 1_000_000;
    const store = boundedSessionStore({ maxSessions: 2, ttlMs: 1000, now: () => at });
    const data = (expires: number) => ({ cookie: { expires: new Date(expires), originalMaxAge: 1000 } }) as unknown as SessionData;
    const set = (sid: string) => new Promise<unknown>((resolve) => store.set(sid, data(at + 1000), resolve));
    const get = (sid: string) => new Promise<unknown>((resolve) => store.get(sid, (_error, value) => resolve(value)));
    assert.equal(await set('a'), undefined);
    assert.equal(await set('b'), undefined);
    assert.match(String(await set('c')), /Too many sessions/);
    assert.ok((await get('a')) !== null, 'the existing sessions stay');
    at += 1000;
    assert.equal(await get('a'), null, 'expired');
    assert.equal(await set('c'), undefined, 'expired ones make room');
    assert.equal(await set('d'), undefined, 'expired ones make room');
    assert.equal(await get('b'), null);
    assert.equal(store.size, 2);
  });
});

describe('example platform without the OAuth settings', () => {
  it('does not serve the deprecated flow', async () => {
    const running = await listen(createPlatformApp({ PLATFORM_ACCESS_TOKEN: 't' }, { logger: false }));
    try {
      assert.equal((await supertest(running.url).get('/oauth/login?client_id=x')).status, 404);
      assert.equal((await supertest(running.url).get('/v1/profiles/u-alice').set('Authorization', 'Bearer t')).status, 200);
    } finally {
      await running.close();
    }
  });
});

describe('examples/platform.ts as a process', () => {
  function start(env: Record<string, string | undefined>) {
    const base = { ...process.env };
    delete base.PLATFORM_ACCESS_TOKEN;
    delete base.PORT;
    return spawn(process.execPath, ['--import', 'tsx', 'examples/platform.ts'], {
      cwd: root,
      env: { ...base, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  it('exits non-zero with a clear message when PLATFORM_ACCESS_TOKEN is missing', async () => {
    const child = start({});
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.notEqual(code, 0);
    assert.match(stderr, /PLATFORM_ACCESS_TOKEN is required/);
  });

  it('listens on 127.0.0.1:$PORT and stops on SIGTERM', async () => {
    const child = start({ PLATFORM_ACCESS_TOKEN: 'process-token', PORT: '0' });
    try {
      let stdout = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
          if (match?.[1] !== undefined) resolve(match[1]);
        });
        child.once('exit', (code) => reject(new Error(`exited early with ${code}`)));
      });
      const res = await fetch(`${url}/v1/profiles/u-alice`, { headers: { Authorization: 'Bearer process-token' } });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { id: string }).id, 'u-alice');
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});

describe('example platform: operator endpoints', () => {
  let running: Running;
  before(async () => {
    running = await listen(createPlatformApp(ENV, { logger: false }));
  });
  after(() => running.close());

  it('serves /metrics with what it answered, and /healthz and /livez without a token', async () => {
    const http = supertest(running.url);
    assert.equal((await http.get('/v1/profiles/u-alice').set(auth)).status, 200);
    assert.equal((await http.get('/v1/profiles/u-alice')).status, 401);
    assert.equal((await http.post('/v1/events').set(eventsAuth).set('X-Marketplace-Event', 'resource:provisioned').send({ event: 'resource:provisioned', version: 1, data: { resource_id: 'r-1', subject: 'u-alice' } })).status < 300, true);
    assert.equal((await http.post('/v1/events').set('X-Marketplace-Event', 'resource:provisioned').send({ event: 'resource:provisioned', version: 1, data: { resource_id: 'r-2', subject: 'u-bob' } })).status, 401);

    const scrape = await http.get('/metrics');
    assert.equal(scrape.status, 200);
    assert.match(String(scrape.headers['content-type']), /^text\/plain/);
    const text = scrape.text;
    assert.match(text, /marketplace_platform_requests_total\{route="\/v1\/profiles\/:id",status="200"\} 1\b/);
    assert.match(text, /marketplace_platform_requests_total\{route="\/v1\/profiles\/:id",status="401"\} 1\b/);
    assert.match(text, /marketplace_events_total\{type="resource:provisioned",outcome="processed"\} 1\b/);
    assert.match(text, /marketplace_events_total\{type="[^"]*",outcome="refused"\} 1\b/);
    // Ids never become label values.
    assert.doesNotMatch(text, /u-alice|r-1/);

    assert.equal((await http.get('/healthz')).status, 200);
    assert.equal((await http.get('/livez')).status, 200);
  });
});
