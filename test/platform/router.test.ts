import type * as nodeCrypto from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { after, before, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import express from 'express';
import supertest from 'supertest';
import { InvalidOptionsError, NotFoundError } from '../../src/errors.js';
import {
  platformRouter,
  type AuthorizationDecision,
  type AuthorizationQuery,
  type PlatformRouterOptions,
  type UsersQuery,
} from '../../src/platform/index.js';
import { acceptsGzip } from '../../src/platform/http.js';
import { capturedLogger, listen, type Running } from './helpers.js';

const TOKEN = 'current-platform-token-7f1c2a9e4b';
const OLD_TOKEN = 'previous-platform-token-0d3e';

const PROFILES: Record<string, unknown> = {
  'u-1': {
    id: 'u-1',
    state: 'active',
    country: 'DE',
    is_email_verified: true,
    standing: 'good',
    has_payment_method: true,
    name: 'Ada',
    email: 'ada@example.com',
    password_hash: 'must-not-leak',
  },
  'u-min': { id: 'u-min', state: 'suspended' },
};

interface Harness {
  running: Running;
  http: () => supertest.Agent;
  logs: ReturnType<typeof capturedLogger>;
  usersCalls: UsersQuery[];
  authorizeCalls: AuthorizationQuery[];
  close(): Promise<void>;
}

async function start(overrides: Partial<PlatformRouterOptions> = {}): Promise<Harness> {
  const logs = capturedLogger();
  const usersCalls: UsersQuery[] = [];
  const authorizeCalls: AuthorizationQuery[] = [];
  const app = express();
  app.use(
    platformRouter({
      accessTokens: [TOKEN, OLD_TOKEN],
      getProfile: async (id) => (PROFILES[id] ?? null) as never,
      listUsers: async (query) => {
        usersCalls.push(query);
        return [{ id: 'u-1', role: 'owner', name: 'Ada', email: 'ada@example.com' }];
      },
      authorize: async (query) => {
        authorizeCalls.push(query);
        return Object.fromEntries(query.resource_ids.map((id) => [id, !id.startsWith('deny')]));
      },
      logger: logs.logger,
      ...overrides,
    }),
  );
  app.use((_req, res) => {
    res.status(404).json({ message: 'host fallthrough' });
  });
  const running = await listen(app);
  return { running, http: () => supertest.agent(running.url), logs, usersCalls, authorizeCalls, close: () => running.close() };
}

const auth = { Authorization: `Bearer ${TOKEN}` };
const AUTHZ = '/v1/resources/authorized?actor_id=u-1&owner_id=t-1&verb=READ&priced=false';

describe('platformRouter: bearer token', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  const routes = ['/v1/profiles/u-1', '/v1/users?resource_id=r1&owner_id=u-1', `${AUTHZ}&resource_ids=r1`];
  const refused: [string, Record<string, string>][] = [
    ['no Authorization header', {}],
    ['another scheme', { Authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` }],
    ['the scheme alone', { Authorization: 'Bearer' }],
    ['an unknown token', { Authorization: 'Bearer not-the-token' }],
    ['a prefix of the token', { Authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ['the token with a suffix', { Authorization: `Bearer ${TOKEN}x` }],
    ['the token in another case', { Authorization: `Bearer ${TOKEN.toUpperCase()}` }],
    ['two tokens', { Authorization: `Bearer ${TOKEN} ${OLD_TOKEN}` }],
  ];
  for (const route of routes) {
    for (const [name, headers] of refused) {
      it(`refuses ${name} on ${route.split('?')[0]} with 401 JSON`, async () => {
        const res = await h.http().get(route).set(headers);
        assert.equal(res.status, 401);
        assert.match(res.headers['content-type'] ?? '', /^application\/json/);
        assert.deepEqual(res.body, { message: 'Missing or invalid bearer token' });
        assert.match(res.headers['www-authenticate'] ?? '', /^Bearer/);
      });
    }
  }

  it('accepts every token of the rotation list, with any case of the scheme', async () => {
    for (const header of [`Bearer ${TOKEN}`, `Bearer ${OLD_TOKEN}`, `bearer ${TOKEN}`, `BEARER  ${OLD_TOKEN}`]) {
      const res = await h.http().get('/v1/profiles/u-1').set('Authorization', header);
      assert.equal(res.status, 200, header);
    }
  });

  it('accepts a single token given as a string', async () => {
    const single = await start({ accessTokens: 'only-token' });
    try {
      assert.equal((await single.http().get('/v1/profiles/u-1').set('Authorization', 'Bearer only-token')).status, 200);
      assert.equal((await single.http().get('/v1/profiles/u-1').set(auth)).status, 401);
    } finally {
      await single.close();
    }
  });

  it('compares with crypto.timingSafeEqual against every accepted token, with no early exit', async () => {
    const cryptoModule = createRequire(import.meta.url)('node:crypto') as typeof nodeCrypto;
    const spy = mock.method(cryptoModule, 'timingSafeEqual');
    syncBuiltinESMExports();
    try {
      await h.http().get('/v1/profiles/u-1').set(auth);
      assert.equal(spy.mock.callCount(), 2, 'the first token matched, the second was still compared');
      for (const call of spy.mock.calls) {
        const [a, b] = call.arguments as [Buffer, Buffer];
        assert.equal(a.length, 32);
        assert.equal(b.length, 32);
      }
      spy.mock.resetCalls();
      await h.http().get('/v1/profiles/u-1').set('Authorization', 'Bearer x');
      assert.equal(spy.mock.callCount(), 2, 'a short wrong token costs the same comparisons');
    } finally {
      spy.mock.restore();
      syncBuiltinESMExports();
    }
  });

  it('leaves other paths to the host app, without asking for a token', async () => {
    const res = await h.http().get('/somewhere-else');
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { message: 'host fallthrough' });
  });

  it('never logs the presented or the configured tokens', async () => {
    await h.http().get('/v1/profiles/u-1').set('Authorization', 'Bearer wrong-token-value-123');
    await h.http().get('/v1/profiles/u-1').set(auth);
    const text = h.logs.text();
    assert.ok(text.includes('missing or unknown bearer token'), 'the refusal is logged');
    for (const secret of [TOKEN, OLD_TOKEN, 'wrong-token-value-123']) assert.ok(!text.includes(secret), `log contains ${secret}`);
  });
});

describe('platformRouter: GET /v1/profiles/:id', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  it('answers the section 2.1 profile, dropping fields the interface does not list', async () => {
    const res = await h.http().get('/v1/profiles/u-1').set(auth).set('Content-Type', 'application/x-www-form-urlencoded');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      id: 'u-1',
      state: 'active',
      country: 'DE',
      is_email_verified: true,
      is_phone_verified: false,
      is_2fa_enabled: false,
      standing: 'good',
      has_payment_method: true,
      has_first_payment: false,
      name: 'Ada',
      email: 'ada@example.com',
    });
  });

  it('defaults every boolean to false and leaves absent optional fields out', async () => {
    const res = await h.http().get('/v1/profiles/u-min').set(auth);
    assert.deepEqual(res.body, {
      id: 'u-min',
      state: 'suspended',
      is_email_verified: false,
      is_phone_verified: false,
      is_2fa_enabled: false,
      has_payment_method: false,
      has_first_payment: false,
    });
  });

  it('answers 404 JSON for an unknown profile', async () => {
    const res = await h.http().get('/v1/profiles/nobody').set(auth);
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { message: 'Profile not found' });
  });

  it('passes a percent-encoded id decoded', async () => {
    const seen: string[] = [];
    const local = await start({ getProfile: (id) => (seen.push(id), { id, state: 'active' }) });
    try {
      const res = await local.http().get('/v1/profiles/team%3Aacme').set(auth);
      assert.equal(res.status, 200);
      assert.deepEqual(seen, ['team:acme']);
    } finally {
      await local.close();
    }
  });

  it('refuses an id longer than the limit with 400', async () => {
    const res = await h.http().get(`/v1/profiles/${'a'.repeat(257)}`).set(auth);
    assert.equal(res.status, 400);
    assert.match(res.body.message, /longer than 256/);
  });
});

describe('platformRouter: invalid handler output is the platform bug (500, field logged)', () => {
  const cases: [string, unknown, string][] = [
    ['no id', { state: 'active' }, 'id'],
    ['an empty id', { id: '', state: 'active' }, 'id'],
    ['no state', { id: 'p' }, 'state'],
    ['an unknown state', { id: 'p', state: 'frozen' }, 'state'],
    ['a lower-case country', { id: 'p', state: 'active', country: 'de' }, 'country'],
    ['a user-assigned country (XK)', { id: 'p', state: 'active', country: 'XK' }, 'country'],
    ['a three-letter country', { id: 'p', state: 'active', country: 'DEU' }, 'country'],
    ['a numeric country', { id: 'p', state: 'active', country: 276 }, 'country'],
    ['an unknown standing', { id: 'p', state: 'active', standing: 'excellent' }, 'standing'],
    ['a string boolean', { id: 'p', state: 'active', is_email_verified: 'true' }, 'is_email_verified'],
    ['a numeric boolean', { id: 'p', state: 'active', has_payment_method: 1 }, 'has_payment_method'],
    ['a non-string name', { id: 'p', state: 'active', name: 42 }, 'name'],
    ['a non-string email', { id: 'p', state: 'active', email: ['a@b.c'] }, 'email'],
    ['an array', [], '(profile)'],
    ['a string', 'active', '(profile)'],
  ];
  for (const [name, output, field] of cases) {
    it(`getProfile returning ${name} → 500 naming "${field}"`, async () => {
      const h = await start({ getProfile: () => output as never });
      try {
        const res = await h.http().get('/v1/profiles/p').set(auth);
        assert.equal(res.status, 500);
        assert.deepEqual(res.body, { message: 'Internal error' });
        const line = h.logs.entries().find((entry) => entry.handler === 'getProfile');
        assert.ok(line, 'a log line names the handler');
        assert.equal(line.field, field);
        assert.equal(line.level, 50);
      } finally {
        await h.close();
      }
    });
  }

  it('accepts null for optional fields and every assigned country', async () => {
    const h = await start({ getProfile: (id) => ({ id, state: 'deleted', country: null, standing: null, name: null, is_2fa_enabled: null }) });
    try {
      const res = await h.http().get('/v1/profiles/p').set(auth);
      assert.equal(res.status, 200);
      assert.equal('country' in res.body, false);
      assert.equal(res.body.is_2fa_enabled, false);
    } finally {
      await h.close();
    }
  });

  const userCases: [string, unknown, string][] = [
    ['not an array', { users: [] }, '(users)'],
    ['an entry without id', [{ role: 'owner' }], 'users[0].id'],
    ['an entry without role', [{ id: 'u' }], 'users[0].role'],
    ['a non-string name', [{ id: 'u', role: 'owner' }, { id: 'v', role: 'member', name: 1 }], 'users[1].name'],
    ['a null entry', [null], 'users[0]'],
  ];
  for (const [name, output, field] of userCases) {
    it(`listUsers returning ${name} → 500 naming "${field}"`, async () => {
      const h = await start({ listUsers: () => output as never });
      try {
        const res = await h.http().get('/v1/users?resource_id=r&owner_id=o').set(auth);
        assert.equal(res.status, 500);
        assert.deepEqual(res.body, { message: 'Internal error' });
        assert.equal(h.logs.entries().find((entry) => entry.handler === 'listUsers')?.field, field);
      } finally {
        await h.close();
      }
    });
  }
});

describe('platformRouter: handler failures', () => {
  it('answers 500 {"message":"Internal error"} without detail and logs the error', async () => {
    const h = await start({
      getProfile: () => {
        throw new Error('database password=hunter2 rejected');
      },
    });
    try {
      const res = await h.http().get('/v1/profiles/u-1').set(auth);
      assert.equal(res.status, 500);
      assert.deepEqual(res.body, { message: 'Internal error' });
      assert.ok(!res.text.includes('hunter2'));
      assert.ok(h.logs.text().includes('the platform handler failed'));
    } finally {
      await h.close();
    }
  });

  it('answers a rejected promise the same way', async () => {
    const h = await start({ authorize: () => Promise.reject(new TypeError('boom')) });
    try {
      const res = await h.http().get(`${AUTHZ}&resource_ids=r1`).set(auth);
      assert.equal(res.status, 500);
      assert.deepEqual(res.body, { message: 'Internal error' });
    } finally {
      await h.close();
    }
  });

  it('answers a 4xx MarketplaceError the handler throws with its own status and message', async () => {
    const h = await start({
      listUsers: () => {
        throw new NotFoundError('Unknown resource');
      },
    });
    try {
      const res = await h.http().get('/v1/users?resource_id=r&owner_id=o').set(auth);
      assert.equal(res.status, 404);
      assert.deepEqual(res.body, { message: 'Unknown resource' });
    } finally {
      await h.close();
    }
  });
});

describe('platformRouter: GET /v1/users', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  it('answers {users} and passes the parsed query', async () => {
    const res = await h
      .http()
      .get('/v1/users?resource_id=r1&owner_id=t-1&annotations=env%3Dprod|team%3Dweb')
      .set(auth)
      .set('Content-Type', 'application/x-www-form-urlencoded');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { users: [{ id: 'u-1', role: 'owner', name: 'Ada', email: 'ada@example.com' }] });
    assert.deepEqual(h.usersCalls.at(-1), { resource_id: 'r1', owner_id: 't-1', annotations: ['env=prod', 'team=web'] });
  });

  it('passes no annotations as an empty list', async () => {
    await h.http().get('/v1/users?resource_id=r1&owner_id=t-1&annotations=').set(auth);
    assert.deepEqual(h.usersCalls.at(-1)?.annotations, []);
  });

  const bad: [string, string, RegExp][] = [
    ['no resource_id', 'owner_id=o', /resource_id is required/],
    ['an empty resource_id', 'resource_id=&owner_id=o', /resource_id is required/],
    ['no owner_id', 'resource_id=r', /owner_id is required/],
    ['a repeated resource_id', 'resource_id=r&resource_id=s&owner_id=o', /resource_id must be given once/],
    ['a too long owner_id', `resource_id=r&owner_id=${'o'.repeat(257)}`, /owner_id is longer than 256/],
    ['an empty annotation', 'resource_id=r&owner_id=o&annotations=a||b', /annotations has an empty entry/],
    ['a trailing pipe', 'resource_id=r&owner_id=o&annotations=a|', /annotations has an empty entry/],
    ['too many annotations', `resource_id=r&owner_id=o&annotations=${Array.from({ length: 51 }, (_, i) => `a${i}`).join('|')}`, /more than 50/],
    ['a too long annotation', `resource_id=r&owner_id=o&annotations=${'a'.repeat(257)}`, /longer than 256/],
  ];
  for (const [name, query, message] of bad) {
    it(`refuses ${name} with 400 JSON`, async () => {
      const before = h.usersCalls.length;
      const res = await h.http().get(`/v1/users?${query}`).set(auth);
      assert.equal(res.status, 400);
      assert.match(res.body.message, message);
      assert.equal(h.usersCalls.length, before, 'the handler is not called');
    });
  }
});

describe('platformRouter: GET /v1/resources/authorized', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  it('answers one entry per requested resource id, in request order', async () => {
    const res = await h.http().get(`${AUTHZ}&resource_ids=r1|deny-2|r3`).set(auth).set('Content-Type', 'application/x-www-form-urlencoded');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      resources: [
        { resource_id: 'r1', authorized: true },
        { resource_id: 'deny-2', authorized: false },
        { resource_id: 'r3', authorized: true },
      ],
    });
  });

  it('passes the parsed query: verb, priced as a boolean, split lists', async () => {
    await h.http().get('/v1/resources/authorized?actor_id=a&owner_id=o&verb=CHANGE_PLAN&priced=true&resource_ids=r1|r2&annotations=x|y').set(auth);
    assert.deepEqual(h.authorizeCalls.at(-1), {
      actor_id: 'a',
      owner_id: 'o',
      verb: 'CHANGE_PLAN',
      priced: true,
      resource_ids: ['r1', 'r2'],
      annotations: ['x', 'y'],
    });
  });

  it('answers a repeated resource id once', async () => {
    const res = await h.http().get(`${AUTHZ}&resource_ids=r1|r1|r2`).set(auth);
    assert.deepEqual(res.body.resources.map((entry: { resource_id: string }) => entry.resource_id), ['r1', 'r2']);
  });

  it('answers {resources: []} without asking the platform when no resource id is given', async () => {
    const before = h.authorizeCalls.length;
    for (const query of [AUTHZ, `${AUTHZ}&resource_ids=`]) {
      const res = await h.http().get(query).set(auth);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { resources: [] });
    }
    assert.equal(h.authorizeCalls.length, before);
  });

  it('accepts every verb of the interface', async () => {
    for (const verb of ['CREATE', 'READ', 'UPDATE', 'CHANGE_PLAN', 'SSO', 'DELETE', 'READ_CREDENTIALS', 'READ_INVOICE']) {
      const res = await h.http().get(`/v1/resources/authorized?actor_id=a&owner_id=o&verb=${verb}&priced=false&resource_ids=r`).set(auth);
      assert.equal(res.status, 200, verb);
    }
  });

  const base = { actor_id: 'a', owner_id: 'o', verb: 'READ', priced: 'false', resource_ids: 'r1' };
  const without = (name: keyof typeof base) => new URLSearchParams(Object.entries(base).filter(([key]) => key !== name)).toString();
  const withValue = (name: keyof typeof base, value: string) => new URLSearchParams({ ...base, [name]: value }).toString().replace(/%7C/g, '|');
  const bad: [string, string, RegExp][] = [
    ['no actor_id', without('actor_id'), /actor_id is required/],
    ['no owner_id', without('owner_id'), /owner_id is required/],
    ['no verb', without('verb'), /verb is required/],
    ['no priced', without('priced'), /priced is required/],
    ['an empty actor_id', withValue('actor_id', ''), /actor_id is required/],
    ['a lower-case verb', withValue('verb', 'read'), /verb must be one of CREATE, READ/],
    ['an unknown verb', withValue('verb', 'ADMIN'), /verb must be one of/],
    ['priced=TRUE', withValue('priced', 'TRUE'), /priced must be true or false/],
    ['priced=1', withValue('priced', '1'), /priced must be true or false/],
    ['priced=yes', withValue('priced', 'yes'), /priced must be true or false/],
    ['an empty priced', withValue('priced', ''), /priced is required/],
    ['a repeated verb', `${new URLSearchParams(base).toString()}&verb=READ`, /verb must be given once/],
    ['a repeated priced', `${new URLSearchParams(base).toString()}&priced=true`, /priced must be given once/],
    ['an empty resource id', withValue('resource_ids', 'r1||r2'), /resource_ids has an empty entry/],
    ['a leading pipe', withValue('resource_ids', '|r1'), /resource_ids has an empty entry/],
    ['a trailing pipe', withValue('resource_ids', 'r1|'), /resource_ids has an empty entry/],
    ['101 resource ids', withValue('resource_ids', Array.from({ length: 101 }, (_, i) => `r${i}`).join('|')), /more than 100 entries/],
    ['a too long resource id', withValue('resource_ids', 'r'.repeat(257)), /resource_ids is longer than 256/],
    ['an empty annotation', `${new URLSearchParams(base).toString()}&annotations=|`, /annotations has an empty entry/],
  ];
  for (const [name, query, message] of bad) {
    it(`refuses ${name} with 400 JSON`, async () => {
      const before = h.authorizeCalls.length;
      const res = await h.http().get(`/v1/resources/authorized?${query}`).set(auth);
      assert.equal(res.status, 400);
      assert.match(res.headers['content-type'] ?? '', /^application\/json/);
      assert.match(res.body.message, message);
      assert.equal(h.authorizeCalls.length, before, 'the handler is not called');
    });
  }

  it('honours configured limits', async () => {
    const local = await start({ limits: { maxResourceIds: 2, maxAnnotations: 1, maxValueLength: 5 } });
    try {
      assert.equal((await local.http().get(`${AUTHZ}&resource_ids=a|b`).set(auth)).status, 200);
      assert.equal((await local.http().get(`${AUTHZ}&resource_ids=a|b|c`).set(auth)).status, 400);
      assert.equal((await local.http().get(`${AUTHZ}&resource_ids=a&annotations=x|y`).set(auth)).status, 400);
      assert.equal((await local.http().get(`${AUTHZ}&resource_ids=abcdef`).set(auth)).status, 400);
    } finally {
      await local.close();
    }
  });
});

describe('platformRouter: forms of the authorization decision', () => {
  const ids = 'r1|r2|constructor';
  async function answer(decision: unknown) {
    const h = await start({ authorize: () => decision as AuthorizationDecision });
    try {
      const res = await h.http().get(`${AUTHZ}&resource_ids=${ids}`).set(auth);
      return { status: res.status, body: res.body, logs: h.logs.text() };
    } finally {
      await h.close();
    }
  }
  const entries = (r1: boolean, r2: boolean, ctor: boolean) => ({
    resources: [
      { resource_id: 'r1', authorized: r1 },
      { resource_id: 'r2', authorized: r2 },
      { resource_id: 'constructor', authorized: ctor },
    ],
  });

  it('a boolean covers every requested id', async () => {
    assert.deepEqual((await answer(true)).body, entries(true, true, true));
    assert.deepEqual((await answer(false)).body, entries(false, false, false));
  });

  it('a record: missing ids are denied (and logged), prototype names are not looked up', async () => {
    const result = await answer({ r1: true });
    assert.equal(result.status, 200);
    assert.deepEqual(result.body, entries(true, false, false));
    assert.match(result.logs, /gave no answer for some requested resource ids/);
  });

  it('a Map', async () => {
    assert.deepEqual((await answer(new Map([['r2', true], ['constructor', true]]))).body, entries(false, true, true));
  });

  it('an array of entries; ids that were not requested are dropped', async () => {
    const result = await answer([
      { resource_id: 'r1', authorized: true },
      { resource_id: 'r2', authorized: false },
      { resource_id: 'constructor', authorized: true },
      { resource_id: 'not-asked', authorized: true },
    ]);
    assert.deepEqual(result.body, entries(true, false, true));
    assert.match(result.logs, /not requested/);
  });

  for (const [name, decision] of [
    ['a non-boolean value', { r1: 'yes' }],
    ['contradicting array entries', [{ resource_id: 'r1', authorized: true }, { resource_id: 'r1', authorized: false }]],
    ['an entry without resource_id', [{ authorized: true }]],
    ['a number', 1],
    ['null', null],
  ] as const) {
    it(`${name} → 500`, async () => {
      const result = await answer(decision);
      assert.equal(result.status, 500);
      assert.deepEqual(result.body, { message: 'Internal error' });
      assert.match(result.logs, /authorize returned an invalid authorization decision/);
    });
  }
});

describe('platformRouter: gzip', () => {
  let h: Harness;
  before(async () => {
    h = await start();
  });
  after(() => h.close());

  function raw(path: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${h.running.url}${path}`, { headers: { ...auth, ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  for (const path of ['/v1/profiles/u-1', '/v1/users?resource_id=r&owner_id=o', `${AUTHZ}&resource_ids=r1`, '/v1/profiles/nobody']) {
    it(`compresses ${path.split('?')[0]} when Accept-Encoding asks for gzip`, async () => {
      const res = await raw(path, { 'Accept-Encoding': 'gzip', 'Content-Type': 'application/x-www-form-urlencoded' });
      assert.equal(res.headers['content-encoding'], 'gzip');
      assert.match(String(res.headers.vary), /Accept-Encoding/);
      const body = JSON.parse(gunzipSync(res.body).toString('utf8')) as Record<string, unknown>;
      assert.equal(typeof body, 'object');
      assert.equal(Number(res.headers['content-length']), res.body.length);
    });
  }

  it('sends identity without Accept-Encoding, or when gzip is refused', async () => {
    for (const headers of [{}, { 'Accept-Encoding': 'gzip;q=0, identity' }, { 'Accept-Encoding': 'br' }] as Record<string, string>[]) {
      const res = await raw('/v1/profiles/u-1', headers);
      assert.equal(res.headers['content-encoding'], undefined);
      assert.equal((JSON.parse(res.body.toString('utf8')) as { id: string }).id, 'u-1');
    }
  });

  it('reads Accept-Encoding as RFC 9110 says', () => {
    const table: [string | undefined, boolean][] = [
      [undefined, false],
      ['', false],
      ['gzip', true],
      ['GZIP', true],
      ['deflate, gzip', true],
      ['gzip;q=0.5', true],
      ['gzip; q=0', false],
      ['gzip;q=0.000', false],
      ['*', true],
      ['*;q=0', false],
      ['*, gzip;q=0', false],
      ['identity', false],
      ['x-gzip', true],
      ['br;q=1, *;q=0.1', true],
    ];
    for (const [header, expected] of table) assert.equal(acceptsGzip(header), expected, String(header));
  });
});

describe('platformRouter: options are checked at construction', () => {
  const valid: PlatformRouterOptions = { accessTokens: 't', getProfile: () => null, listUsers: () => [], authorize: () => false };
  const cases: [string, unknown, RegExp][] = [
    ['no options', undefined, /expected one options object/],
    ['no accessTokens', { ...valid, accessTokens: undefined }, /"accessTokens" is required/],
    ['an empty token list', { ...valid, accessTokens: [] }, /"accessTokens" is required/],
    ['an empty token', { ...valid, accessTokens: ['t', ''] }, /"accessTokens" is required/],
    ['a misspelled option', { ...valid, accessToken: 't' }, /unknown option "accessToken" \(did you mean "accessTokens"\?\)/],
    ['no getProfile', { ...valid, getProfile: undefined }, /"getProfile" is required and must be a function/],
    ['a non-function listUsers', { ...valid, listUsers: [] }, /"listUsers" is required/],
    ['no authorize', { ...valid, authorize: undefined }, /"authorize" is required/],
    ['a zero limit', { ...valid, limits: { maxResourceIds: 0 } }, /limits.maxResourceIds" must be an integer/],
    ['an unknown limit', { ...valid, limits: { maxIds: 3 } }, /unknown option "maxIds"/],
    ['a logger that is not pino', { ...valid, logger: console }, /"logger" must be a pino logger/],
  ];
  for (const [name, options, message] of cases) {
    it(`throws InvalidOptionsError for ${name}`, () => {
      assert.throws(() => platformRouter(options as PlatformRouterOptions), (error: unknown) => {
        assert.ok(error instanceof InvalidOptionsError);
        assert.ok(error instanceof TypeError);
        assert.match(error.message, message);
        return true;
      });
    });
  }
});
