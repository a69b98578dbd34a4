/**
 * What is Fastify's own in the Fastify adapter, on Fastify 4 and 5: our paths are real routes (a
 * host's hook sees `routeOptions.url` and `params.id`), the raw bytes reach the verifier whatever
 * content-type parsers the host registered, `app.marketplace` drives the provider from the host's
 * code and Fastify's onClose closes it, the host's error handler keeps errors that are not ours, and
 * single sign-on keeps its login in @fastify/session (a new session id) or the host's own hooks.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import fastify5 from 'fastify';
import { marketplacePlugin, type FastifySessionHooks, type MarketplaceSessionData } from '../../src/adapters/fastify.js';
import { accepted, type ProviderHandlers } from '../../src/domain/handlers.js';
import { InvalidOptionsError } from '../../src/errors.js';
import { memoryStore } from '../../src/store/memory.js';
import type { Store } from '../../src/store/types.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { marketplaceClient, readAnswer, type Running } from '../helpers/http.js';
import { waitFor } from '../outbox/helpers.js';
import { CATALOG, countingHandlers, newId } from './conformance.js';
import { fastifyApp, type FastifyMajor } from './fastify-hosts.js';

const fastify4 = createRequire(import.meta.url)('fastify4') as FastifyMajor;
const MAJORS = [['Fastify 5', fastify5 as unknown as FastifyMajor], ['Fastify 4', fastify4]] as const;
const CLIENT = { clientId: 'fastify-client', clientSecret: 'fastify-client-secret-value' };
const PERIOD = 'period_start=2026-10-01T00:00:00Z&period_end=2026-11-01T00:00:00Z';
const provisionBody = (id: string) => ({ id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });

async function listenOn(app: FastifyInstance): Promise<Running & { close(): Promise<void> }> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    server: app.server,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

for (const [name, fastify] of MAJORS) {
  for (const prefix of ['', '/marketplace']) {
    describe(`${name}: real routes for the host's hooks, whatever its parsers${prefix === '' ? '' : ` (prefix ${prefix})`}`, () => {
      const client = marketplaceClient();
      const seen: { method: string; status: number; route: string | undefined; id: string | undefined }[] = [];
      let target: Running & { close(): Promise<void> };

      before(async () => {
        const app = fastify();
        // A metrics hook as a host app writes one, and parsers that would spoil the raw bytes.
        app.addHook('onResponse', async (request, reply) => {
          seen.push({ method: request.method, status: reply.statusCode, route: request.routeOptions.url, id: (request.params as Record<string, string | undefined>).id });
        });
        app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, _body, done) => done(null, { parsedBy: 'host' }));
        app.addContentTypeParser('*', (_request, payload, done) => {
          payload.resume();
          payload.on('end', () => done(null, 'consumed by the host'));
        });
        await app.register(marketplacePlugin, { prefix, handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false });
        app.put('/host/echo', async (request) => ({ body: request.body }));
        target = await listenOn(app);
      });
      after(async () => target.close());

      it('serves the signed routes as Fastify routes, the host\'s hooks seeing the route pattern and the id', async () => {
        const id = newId();
        const answer = await client.send(target, 'PUT', `${prefix}/v1/resources/${id}`, provisionBody(id));
        assert.equal(answer.status, 201, answer.text);
        assert.equal((await client.send(target, 'GET', `${prefix}/v1/resources/${id}/measures?${PERIOD}`)).status, 200);
        const credentialId = newId();
        assert.equal((await client.send(target, 'PUT', `${prefix}/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id })).status, 201);
        assert.equal((await client.send(target, 'GET', `${prefix}/v1/resources/${id}`)).status, 405);
        await waitFor(() => seen.length >= 4, 'the host\'s onResponse hooks');
        assert.deepEqual(seen.slice(0, 4), [
          { method: 'PUT', status: 201, route: `${prefix}/v1/resources/:id`, id },
          { method: 'GET', status: 200, route: `${prefix}/v1/resources/:id/measures`, id },
          { method: 'PUT', status: 201, route: `${prefix}/v1/credentials/:id`, id: credentialId },
          { method: 'GET', status: 405, route: `${prefix}/v1/resources/:id`, id },
        ]);
      });

      it('verifies the raw bytes whatever the host parses, and leaves the host\'s routes to its parsers', async () => {
        const id = newId();
        // Signed over bytes no JSON.stringify would produce: only the raw body verifies.
        const body = `{ "id": "${id}",\n  "product": "bonnets", "plan": "small", "region": "aws::us-east-1" }\n`;
        const answer = await client.send(target, 'PUT', `${prefix}/v1/resources/${id}`, body);
        assert.equal(answer.status, 201, answer.text);
        const echo = await fetch(`${target.url}/host/echo`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
        assert.deepEqual(await echo.json(), { body: { parsedBy: 'host' } });
      });
    });
  }

  describe(`${name}: app.marketplace and the provider's life`, () => {
    const client = marketplaceClient();
    let fake: FakeConnector;
    let app: FastifyInstance;
    let target: Running & { close(): Promise<void> };
    let closed = 0;
    const handlers: ProviderHandlers = { ...countingHandlers().handlers, provision: () => accepted('Knitting your bonnet') };

    before(async () => {
      fake = createFakeConnector(CLIENT);
      const { url } = await fake.listen();
      const base = memoryStore();
      const store: Store = Object.assign(Object.create(base) as Store, { close: async () => { closed += 1; await base.close(); } });
      app = fastify();
      await app.register(marketplacePlugin, {
        handlers, store, catalog: CATALOG, masterKey: client.masterPublicKey, logger: false,
        connector: { url, ...CLIENT }, outbox: { pollIntervalMs: 20, backoff: { baseMs: 5, maxMs: 40 } },
      });
      target = await listenOn(app);
    });
    after(async () => {
      if (closed === 0) await target.close();
      await fake.close();
    });

    it('completes a long-running operation from the host\'s code, and records usage', async () => {
      const id = newId();
      const callbackId = newId();
      const started = await client.send(target, 'PUT', `/v1/resources/${id}`, provisionBody(id), { 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) });
      assert.deepEqual([started.status, started.body], [202, { message: 'Knitting your bonnet' }]);
      assert.deepEqual((await app.marketplace.pendingOperations()).map((op) => op.targetId), [id]);
      await app.marketplace.complete({ entity: 'resource', id }, { state: 'done', message: 'Your bonnet is ready' });
      assert.deepEqual((await fake.waitForCallback(callbackId, 5000)).body, { state: 'done', message: 'Your bonnet is ready' });
      assert.equal((await app.marketplace.store.getResource(id))?.plan, 'small');
      await app.marketplace.recordUsage(id, 'bonnet-hours', 5, new Date('2026-10-15T00:00:00Z'));
      const measures = await client.send(target, 'GET', `/v1/resources/${id}/measures?${PERIOD}`);
      assert.deepEqual((measures.body as { measures: unknown }).measures, { 'bonnet-hours': 24 }, 'the measures handler answers');
      assert.equal((await app.marketplace.health()).status, 'ok');
    });

    it('closes the provider (outbox and store) when Fastify closes', async () => {
      assert.equal(closed, 0);
      await target.close();
      assert.equal(closed, 1);
    });
  });

  describe(`${name}: errors at registration and the host's error handler`, () => {
    it('refuses a wrong option when the app loads the plugin, with a hint', async () => {
      const handlers = countingHandlers().handlers;
      for (const [options, message] of [
        [{ handlers, storre: memoryStore() }, /unknown option "storre" \(did you mean "store"\?\)/],
        [{ handlers, sso: true }, /option "sso" needs option "connector"/],
        [{ handlers, sso: { session: { secret: 'short' } }, connector: { url: 'http://127.0.0.1:9', ...CLIENT } }, /"secret" must be a string of at least 32/],
        [{ handlers, sso: { session: { get: () => undefined } }, connector: { url: 'http://127.0.0.1:9', ...CLIENT } }, /needs both get\(request\) and set\(request, reply, login\)/],
        [{ handlers: {} }, /handlers\.provision must be a function/],
      ] as const) {
        const app = fastify();
        await assert.rejects(async () => {
          await app.register(marketplacePlugin, { logger: false, ...options } as never);
        }, (error: unknown) => error instanceof InvalidOptionsError && message.test(error.message), String(message));
        await app.close();
      }
    });

    it('refuses a second registration on the same instance', async () => {
      const app = fastify();
      const options = { handlers: countingHandlers().handlers, logger: false as const };
      await app.register(marketplacePlugin, options);
      await assert.rejects(async () => {
        await app.register(marketplacePlugin, options);
      }, /marketplace/);
      await app.close();
    });

    it('answers an unsigned request 401 and a signed non-JSON one 415 whatever its Content-Type, even one Fastify 5 cannot parse', async () => {
      const client = marketplaceClient();
      const app = fastify();
      await app.register(marketplacePlugin, { handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false });
      const target = await listenOn(app);
      try {
        const id = newId();
        const unsigned = await fetch(`${target.url}/v1/resources/${id}`, { method: 'PUT', headers: { 'content-type': 'not a media type' }, body: '{}' });
        assert.equal(unsigned.status, 401);
        const body = JSON.stringify(provisionBody(id));
        for (const type of ['text/csv', 'not a media type']) {
          const headers = client.signer.sign({ method: 'PUT', url: `/v1/resources/${id}`, headers: { 'content-type': type }, body: Buffer.from(body), host: target.host });
          const signed = await readAnswer(await fetch(`${target.url}/v1/resources/${id}`, { method: 'PUT', headers, body }));
          assert.deepEqual([signed.status, signed.body], [415, { message: 'Request body must be application/json' }], type);
        }
      } finally {
        await target.close();
      }
    });

    it('leaves the errors of the host\'s own hooks on our routes to the host\'s error handler', async () => {
      const client = marketplaceClient();
      const app = fastify();
      app.setErrorHandler((_error, _request, reply) => void reply.code(418).send({ message: 'host handler' }));
      app.addHook('onRequest', async (request) => {
        if (request.headers['x-host-refuses'] === 'yes') throw new Error('the host refuses');
      });
      await app.register(marketplacePlugin, { handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false });
      const target = await listenOn(app);
      try {
        const id = newId();
        const refused = await client.send(target, 'PUT', `/v1/resources/${id}`, provisionBody(id), { 'x-host-refuses': 'yes' });
        assert.deepEqual([refused.status, refused.body], [418, { message: 'host handler' }]);
        assert.equal((await client.send(target, 'PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      } finally {
        await target.close();
      }
    });

    it('serves a trailing slash on a host whose router ignores them already', async () => {
      const client = marketplaceClient();
      const app = fastify(name === 'Fastify 5' ? { routerOptions: { ignoreTrailingSlash: true } } : { ignoreTrailingSlash: true });
      await app.register(marketplacePlugin, { handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false });
      const target = await listenOn(app);
      try {
        const id = newId();
        assert.equal((await client.send(target, 'PUT', `/v1/resources/${id}/`, provisionBody(id))).status, 201);
        assert.equal((await client.send(target, 'DELETE', `/v1/resources/${id}`)).status, 204);
      } finally {
        await target.close();
      }
    });
  });

  describe(`${name}: single sign-on through the host's own session hooks`, () => {
    const kept = new Map<string, MarketplaceSessionData>();
    let fake: FakeConnector;
    let target: Running & { close(): Promise<void> };
    const resource = newId();
    const hooks: FastifySessionHooks = {
      set(request, reply, login) {
        const sid = `s${kept.size + 1}-${request.id}`;
        kept.set(sid, login);
        void reply.header('set-cookie', `host.sid=${sid}; Path=/; HttpOnly`);
      },
      get(request) {
        const sid = /host\.sid=([^;]+)/.exec(request.headers.cookie ?? '')?.[1];
        return sid === undefined ? undefined : kept.get(sid);
      },
    };

    before(async () => {
      fake = createFakeConnector(CLIENT);
      const { url } = await fake.listen();
      fake.addResource({ id: resource });
      const app = fastify();
      await app.register(marketplacePlugin, { handlers: countingHandlers().handlers, logger: false, outbox: false, connector: { url, ...CLIENT }, sso: { session: hooks } });
      app.get('/dashboard/:id', async (request, reply) => {
        const login = await app.marketplace.session(request);
        return login?.resourceId === (request.params as { id: string }).id ? { resourceId: login.resourceId } : reply.code(login === undefined ? 401 : 403).send({ message: 'no' });
      });
      target = await listenOn(app);
    });
    after(async () => {
      await target.close();
      await fake.close();
    });

    it('hands the login (token included) to set, and reads it back through get', async () => {
      const code = fake.issueSsoCode({ resourceId: resource });
      const signIn = await fetch(`${target.url}/v1/sso?code=${code}&resource_id=${resource}`, { redirect: 'manual' });
      assert.equal(signIn.status, 303, await signIn.clone().text());
      assert.equal(signIn.headers.get('location'), `/dashboard/${resource}`);
      const [login] = [...kept.values()];
      assert.equal(login?.resourceId, resource);
      assert.equal(typeof login?.accessToken, 'string');
      const cookie = signIn.headers.getSetCookie()[0]!.split(';')[0]!;
      assert.deepEqual(await (await fetch(`${target.url}/dashboard/${resource}`, { headers: { cookie } })).json(), { resourceId: resource });
      assert.equal((await fetch(`${target.url}/dashboard/${newId()}`, { headers: { cookie } })).status, 403);
      assert.equal((await fetch(`${target.url}/dashboard/${resource}`)).status, 401);
    });
  });
}

describe('Fastify 5: single sign-on behind @fastify/session', () => {
  const resource = newId();
  let fake: FakeConnector;
  let app: FastifyInstance;
  let target: Running & { close(): Promise<void> };
  const stored: Record<string, unknown>[] = [];

  before(async () => {
    fake = createFakeConnector(CLIENT);
    const { url } = await fake.listen();
    fake.addResource({ id: resource });
    app = await fastifyApp(fastify5, { handlers: countingHandlers().handlers, logger: false, outbox: false, connector: { url, ...CLIENT } }, true, '@fastify/session', (host) => {
      host.get('/visit', async (request) => {
        (request as unknown as { session: { set(key: string, value: unknown): void } }).session.set('visited', true);
        return { ok: true };
      });
    });
    app.addHook('onResponse', async (request) => {
      const session = (request as unknown as { session?: { marketplace?: Record<string, unknown> } }).session;
      if (session?.marketplace !== undefined) stored.push(session.marketplace);
    });
    target = await listenOn(app);
  });
  after(async () => {
    await target.close();
    await fake.close();
  });

  it('regenerates the session (a new id) and keeps the login under request.session.marketplace, as express-session does', async () => {
    const before = (await fetch(`${target.url}/visit`)).headers.getSetCookie()[0]!.split(';')[0]!;
    const code = fake.issueSsoCode({ resourceId: resource });
    const signIn = await fetch(`${target.url}/v1/sso?code=${code}&resource_id=${resource}`, { headers: { cookie: before }, redirect: 'manual' });
    assert.equal(signIn.status, 303, (await readAnswer(signIn.clone())).text);
    // @fastify/session clears the old cookie, then sets the new one (a browser keeps the last).
    const after = signIn.headers.getSetCookie().at(-1)!.split(';')[0]!;
    assert.match(after, /^bonnets\.sid=/);
    assert.notEqual(after, before, 'a new session id after sign-in');
    assert.deepEqual(Object.keys(stored.at(-1) ?? {}).sort(), ['accessToken', 'expiresAt', 'resourceId']);
    assert.equal(stored.at(-1)?.resourceId, resource);
    assert.deepEqual(await (await fetch(`${target.url}/dashboard/${resource}`, { headers: { cookie: after } })).json(), { resourceId: resource });
    assert.equal((await fetch(`${target.url}/dashboard/${resource}`, { headers: { cookie: before } })).status, 401, 'the old session id opens nothing');
  });
});

describe('Fastify 5: single sign-on with @fastify/session\'s store down', () => {
  it('answers 500 with no session cookie, and says in the log that the session store may be down', async () => {
    const fake = createFakeConnector(CLIENT);
    const { url } = await fake.listen();
    const resource = newId();
    fake.addResource({ id: resource });
    const lines: string[] = [];
    const { createRedactingLogger } = await import('../../src/lib/logger.js');
    const { default: fastifyCookie } = await import('@fastify/cookie');
    const { default: fastifySession } = await import('@fastify/session');
    const down = (callback: (error?: Error) => void) => callback(new Error('session store down'));
    const app = fastify5();
    await app.register(fastifyCookie);
    await app.register(fastifySession, {
      secret: 'fastify-session-store-down-secret-0123456789',
      saveUninitialized: false,
      cookie: { secure: false },
      store: { get: (_id: string, callback: (error: null, session: null) => void) => callback(null, null), set: (_id: string, _session: unknown, callback: (error?: Error) => void) => down(callback), destroy: (_id: string, callback: (error?: Error) => void) => callback() },
    });
    await app.register(marketplacePlugin, { handlers: countingHandlers().handlers, logger: createRedactingLogger({ write: (line: string) => void lines.push(line) }, 'info'), outbox: false, connector: { url, ...CLIENT }, sso: true });
    const target = await listenOn(app);
    try {
      const answer = await fetch(`${target.url}/v1/sso?code=${fake.issueSsoCode({ resourceId: resource })}&resource_id=${resource}`, { redirect: 'manual' });
      assert.equal(answer.status, 500);
      assert.deepEqual(answer.headers.getSetCookie(), []);
      assert.match(lines.join(''), /could not keep the login in the session \(is the session store up\?\)/);
    } finally {
      await target.close();
      await fake.close();
    }
  });
});

describe('Fastify 5: single sign-on without @fastify/session', () => {
  it('answers 500 and logs how to register the session plugins', async () => {
    const fake = createFakeConnector(CLIENT);
    const { url } = await fake.listen();
    const lines: string[] = [];
    const { createRedactingLogger } = await import('../../src/lib/logger.js');
    const app = fastify5();
    await app.register(marketplacePlugin, { handlers: countingHandlers().handlers, logger: createRedactingLogger({ write: (line: string) => void lines.push(line) }, 'info'), outbox: false, connector: { url, ...CLIENT }, sso: true });
    const target = await listenOn(app);
    try {
      const answer = await fetch(`${target.url}/v1/sso?code=abc&resource_id=${newId()}`, { redirect: 'manual' });
      assert.equal(answer.status, 500);
      assert.match(lines.join(''), /register @fastify\/cookie and @fastify\/session before the marketplace plugin/);
    } finally {
      await target.close();
      await fake.close();
    }
  });
});
