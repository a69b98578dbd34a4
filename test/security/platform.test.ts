import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import express from 'express';
import fc from 'fast-check';
import { deprecatedOAuthRouter, marketplaceEvents, platformRouter, VERBS, type AuthorizationQuery, type UsersQuery } from '../../src/platform/index.js';
import { listen, type Running } from '../helpers/http.js';
import { assertJsonRejection, assertNo5xx, assertNoPollution, fieldValue, jsonText, objectText, recordRejections, runs, sendRaw, tally, type RawAnswer } from './helpers.js';

// The platform side: bearer-token endpoints whose query parameters are parsed here, the unsigned
// webhook receiver, and the deprecated OAuth endpoints. No input may yield a 5xx, a handler call
// without the token (or the verify hook's consent), or a redirect anywhere but the registered address.

const rejections = recordRejections();
const TOKEN = 'platform-access-token-7f3a9c';
const HOOK_SECRET = 'hook-secret-41c2';
const CLIENT = { clientId: '0123456789abcdef0123456789abcdef', clientSecret: 'oauth-client-secret-value', redirectUri: 'https://marketplace.example/oauth/callback?x=1' };

const calls = { getProfile: 0, listUsers: 0, authorize: 0, events: 0, verifiedEvents: 0 };
const violations: string[] = [];
const handledEvents = new Map<string, number>();
let target: Running;

/** A fixed but unguessable-looking decision per resource id. */
const decision = (id: string) => createHash('sha256').update(id).digest()[0]! % 2 === 0;

before(async () => {
  const app = express();
  app.use(platformRouter({
    accessTokens: [TOKEN],
    logger: false,
    getProfile(id) {
      calls.getProfile += 1;
      if (typeof id !== 'string' || id.length > 256) violations.push(`getProfile got ${typeof id} of ${String(id).length}`);
      return id.startsWith('u-') ? { id, state: 'active', name: 'Alice' } : null;
    },
    listUsers(query: UsersQuery) {
      calls.listUsers += 1;
      checkQueryValue('listUsers', query.resource_id);
      checkQueryValue('listUsers', query.owner_id);
      checkList('listUsers annotations', query.annotations, 50);
      return [{ id: 'u-1', role: 'admin' }];
    },
    authorize(query: AuthorizationQuery) {
      calls.authorize += 1;
      checkQueryValue('authorize', query.actor_id);
      checkQueryValue('authorize', query.owner_id);
      if (!(VERBS as readonly string[]).includes(query.verb)) violations.push(`authorize got verb ${query.verb}`);
      if (typeof query.priced !== 'boolean') violations.push('authorize got a non-boolean priced');
      checkList('authorize resource_ids', query.resource_ids, 100);
      if (new Set(query.resource_ids).size !== query.resource_ids.length) violations.push('authorize got repeated resource ids');
      // A record built with fromEntries: ids such as __proto__ become own keys, as a platform's code would make them.
      return Object.fromEntries(query.resource_ids.map((id) => [id, decision(id)]));
    },
  }));
  app.post('/v1/events', marketplaceEvents({
    logger: false,
    // The unverified receiver checks what reaches the handler when a gateway authenticates deliveries.
    verify: false,
    maxBodyBytes: 2048,
    handlers: {
      'resource:provisioned': (data, context) => recordEvent('events', data, context.type),
      'resource:deprovisioned': (data, context) => recordEvent('events', data, context.type),
    },
  }));
  app.all('/v1/events-verified', marketplaceEvents({
    logger: false,
    verify: (req) => req.headers['x-hook-secret'] === HOOK_SECRET,
    handlers: { 'resource:provisioned': (data, context) => recordEvent('verifiedEvents', data, context.type) },
  }));
  app.use(deprecatedOAuthRouter({
    logger: false,
    clients: [CLIENT],
    getUser: (req) => (req.headers['x-test-user'] === 'alice' ? { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' } : null),
    // Hundreds of generated authorizations by one user: room for all of them (the bound has its own tests).
    maxCodesPerUser: 10_000,
  }));
  app.use((_req, res) => void res.status(404).json({ message: 'host app: not found' }));
  target = await listen(app);
});
after(async () => {
  await target.close();
  rejections.dispose();
});

function checkQueryValue(where: string, value: unknown): void {
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) violations.push(`${where} got ${JSON.stringify(value)?.slice(0, 40)}`);
}
function checkList(where: string, list: unknown, max: number): void {
  if (!Array.isArray(list) || list.length > max || list.some((v) => typeof v !== 'string' || v.length === 0 || v.length > 256)) violations.push(`${where} got ${JSON.stringify(list)?.slice(0, 60)}`);
}
function recordEvent(which: 'events' | 'verifiedEvents', data: { resource_id: unknown; subject: unknown }, type: string): void {
  calls[which] += 1;
  if (typeof data.resource_id !== 'string' || data.resource_id.length === 0 || typeof data.subject !== 'string' || data.subject.length === 0) violations.push(`event handler got ${JSON.stringify(data)}`);
  const key = `${which} ${JSON.stringify([type, data.resource_id, data.subject])}`;
  handledEvents.set(key, (handledEvents.get(key) ?? 0) + 1);
}

const send = (method: string, path: string, headers: [string, string][] = [], body?: string | Buffer) =>
  sendRaw(target, { method, path, headers: [['host', target.host], ...headers], body: body === undefined ? undefined : Buffer.from(body) });
const totalPlatformCalls = () => calls.getProfile + calls.listUsers + calls.authorize;

const pct = fc.stringMatching(/^(?:[A-Za-z0-9._~!$'()*,;:@-]|%[0-9A-Fa-f]{2}|%|%E0%A4|\+|\[|\]|=)$/);
const junk = fc.array(pct, { maxLength: 10 }).map((c) => c.join(''));
const ids = fc.oneof(
  fc.stringMatching(/^[a-z0-9-]{1,12}$/),
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'u-alice'),
  junk.filter((j) => j.length > 0 && !j.includes('|') && !j.includes('&')),
);

/** A query parameter: absent, valid, empty, repeated, junk or too long. */
const weighted = (weight: number, arbitrary: fc.Arbitrary<string[]>) => ({ weight, arbitrary });
function param(name: string, valid: fc.Arbitrary<string>): fc.Arbitrary<string[]> {
  return fc.oneof(
    weighted(20, valid.map((v) => [`${name}=${encodeURIComponent(v)}`])),
    weighted(1, fc.constant([])),
    weighted(1, fc.constant([`${name}=`])),
    weighted(1, fc.tuple(valid, valid).map(([a, b]) => [`${name}=${encodeURIComponent(a)}`, `${name}=${encodeURIComponent(b)}`])),
    weighted(1, junk.map((j) => [`${name}=${j}`])),
    weighted(1, fc.constantFrom(`${name}=${'x'.repeat(257)}`, `${name}[]=x`, `${name.toUpperCase()}=x`).map((piece) => [piece])),
  );
}
const pipeList = (max: number) => fc.oneof(
  { weight: 6, arbitrary: fc.array(ids, { minLength: 1, maxLength: 6 }).map((list) => list.join('|')) },
  { weight: 1, arbitrary: fc.constantFrom('a||b', 'a|', '|a', '|', `${'r|'.repeat(max)}r`) },
);
const extraPieces = fc.array(fc.oneof(fc.constantFrom('__proto__[polluted]=yes', 'constructor[prototype][polluted]=yes', '=', '&', 'verb', '%'), fc.tuple(junk, junk).map(([n, v]) => `${n}=${v}`)), { maxLength: 2 });

describe('platform endpoints', () => {
  it('run a handler only with the exact bearer token; refuse everything else with a JSON 401', async (t) => {
    const count = tally(t, 'platform calls with arbitrary Authorization');
    const authorization = fc.oneof(
      fc.constantFrom(undefined, `Bearer ${TOKEN}`, `bearer ${TOKEN}`, `Bearer   ${TOKEN}`, `BEARER ${TOKEN}`),
      fc.constantFrom(`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Bearer ${TOKEN.toUpperCase()}`, `Bearer ${TOKEN} ${TOKEN}`, `Bearer`, `Bearer `, `Token ${TOKEN}`, `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, `Bearer ${Buffer.from(TOKEN).toString('base64')}`, `Bearer\t${TOKEN}`, `${TOKEN}`),
      fieldValue.map((v) => `Bearer ${v}`),
      fieldValue,
    );
    const path = fc.constantFrom('/v1/profiles/u-alice', '/v1/profiles/nobody', '/v1/users?resource_id=r1&owner_id=o1', `/v1/resources/authorized?actor_id=a&owner_id=o&verb=READ&priced=false&resource_ids=r1|r2`);
    await fc.assert(fc.asyncProperty(authorization, path, fc.boolean(), async (auth, p, gzip) => {
      count.hit();
      const headers: [string, string][] = [['content-type', 'application/x-www-form-urlencoded']];
      if (auth !== undefined) headers.push(['authorization', auth]);
      if (gzip) headers.push(['accept-encoding', 'gzip']);
      const before = totalPlatformCalls();
      const answer = await send('GET', p, headers);
      const context = ` (Authorization ${JSON.stringify(auth)}, GET ${p})`;
      assertNo5xx(answer, context);
      const accepted = /^bearer +(\S+)$/i.exec(auth?.trim() ?? '')?.[1] === TOKEN;
      if (accepted) {
        assert.ok([200, 404].includes(answer.status), `the valid token was refused${context}: ${answer.status}`);
        assert.equal(totalPlatformCalls(), before + 1);
      } else {
        assertJsonRejection(answer, context);
        assert.equal(answer.status, 401, context);
        assert.match(String(answer.headers['www-authenticate']), /^Bearer/);
        assert.equal(totalPlatformCalls(), before, `a handler ran without the token${context}`);
      }
    }), runs(300));
    count.report();
  });

  it('validate the query of /v1/users and /v1/resources/authorized before any handler, and answer one entry per requested id', async (t) => {
    const count = tally(t, 'platform queries with the valid token');
    const statuses = new Map<number, number>();
    const users = fc.tuple(param('resource_id', ids), param('owner_id', ids), param('annotations', pipeList(50)), extraPieces).map((parts) => ['/v1/users', parts.flat()] as const);
    const authorized = fc.tuple(
      param('actor_id', ids), param('owner_id', ids),
      param('verb', fc.oneof(fc.constantFrom(...VERBS), fc.constantFrom('read', 'SSO ', 'DESTROY', '__proto__'))),
      param('priced', fc.constantFrom('true', 'false', 'TRUE', '1', 'yes')),
      param('resource_ids', pipeList(100)), param('annotations', pipeList(50)), extraPieces,
    ).map((parts) => ['/v1/resources/authorized', parts.flat()] as const);
    await fc.assert(fc.asyncProperty(fc.oneof(users, authorized), fc.boolean(), async ([route, pieces], shuffle) => {
      count.hit();
      const query = (shuffle ? [...pieces].reverse() : pieces).join('&');
      const path = `${route}${query.length === 0 ? '' : `?${query}`}`;
      const before = { ...calls };
      const answer = await send('GET', path, [['authorization', `Bearer ${TOKEN}`]]);
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      const context = ` (GET ${path})`;
      assertNo5xx(answer, context);
      assert.ok([200, 400].includes(answer.status), `answered ${answer.status}${context}`);
      if (answer.status === 400) {
        assertJsonRejection(answer, context);
        assert.deepEqual(calls, before, `a handler ran for a refused query${context}`);
      } else if (route === '/v1/resources/authorized') {
        const requested = [...new Set((new URLSearchParams(query).get('resource_ids') ?? '').split('|').filter((id) => id.length > 0))];
        assert.deepEqual(answer.json, { resources: requested.map((id) => ({ resource_id: id, authorized: decision(id) })) }, context);
      } else {
        assert.deepEqual(answer.json, { users: [{ id: 'u-1', role: 'admin' }] });
      }
      assertNoPollution();
    }), runs(300));
    assert.deepEqual(violations, []);
    count.report(`statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; handler calls ${JSON.stringify(calls)}`);
  });

  it('answer /v1/profiles/:id with 200, 404 or a JSON 400 for any path segment', async (t) => {
    const count = tally(t, 'profile ids');
    const segment = fc.oneof(ids.map(encodeURIComponent), junk.filter((j) => !j.includes('?')), fc.constantFrom('%E0%A4%A', '%', '%ZZ', '%00', 'u-%61lice', 'x'.repeat(300), '%2F', '..'));
    await fc.assert(fc.asyncProperty(segment.filter((s) => s.length > 0), async (id) => {
      count.hit();
      const answer = await send('GET', `/v1/profiles/${id}`, [['authorization', `Bearer ${TOKEN}`]]);
      const context = ` (GET /v1/profiles/${id})`;
      assertNo5xx(answer, context);
      assert.ok([200, 400, 404].includes(answer.status), `answered ${answer.status}${context}`);
      if (answer.status !== 200) assertJsonRejection(answer, context);
    }), runs(200));
    assert.deepEqual(violations, []);
    count.report();
  });
});

describe('webhook receiver', () => {
  const envelope = fc.record({
    event: fc.oneof(fc.constantFrom('resource:provisioned', 'resource:deprovision', 'resource:deprovisioned'), jsonText),
    version: fc.oneof({ weight: 3, arbitrary: fc.constantFrom('1', '2') }, { weight: 1, arbitrary: jsonText }),
    data: fc.oneof(
      { weight: 3, arbitrary: fc.tuple(fc.oneof({ weight: 3, arbitrary: fc.stringMatching(/^[a-z0-9]{1,8}$/).map((s) => JSON.stringify(s)) }, { weight: 1, arbitrary: jsonText }), fc.oneof({ weight: 3, arbitrary: fc.stringMatching(/^[a-z0-9-]{1,8}$/).map((s) => JSON.stringify(s)) }, { weight: 1, arbitrary: jsonText }), fc.array(fc.tuple(fc.constantFrom('"__proto__"', '"constructor"', '"extra"'), jsonText), { maxLength: 2 }))
        .map(([rid, sub, extra]) => objectText([['resource_id', rid], ['subject', sub], ...extra])) },
      { weight: 1, arbitrary: jsonText },
    ),
  }).map((e) => objectText([['event', e.event], ['version', e.version], ['data', e.data]]));
  const body = fc.oneof(
    { weight: 4, arbitrary: envelope },
    { weight: 1, arbitrary: jsonText },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 100 }).map((b) => Buffer.from(b).toString('latin1')) },
    { weight: 1, arbitrary: fc.integer({ min: 2000, max: 4000 }).map((n) => `{"data":{"resource_id":"r","subject":"${'s'.repeat(n)}"}}`) },
  );
  const delivery = fc.record({
    method: fc.constantFrom('POST', 'POST', 'POST', 'PUT', 'GET'),
    types: fc.oneof(
      weighted(3, fc.constantFrom(['resource:provisioned'], ['resource:deprovisioned'])),
      weighted(1, fc.array(fc.constantFrom('resource:provisioned', 'resource:deprovisioned', 'resource:unknown', '', '  resource:provisioned  ', 'RESOURCE:PROVISIONED', '__proto__', 'constructor', 'toString'), { minLength: 0, maxLength: 2 })),
    ),
    contentType: fc.oneof({ weight: 3, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: fc.constantFrom(undefined, 'application/json; charset=utf-8', 'application/cloudevents+json', 'text/plain', 'application/x-www-form-urlencoded') }),
    secret: fc.constantFrom(undefined, HOOK_SECRET, HOOK_SECRET, `${HOOK_SECRET}x`, HOOK_SECRET.toUpperCase()),
    body,
    verified: fc.boolean(),
  });

  it('acknowledges, refuses or handles every delivery as JSON; handlers see only well-formed data, verified when required, once per event', async (t) => {
    const count = tally(t, 'webhook deliveries');
    const statuses = new Map<number, number>();
    await fc.assert(fc.asyncProperty(delivery, async (d) => {
      count.hit();
      const headers: [string, string][] = d.types.map((type) => ['x-marketplace-event', type]);
      if (d.contentType !== undefined) headers.push(['content-type', d.contentType]);
      if (d.secret !== undefined) headers.push(['x-hook-secret', d.secret]);
      const path = d.verified ? '/v1/events-verified' : '/v1/events';
      const before = { ...calls };
      const answer: RawAnswer = await send(d.method, path, headers, Buffer.from(d.body, 'latin1'));
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      const context = ` (${d.method} ${path} ${JSON.stringify(headers)} ${d.body.slice(0, 80)})`;
      assertNo5xx(answer, context);
      if (d.method === 'POST' || d.verified) {
        // Acknowledgements are JSON {message} too.
        if (answer.status < 400) assert.equal(typeof (answer.json as { message?: unknown }).message, 'string', context);
        else assertJsonRejection(answer, context);
      }
      assert.ok([200, 400, 401, 404, 405, 413, 415].includes(answer.status), `answered ${answer.status}${context}`);
      if (d.verified && d.secret !== HOOK_SECRET) assert.equal(calls.verifiedEvents, before.verifiedEvents, `an unverified delivery reached the handler${context}`);
      if (answer.status !== 200) assert.deepEqual(calls, before, `a refused delivery reached a handler${context}`);
      assertNoPollution();
    }), runs(300));
    assert.deepEqual(violations, []);
    for (const [key, times] of handledEvents) assert.equal(times, 1, `event ${key} was handled ${times} times within the duplicate window`);
    count.report(`statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; handled ${calls.events} + ${calls.verifiedEvents} (verified)`);
  });
});

describe('deprecated OAuth endpoints', () => {
  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

  it('never issue a token without a real code, and answer every token request with an OAuth JSON error', async (t) => {
    const count = tally(t, 'token requests');
    const formPiece = fc.oneof(
      fc.constantFrom('grant_type=authorization_code', 'grant_type=refresh_token', 'grant_type=client_credentials', 'grant_type=password', 'grant_type=', `client_id=${CLIENT.clientId}`, `client_secret=${CLIENT.clientSecret}`, 'client_secret=wrong', `redirect_uri=${encodeURIComponent(CLIENT.redirectUri)}`, 'code=', '__proto__[x]=1', 'code=a&code=b'),
      fc.stringMatching(/^[A-Za-z0-9_-]{1,43}$/).map((v) => `code=${v}`),
      fc.stringMatching(/^[A-Za-z0-9_-]{1,43}$/).map((v) => `refresh_token=${v}`),
      fc.tuple(junk, junk).map(([n, v]) => `${n}=${v}`),
    );
    const request = fc.record({
      method: fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT'),
      contentType: fc.constantFrom(undefined, 'application/x-www-form-urlencoded', 'application/x-www-form-urlencoded; charset=utf-8', 'application/json', 'text/plain'),
      authorization: fc.constantFrom(undefined, basic(CLIENT.clientId, CLIENT.clientSecret), basic(CLIENT.clientId, 'wrong'), basic('other', CLIENT.clientSecret), 'Basic !!!', 'Basic', `Bearer ${TOKEN}`, basic(CLIENT.clientId, '')),
      form: fc.array(formPiece, { maxLength: 6 }),
      big: fc.boolean(),
    });
    await fc.assert(fc.asyncProperty(request, async (r) => {
      count.hit();
      const headers: [string, string][] = [];
      if (r.contentType !== undefined) headers.push(['content-type', r.contentType]);
      if (r.authorization !== undefined) headers.push(['authorization', r.authorization]);
      const form = r.form.join('&') + (r.big ? `&pad=${'p'.repeat(20_000)}` : '');
      const answer = await send(r.method, '/oauth/token', headers, form);
      const context = ` (${r.method} ${JSON.stringify(headers)} ${form.slice(0, 120)})`;
      assertNo5xx(answer, context);
      assert.ok([400, 401, 405, 413].includes(answer.status), `answered ${answer.status}${context}: ${answer.text}`);
      assert.match(String(answer.headers['content-type']), /^application\/json/);
      assert.equal(typeof (answer.json as { error?: unknown }).error, 'string', context);
      assert.equal(answer.headers['cache-control'], 'no-store');
    }), runs(250));
    count.report();
  });

  it('redirect only to the registered redirect_uri, and only for a signed-in user with a valid request', async (t) => {
    const count = tally(t, 'authorization requests');
    const piece = fc.oneof(
      fc.constantFrom(`client_id=${CLIENT.clientId}`, 'client_id=other', `redirect_uri=${encodeURIComponent(CLIENT.redirectUri)}`, 'redirect_uri=https%3A%2F%2Fattacker.example%2F', `redirect_uri=${encodeURIComponent(`${CLIENT.redirectUri}&y=2`)}`, 'redirect_uri=javascript%3Aalert(1)', 'response_type=code', 'response_type=token', 'access_type=online'),
      fc.oneof(junk, fc.stringMatching(/^[A-Za-z0-9]{0,20}$/)).map((s) => `state=${s}`),
      fc.tuple(junk, junk).map(([n, v]) => `${n}=${v}`),
    );
    const valid = [`client_id=${CLIENT.clientId}`, `redirect_uri=${encodeURIComponent(CLIENT.redirectUri)}`, 'response_type=code'];
    const query = fc.oneof(fc.array(piece, { maxLength: 6 }), fc.tuple(fc.array(piece, { maxLength: 2 }), fc.boolean()).map(([extra, rev]) => (rev ? [...extra, ...valid].reverse() : [...valid, ...extra])));
    const statuses = new Map<number, number>();
    await fc.assert(fc.asyncProperty(query, fc.boolean(), async (pieces, signedIn) => {
      count.hit();
      const path = `/oauth/login?${pieces.join('&')}`;
      const answer = await send('GET', path, signedIn ? [['x-test-user', 'alice']] : []);
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      const context = ` (GET ${path}, signed in ${signedIn})`;
      assertNo5xx(answer, context);
      assert.ok([302, 400, 401].includes(answer.status), `answered ${answer.status}${context}`);
      if (answer.status === 302) {
        // Only ever to the registered address: with a code for a signed-in user, or with an error
        // (RFC 6749 §4.1.2.1) once client and redirect URI are known good.
        const location = String(answer.headers.location);
        const issued = location.startsWith(`${CLIENT.redirectUri}&code=`);
        assert.ok(issued || location.startsWith(`${CLIENT.redirectUri}&error=`), `redirected to ${location}${context}`);
        if (issued) assert.ok(signedIn, context);
        assert.doesNotMatch(location.slice(CLIENT.redirectUri.length), /[#\s]/);
      } else {
        assertJsonRejection(answer, context);
      }
    }), runs(250));
    count.report(`statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
  });

  it('answer UserInfo without a valid access token with 401 and WWW-Authenticate error="invalid_token"', async (t) => {
    const count = tally(t, 'UserInfo requests');
    await fc.assert(fc.asyncProperty(fc.option(fc.oneof(fieldValue.map((v) => `Bearer ${v}`), fieldValue), { nil: undefined }), fc.constantFrom('GET', 'POST'), async (auth, method) => {
      count.hit();
      const answer = await send(method, '/oauth/userinfo', auth === undefined ? [] : [['authorization', auth]]);
      assert.equal(answer.status, 401, `answered ${answer.status} to ${JSON.stringify(auth)}`);
      assert.match(String(answer.headers['www-authenticate']), /error="invalid_token"/);
      assert.equal((answer.json as { error?: unknown }).error, 'invalid_token');
    }), runs(150));
    count.report();
  });
});

describe('regression: malformed percent-encoding in a platform path', () => {
  it('answers a JSON 400, not the host app\'s HTML error page', async () => {
    for (const path of ['/v1/profiles/%E0%A4%A', '/v1/profiles/%']) {
      const answer = await send('GET', path, [['authorization', `Bearer ${TOKEN}`]]);
      assert.equal(answer.status, 400);
      assertJsonRejection(answer, ` (${path})`);
    }
  });
});

describe('after every platform property', () => {
  it('left Object.prototype untouched, handler inputs valid, and no promise rejection unhandled', () => {
    assertNoPollution();
    assert.deepEqual(violations, []);
    assert.deepEqual(rejections.list, []);
  });
});
