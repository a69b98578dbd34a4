/**
 * createProvider on its own, called directly (no server) where the adapter suite cannot reach:
 * options checked at construction, the base path, the body read from a Web Request (limit,
 * timeout), `node`'s hand-over to `next`, the session hooks and the onError hook.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { marketplaceRouter } from '../../src/adapters/express.js';
import { createProvider } from '../../src/core/provider.js';
import type { Provider, ProviderOptions, SessionHooks } from '../../src/core/types.js';
import { InvalidOptionsError } from '../../src/errors.js';
import type { MarketplaceSessionData } from '../../src/sso/exchange.js';
import { memoryStore } from '../../src/store/memory.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { listening } from '../adapters/bridge.js';
import { CATALOG, countingHandlers, newId } from '../adapters/conformance.js';

const master = generateKeyPair();
const signer = createSigner({ masterPrivateKey: master.privateKey });
const HOST = 'api.example.com';
const SECRET = 'a-provider-session-secret-of-enough-length';

function provider(extra: Partial<ProviderOptions> = {}): Provider {
  return createProvider({ handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: master.publicKey, publicHost: HOST, logger: false, ...extra });
}

/** A signed Web request for `path` (which the signature covers as is). */
function signed(method: string, path: string, body?: unknown, init: { chunks?: Uint8Array[]; hang?: boolean } = {}): Request {
  const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
  const headers = signer.sign({ method, url: path, host: HOST, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: bytes });
  let stream: ReadableStream<Uint8Array> | undefined;
  if (init.chunks !== undefined || init.hang === true) {
    const chunks = init.chunks ?? [bytes.subarray(0, 5)];
    stream = new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        if (init.hang !== true) controller.close();
      },
    });
  }
  return new Request(`https://${HOST}${path}`, { method, headers, body: stream ?? (bytes.length > 0 ? bytes : null), duplex: 'half' });
}

const provisionBody = (id: string) => ({ id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });

describe('createProvider options', () => {
  it('refuses wrong options at construction with a hint', () => {
    const { handlers } = countingHandlers();
    const connector = { url: 'http://127.0.0.1:9', clientId: 'id', clientSecret: 'secret' };
    const cases: [unknown, RegExp][] = [
      [{ handlers, stroe: memoryStore() }, /createProvider: unknown option "stroe".*did you mean "store"/],
      [{}, /createProvider: option "handlers" is required/],
      [{ handlers, sso: true }, /option "sso" must be \{ session/],
      [{ handlers, sso: { session: { secret: SECRET } } }, /option "sso" needs option "connector"/],
      [{ handlers, connector, sso: {} }, /"sso.session" is required: \{ secret \}/],
      [{ handlers, connector, sso: { session: { secret: 'short' } } }, /at least 32 random characters/],
      [{ handlers, connector, sso: { session: { secret: [] } } }, /at least 32 random characters/],
      [{ handlers, connector, sso: { session: { secret: SECRET, cookiename: 'x' } } }, /did you mean "cookieName"/],
      [{ handlers, connector, sso: { session: { secret: SECRET, cookieName: 'bad name' } } }, /cookieName/],
      [{ handlers, connector, sso: { session: { secret: SECRET, secure: 'yes' } } }, /"secure" must be true, false or "auto"/],
      [{ handlers, connector, sso: { session: { get: () => undefined } } }, /needs both get\(request\) and set\(request, login\)/],
      [{ handlers, connector, sso: { session: { secret: SECRET }, onerror: () => undefined } }, /did you mean "onError"/],
      [{ handlers, basePath: 'marketplace' }, /"basePath" must be a path such as "\/marketplace"/],
      [{ handlers, basePath: '/marketplace/' }, /"basePath"/],
      [{ handlers, bodyLimit: -1 }, /createProvider: option "bodyLimit"/],
      [{ handlers, masterKey: 'nope' }, /masterKey/],
    ];
    for (const [options, message] of cases) {
      assert.throws(() => createProvider({ logger: false, store: memoryStore(), ...(options as ProviderOptions) }), (err: unknown) => err instanceof InvalidOptionsError && message.test(err.message), JSON.stringify(options));
    }
  });
});

describe('provider.fetch', () => {
  let p: Provider;
  before(() => {
    p = provider({ bodyLimit: 256, bodyTimeoutMs: 200 });
  });
  after(async () => p.close());

  it('answers a signed request, and a JSON 404 for any other path', async () => {
    const id = newId();
    const created = await p.fetch(signed('PUT', `/v1/resources/${id}`, provisionBody(id)));
    assert.equal(created.status, 201);
    assert.deepEqual(await created.json(), { message: 'Your small bonnet is ready' });
    const other = await p.fetch(new Request(`https://${HOST}/elsewhere`));
    assert.equal(other.status, 404);
    assert.deepEqual(await other.json(), { message: 'Not found' });
  });

  it('refuses a chunked body past the limit with 413, and a body that never completes with 408', async () => {
    const id = newId();
    const big = new Uint8Array(200).fill(0x20);
    const tooBig = await p.fetch(signed('PUT', `/v1/resources/${id}`, provisionBody(id), { chunks: [big, big] }));
    assert.equal(tooBig.status, 413);
    assert.equal(typeof ((await tooBig.json()) as { message: unknown }).message, 'string');
    // The sender stops after a few bytes and never ends the body: bodyTimeoutMs (200 ms) answers.
    const stalled = await p.fetch(signed('PUT', `/v1/resources/${id}`, provisionBody(id), { hang: true }));
    assert.equal(stalled.status, 408);
    assert.deepEqual(await stalled.json(), { message: 'Request body was not received in time' });
  });

  it('answers HEAD with the length of the body it leaves out', async () => {
    const id = newId();
    await p.fetch(signed('PUT', `/v1/resources/${id}`, provisionBody(id)));
    const path = `/v1/resources/${id}/measures?period_start=2026-10-01T00:00:00Z&period_end=2026-11-01T00:00:00Z`;
    const full = await p.fetch(signed('GET', path));
    const head = await p.fetch(signed('HEAD', path));
    assert.equal(head.status, 200);
    assert.equal(head.body, null);
    assert.equal(head.headers.get('content-length'), String((await full.text()).length));
  });
});

describe('basePath', () => {
  it('routes the paths under it, with the signature over the whole path, and leaves the rest', async () => {
    const p = provider({ basePath: '/marketplace' });
    try {
      const id = newId();
      assert.equal((await p.fetch(signed('PUT', `/marketplace/v1/resources/${id}`, provisionBody(id)))).status, 201);
      assert.equal((await p.fetch(signed('PUT', `/v1/resources/${id}`, provisionBody(id)))).status, 404);
      assert.equal((await p.fetch(signed('PUT', `/marketplaceX/v1/resources/${id}`, provisionBody(id)))).status, 404);
      assert.equal((await p.fetch(new Request(`https://${HOST}/marketplace/v1/resources/${id}`, { method: 'DELETE' }))).status, 401);
    } finally {
      await p.close();
    }
  });
});

describe('provider.node', () => {
  it('hands paths that are not its own to next, and answers a JSON 404 without one', async () => {
    const p = provider();
    const passed: string[] = [];
    const withNext = await listening(createServer((req, res) => p.node(req, res, () => {
      passed.push(req.url ?? '');
      res.end('host');
    })));
    const bare = await listening(createServer((req, res) => p.node(req, res)));
    try {
      assert.equal(await (await fetch(`${withNext.url}/elsewhere?x=1`)).text(), 'host');
      assert.equal((await fetch(`${withNext.url}/v1/resources/${newId()}`, { method: 'PUT' })).status, 401);
      assert.deepEqual(passed, ['/elsewhere?x=1']);
      const missing = await fetch(`${bare.url}/elsewhere`);
      assert.equal(missing.status, 404);
      assert.deepEqual(await missing.json(), { message: 'Not found' });
    } finally {
      await withNext.close();
      await bare.close();
      await p.close();
    }
  });

  it('routes under a Connect-style mount: the path from req.url, the signature over req.originalUrl', async () => {
    const p = createProvider({ handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: master.publicKey, logger: false });
    const server = await listening(createServer((req: IncomingMessage & { originalUrl?: string }, res: ServerResponse) => {
      // What Connect and Express do for app.use('/marketplace', handler).
      req.originalUrl = req.url;
      if (req.url?.startsWith('/marketplace/')) req.url = req.url.slice('/marketplace'.length);
      p.node(req, res);
    }));
    try {
      const id = newId();
      const bytes = Buffer.from(JSON.stringify(provisionBody(id)));
      const sign = (url: string) => signer.sign({ method: 'PUT', url, host: server.host, headers: { 'content-type': 'application/json' }, body: bytes });
      const answer = await fetch(`${server.url}/marketplace/v1/resources/${id}`, { method: 'PUT', headers: sign(`/marketplace/v1/resources/${id}`), body: bytes });
      assert.equal(answer.status, 201);
      // Signed for the path without the mount: not what arrived.
      const other = newId();
      const wrong = await fetch(`${server.url}/marketplace/v1/resources/${other}`, { method: 'PUT', headers: sign(`/v1/resources/${other}`), body: bytes });
      assert.equal(wrong.status, 401);
    } finally {
      await server.close();
      await p.close();
    }
  });
});

describe('single sign-on hooks', () => {
  const CLIENT = { clientId: 'hook-client', clientSecret: 'hook-client-secret-value' };
  let connector: FakeConnector;
  let url: string;
  const resource = newId();
  before(async () => {
    connector = createFakeConnector(CLIENT);
    ({ url } = await connector.listen());
    connector.addResource({ id: resource });
  });
  after(async () => connector.close());

  const ssoRequest = (code: string, id = resource) => new Request(`https://${HOST}/v1/sso?code=${encodeURIComponent(code)}&resource_id=${id}`);

  it('hands the login (token included) to the host\'s session, sends its headers, and reads it back', async () => {
    const kept = new Map<string, MarketplaceSessionData>();
    const hooks: SessionHooks = {
      set(_request, login) {
        kept.set('sid-1', login);
        return [['Set-Cookie', 'host_sid=sid-1; HttpOnly; Path=/'], ['Set-Cookie', 'other=1']];
      },
      get(request) {
        const sid = /host_sid=([^;]+)/.exec(request.headers.get('cookie') ?? '')?.[1];
        return sid === undefined ? undefined : kept.get(sid);
      },
    };
    const p = provider({ connector: { url, ...CLIENT }, outbox: false, sso: { session: hooks, dashboardUrl: (id) => `/app/${id}` } });
    try {
      const answer = await p.fetch(ssoRequest(connector.issueSsoCode({ resourceId: resource })));
      assert.equal(answer.status, 303);
      assert.equal(answer.headers.get('location'), `/app/${resource}`);
      assert.deepEqual(answer.headers.getSetCookie(), ['host_sid=sid-1; HttpOnly; Path=/', 'other=1']);
      assert.equal(kept.get('sid-1')?.resourceId, resource);
      assert.equal(typeof kept.get('sid-1')?.accessToken, 'string');
      const login = await p.session(new Request(`https://${HOST}/dashboard`, { headers: { cookie: 'host_sid=sid-1' } }));
      assert.deepEqual(login, { resourceId: resource, expiresAt: kept.get('sid-1')!.expiresAt });
      // A node request (anything with headers) reaches the hook as a Web Request too.
      assert.deepEqual(await p.session({ headers: { cookie: 'host_sid=sid-1' } }), login);
      assert.equal(await p.session({ headers: {} }), undefined);
    } finally {
      await p.close();
    }
  });

  it('answers 500 without a cookie when the hook cannot keep the login', async () => {
    const p = provider({ connector: { url, ...CLIENT }, outbox: false, sso: { session: { set: () => { throw new Error('session store down'); }, get: () => undefined } } });
    try {
      const answer = await p.fetch(ssoRequest(connector.issueSsoCode({ resourceId: resource })));
      assert.equal(answer.status, 500);
      assert.deepEqual(answer.headers.getSetCookie(), []);
    } finally {
      await p.close();
    }
  });

  it('lets onError answer a failed sign-in, with no-store added', async () => {
    const p = provider({ connector: { url, ...CLIENT }, outbox: false, sso: { session: { secret: SECRET }, onError: (failure) => Response.redirect(`https://${HOST}/sorry?reason=${failure.reason}`, 303) } });
    try {
      const answer = await p.fetch(ssoRequest('not-a-real-code'));
      assert.equal(answer.status, 303);
      assert.equal(answer.headers.get('location'), `https://${HOST}/sorry?reason=invalid-code`);
      assert.equal(answer.headers.get('cache-control'), 'no-store');
    } finally {
      await p.close();
    }
  });
});

describe('construction', () => {
  it('starts no callback worker when an option is wrong: single sign-on and signature options are checked first', async () => {
    const connector = { url: 'http://127.0.0.1:9', clientId: 'id', clientSecret: 'secret' };
    const { handlers } = countingHandlers();
    // The worker's first act is to claim deliveries, on a 0 ms timer once started.
    let claims = 0;
    const base = memoryStore();
    const store = Object.assign(Object.create(base) as typeof base, { claimDeliveries: (...args: Parameters<typeof base.claimDeliveries>) => { claims++; return base.claimDeliveries(...args); } });
    assert.throws(() => createProvider({ handlers, store, logger: false, connector, sso: { session: { secret: 'short' } } }), InvalidOptionsError);
    assert.throws(() => createProvider({ handlers, store, logger: false, connector, masterKey: 'nope' }), InvalidOptionsError);
    assert.throws(() => marketplaceRouter({ handlers, store, logger: false, connector, sso: { dashboardURL: () => '/' } as never }), /did you mean "dashboardUrl"/);
    assert.throws(() => marketplaceRouter({ handlers, store, logger: false, connector, bodyLimit: 1.5 }), /bodyLimit/);
    // A 0 ms timer set now fires after any set before it.
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(claims, 0);
    // The same store with right options does start one: the check above can see it.
    const started = createProvider({ handlers, store, logger: false, connector });
    await new Promise((resolve) => setTimeout(resolve, 0));
    await started.close();
    assert.ok(claims > 0);
  });
});
