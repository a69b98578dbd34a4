import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import session from 'express-session';
import fc from 'fast-check';
import { marketplaceRouter, memoryStore, requireMarketplaceSession, type ProviderHandlers } from '../../src/index.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { listen, type Running } from '../helpers/http.js';
import { assertJsonRejection, assertNo5xx, assertNoPollution, recordRejections, runs, sendRaw, tally, type RawAnswer } from './helpers.js';

// GET /v1/sso is the one provider route anyone can call: it is unsigned and comes from browsers.
// Whatever the query, it must answer JSON (or the 303 of a real login), exchange a code only when
// the parameters are well-formed, never log anyone in without a real code for that very resource,
// and never create a session on failure.

const rejections = recordRejections();
const CLIENT_ID = 'sso-fuzz-client';
const CLIENT_SECRET = 'sso-fuzz-secret';
const RESOURCE_A = '2ssoaaaaaaaaaaaaaaaaaaaaaaaaa';
const RESOURCE_B = '2ssobbbbbbbbbbbbbbbbbbbbbbbbb';

let fake: FakeConnector;
const handlerCalls = { count: 0 };
const servers: { target: Running; close(): Promise<void> }[] = [];

async function ssoApp(queryParser: 'simple' | 'extended'): Promise<Running> {
  const count = () => void (handlerCalls.count += 1);
  const handlers: ProviderHandlers = { provision: count, changePlan: count, deprovision: count, provisionCredentials: () => ({ credentials: { A: 'b' } }), deprovisionCredentials: count };
  const router = marketplaceRouter({
    handlers,
    store: memoryStore(),
    masterKey: generateKeyPair().publicKey,
    connector: { url: fake.url, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
    sso: true,
    outbox: false,
    logger: false,
  });
  const app = express();
  app.set('query parser', queryParser);
  app.use(session({ secret: 'sso-fuzz-session-secret', resave: false, saveUninitialized: false, store: new session.MemoryStore() }));
  app.use(router);
  app.get('/dashboard/:id', requireMarketplaceSession({ logger: false }), (_req, res) => void res.json({ resourceId: res.locals.marketplace?.resourceId }));
  app.use((_req, res) => void res.status(404).json({ message: 'host app: not found' }));
  const target = await listen(app);
  servers.push({ target, close: async () => { await target.close(); await router.close(); } });
  return target;
}

before(async () => {
  fake = createFakeConnector({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
  await fake.listen();
  fake.addResource({ id: RESOURCE_A });
  fake.addResource({ id: RESOURCE_B });
});
after(async () => {
  for (const server of servers) await server.close();
  await fake.close();
  rejections.dispose();
});

function cookieOf(answer: RawAnswer): string | undefined {
  const raw = answer.headers['set-cookie'];
  const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? [raw] : [];
  return list.map((c) => c.split(';')[0]!).find((c) => c.startsWith('connect.sid='));
}

const get = (target: Running, path: string, cookie?: string) =>
  sendRaw(target, { method: 'GET', path, headers: [['host', target.host], ...(cookie === undefined ? [] : [['cookie', cookie] as [string, string]])] });

const pct = fc.stringMatching(/^(?:[A-Za-z0-9._~+/=-]|%[0-9A-Fa-f]{2}|%|%E0%A4|\[|\]|&|=|\+)$/);
const junk = fc.array(pct, { maxLength: 10 }).map((c) => c.join(''));
const codeValue = fc.oneof(
  { weight: 2, arbitrary: fc.constant('REAL') },
  { weight: 3, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~-]{1,40}$/) },
  { weight: 2, arbitrary: junk },
  { weight: 1, arbitrary: fc.constantFrom('', 'a'.repeat(513), '%00', 'x+y', 'x%20y', 'REAL%00', 'null', 'undefined', '__proto__') },
);
const resourceValue = fc.oneof(
  { weight: 4, arbitrary: fc.constant(RESOURCE_A) },
  { weight: 2, arbitrary: fc.constantFrom(RESOURCE_B, `${RESOURCE_A}%20`, RESOURCE_A.toUpperCase(), `../${RESOURCE_A}`, '__proto__', 'constructor', '') },
  { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~-]{1,40}$/) },
  { weight: 2, arbitrary: junk },
);
const piece = fc.oneof(
  { weight: 3, arbitrary: codeValue.map((v) => `code=${v}`) },
  { weight: 3, arbitrary: resourceValue.map((v) => `resource_id=${v}`) },
  { weight: 1, arbitrary: fc.constantFrom('code[]=x', 'resource_id[x]=y', '__proto__[polluted]=yes', 'constructor[prototype][polluted]=yes', 'code', 'resource_id', '=') },
  { weight: 1, arbitrary: fc.tuple(junk, junk).map(([n, v]) => `${n}=${v}`) },
);
const query = fc.oneof(
  { weight: 1, arbitrary: fc.array(piece, { maxLength: 5 }) },
  // Usually both parameters, once each, in either order, sometimes with extra pieces.
  {
    weight: 3,
    arbitrary: fc.tuple(codeValue, resourceValue, fc.array(piece, { maxLength: 1 }), fc.boolean()).map(([code, resource, extra, swap]) => {
      const pair = [`code=${code}`, `resource_id=${resource}`];
      return [...(swap ? pair.reverse() : pair), ...extra];
    }),
  },
);

for (const parser of ['simple', 'extended'] as const) {
  describe(`GET /v1/sso with arbitrary parameters (query parser "${parser}")`, () => {
    let target: Running;
    before(async () => {
      target = await ssoApp(parser);
    });

    it('answers 303 only for a real code with its own resource; otherwise JSON, no session, no exchange for malformed input', async (t) => {
      const count = tally(t, `SSO queries, ${parser} parser`);
      const statuses = new Map<number, number>();
      await fc.assert(fc.asyncProperty(query, async (pieces) => {
        count.hit();
        let realCode: string | undefined;
        const text = pieces.map((p) => p.replace('REAL', () => (realCode ??= fake.issueSsoCode({ resourceId: RESOURCE_A })))).join('&');
        const path = `/v1/sso${text.length === 0 ? '' : `?${text}`}`;
        const exchangesBefore = fake.tokenRequests.length;
        const answer = await get(target, path);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        const context = ` (GET ${path})`;
        assertNo5xx(answer, context);
        assert.equal(answer.headers['cache-control'], 'no-store', context);
        if (answer.status === 303) {
          // Only the one real code, for the resource it was issued for, with nothing ambiguous about either.
          assert.ok(realCode !== undefined, `logged in without a real code${context}`);
          assert.equal(new URLSearchParams(text).getAll('code').length, 1, context);
          assert.deepEqual(new URLSearchParams(text).getAll('resource_id'), [RESOURCE_A], context);
          assert.equal(answer.headers.location, `/dashboard/${RESOURCE_A}`);
          const cookie = cookieOf(answer);
          assert.ok(cookie !== undefined, 'a login sets the session cookie');
          assert.equal((await get(target, `/dashboard/${RESOURCE_A}`, cookie)).status, 200);
          assert.equal((await get(target, `/dashboard/${RESOURCE_B}`, cookie)).status, 403, 'the session is restricted to its resource');
          assert.equal((await get(target, path)).status, 401, 'a code works once');
        } else {
          assertJsonRejection(answer, context);
          assert.ok([400, 401, 403].includes(answer.status), `answered ${answer.status}${context}`);
          assert.equal(cookieOf(answer), undefined, `a failed sign-in created a session${context}`);
          if (answer.status === 400) assert.equal(fake.tokenRequests.length, exchangesBefore, `a malformed query reached the connector${context}`);
        }
        assertNoPollution();
      }), runs(150));
      assert.equal(handlerCalls.count, 0);
      count.report(`statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; ${fake.tokenRequests.length} code exchanges so far`);
    });

    it('never signs anyone in when resource_id is not the resource the code was issued for', async (t) => {
      const count = tally(t, `SSO tampered resource_id, ${parser} parser`);
      const other = fc.oneof(fc.constant(RESOURCE_B), fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._~-]{0,63}$/).filter((id) => id !== RESOURCE_A));
      await fc.assert(fc.asyncProperty(other, async (resourceId) => {
        count.hit();
        const code = fake.issueSsoCode({ resourceId: RESOURCE_A });
        const answer = await get(target, `/v1/sso?code=${encodeURIComponent(code)}&resource_id=${encodeURIComponent(resourceId)}`);
        assertJsonRejection(answer, ` (resource_id ${resourceId})`);
        assert.equal(answer.status, 403);
        assert.equal(cookieOf(answer), undefined);
        // The code was spent on the refused attempt: it cannot be replayed with the right resource either.
        const retry = await get(target, `/v1/sso?code=${encodeURIComponent(code)}&resource_id=${RESOURCE_A}`);
        assert.equal(retry.status, 401);
        assert.equal(cookieOf(retry), undefined);
      }), runs(40));
      count.report();
    });
  });
}

describe('after every SSO property', () => {
  it('left Object.prototype untouched and no promise rejection unhandled', () => {
    assertNoPollution();
    assert.deepEqual(rejections.list, []);
  });
});
