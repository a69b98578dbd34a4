/**
 * One behaviour, every host: the same cases run against each adapter (Express 5, Express 4,
 * `provider.node` on node:http, `provider.fetch` through a Request/Response bridge, and whatever
 * adapter comes next), as the store suite does for stores. An adapter is a factory that starts a
 * loopback server for given provider options; adding one is one file calling
 * `adapterConformance(adapter)` (and `adapterAcceptance(adapter)`).
 *
 * The answers, the log lines and the metric labels are compared with fixed expectations, so every
 * adapter that passes answers, logs and counts alike.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import type { CommonProviderOptions } from '../../src/core/types.js';
import type { ProviderHandlers } from '../../src/domain/handlers.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { memoryStore } from '../../src/store/memory.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { runAcceptance } from '../../src/testkit/acceptance/index.js';
import { logCapture, marketplaceClient, readAnswer, type Running, type SignedAnswer } from '../helpers/http.js';
import { waitFor } from '../outbox/helpers.js';
import { explain, failedIds } from '../testkit/helpers/harness.js';

/** A started server: its base URL and Host, and how to stop it (the provider closed too). */
export interface AdapterServer {
  url: string;
  host: string;
  close(): Promise<void>;
}

/** How the suite starts an adapter. */
export interface AdapterUnderTest {
  /** In the test titles. */
  name: string;
  /**
   * Starts a loopback server serving a provider built from `options`. With `sso`, single sign-on is
   * on and kept in the adapter's own session (express-session, the sealed cookie, @fastify/session
   * …), and the server answers `GET /dashboard/:id` with 200 JSON `{ resourceId }` when the session
   * opens `:id`, 401 without a sign-in and 403 for another resource. Any path that is not the
   * provider's answers a JSON 404 (the host's own, or the provider's).
   */
  start(options: CommonProviderOptions, sso: boolean): Promise<AdapterServer>;
}

export const CATALOG = { bonnets: { plans: ['small', 'large'], regions: ['aws::us-east-1', 'all::global'] } };
const PERIOD = 'period_start=2026-10-01T00:00:00Z&period_end=2026-11-01T00:00:00Z';
let seq = 0;
/** A marketplace-shaped id (29 characters, lowercase base 36), unique in this process. */
export const newId = (): string => `c${Date.now().toString(36)}${(seq++).toString(36)}`.padEnd(29, '0').slice(0, 29);
const provisionBody = (id: string, plan = 'small') => ({ id, product: 'bonnets', plan, region: 'aws::us-east-1' });

/** Handlers that count their calls. */
export function countingHandlers(): { handlers: ProviderHandlers; calls: Record<string, number> } {
  const calls: Record<string, number> = {};
  const bump = (name: string) => void (calls[name] = (calls[name] ?? 0) + 1);
  let serial = 0;
  return {
    calls,
    handlers: {
      provision: ({ plan }) => {
        bump('provision');
        return `Your ${plan} bonnet is ready`;
      },
      changePlan: ({ plan }) => {
        bump('changePlan');
        return { message: `Resized to ${plan}` };
      },
      deprovision: () => bump('deprovision'),
      provisionCredentials: ({ resourceId }) => {
        bump('provisionCredentials');
        serial += 1;
        return { credentials: { BONNETS_URL: `https://u${serial}:secret-${serial}-value@bonnets.example/${resourceId}` } };
      },
      deprovisionCredentials: () => bump('deprovisionCredentials'),
      measures: ({ resource }): Record<string, number> => (resource.plan === 'large' ? {} : { 'bonnet-hours': 24 }),
    },
  };
}

/** Sends a request with exact control of the headers and body framing (chunked when `chunks` has several). */
function rawRequest(target: AdapterServer, method: string, path: string, headers: Record<string, string>, chunks: Buffer[]): Promise<{ status: number; text: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const url = new URL(target.url);
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8'), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

function assertJsonMessage(answer: { status: number; body?: unknown; text?: string }, status: number, context = ''): void {
  assert.equal(answer.status, status, `${context} ${answer.text ?? ''}`);
  const body = answer.body ?? JSON.parse(answer.text ?? 'null');
  const message = (body as { message?: unknown } | null)?.message;
  assert.equal(typeof message, 'string', `${context} answers JSON {message}`);
  assert.ok((message as string).length >= 3 && (message as string).length <= 256, context);
}

/** The behaviour every adapter must show. */
export function adapterConformance(adapter: AdapterUnderTest): void {
  describe(`${adapter.name}: signed routes`, () => {
    const client = marketplaceClient();
    const { handlers, calls } = countingHandlers();
    let server: AdapterServer;
    let target: Running;
    const send = (method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<SignedAnswer> => client.send(target, method, path, body, headers);

    before(async () => {
      server = await adapter.start({ handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false, bodyLimit: 1024 }, false);
      target = server as unknown as Running;
    });
    after(async () => server.close());

    it('provisions, replays, changes the plan, issues and revokes credentials, answers measures and deprovisions', async () => {
      const id = newId();
      const created = await send('PUT', `/v1/resources/${id}`, provisionBody(id));
      assert.deepEqual([created.status, created.body], [201, { message: 'Your small bonnet is ready' }]);
      assert.equal(created.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(created.headers.get('content-length'), String(Buffer.byteLength(created.text)));
      assert.equal(created.headers.get('etag'), null);
      const repeat = await send('PUT', `/v1/resources/${id}`, provisionBody(id));
      assert.deepEqual([repeat.status, repeat.body], [201, created.body]);
      assert.equal(calls.provision, 1, 'the handler ran once');
      assertJsonMessage(await send('PUT', `/v1/resources/${id}`, provisionBody(id, 'large')), 409, 'another plan');

      const patched = await send('PATCH', `/v1/resources/${id}`, { plan: 'large' });
      assert.deepEqual([patched.status, patched.body], [200, { message: 'Resized to large' }]);
      const measures = await send('GET', `/v1/resources/${id}/measures?${PERIOD}`);
      assert.equal(measures.status, 204, 'the large plan has no usage');

      const credentialId = newId();
      const issued = await send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id });
      assert.equal(issued.status, 201);
      assert.match((issued.body as { credentials: { BONNETS_URL: string } }).credentials.BONNETS_URL, /^https:\/\/u1:/);
      const revoked = await send('DELETE', `/v1/credentials/${credentialId}`);
      assert.deepEqual([revoked.status, revoked.text], [204, '']);

      const deleted = await send('DELETE', `/v1/resources/${id}`);
      assert.deepEqual([deleted.status, deleted.text], [204, '']);
      assertJsonMessage(await send('DELETE', `/v1/resources/${id}`), 404, 'deleted again');
      assertJsonMessage(await send('PATCH', `/v1/resources/${newId()}`, { plan: 'large' }), 404, 'unknown resource');
    });

    it('answers the measures of the period, and HEAD with the headers of GET only', async () => {
      const id = newId();
      assert.equal((await send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      const full = await send('GET', `/v1/resources/${id}/measures?${PERIOD}`);
      assert.equal(full.status, 200);
      assert.deepEqual(full.body, { resource_id: id, period_start: '2026-10-01T00:00:00Z', period_end: '2026-11-01T00:00:00Z', measures: { 'bonnet-hours': 24 } });
      const head = await send('HEAD', `/v1/resources/${id}/measures?${PERIOD}`);
      assert.deepEqual([head.status, head.text], [200, '']);
      assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(full.text)));
      assert.equal(head.headers.get('content-type'), 'application/json; charset=utf-8');
      for (const query of ['', 'period_start=2026-10-01&period_end=2026-11-01', `${PERIOD}&period_start=2026-09-01T00:00:00Z`, 'period_start[]=2026-10-01T00:00:00Z&period_end=2026-11-01T00:00:00Z']) {
        assertJsonMessage(await send('GET', `/v1/resources/${id}/measures?${query}`), 400, query);
      }
      assertJsonMessage(await send('GET', `/v1/resources/${newId()}/measures?${PERIOD}`), 404, 'unknown resource');
    });

    it('refuses unsigned and foreign-signed requests with a JSON 401, under any path of its prefixes', async () => {
      const before = calls.provision ?? 0;
      const id = newId();
      const unsigned = await fetch(`${server.url}/v1/resources/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(provisionBody(id)) });
      assertJsonMessage(await readAnswer(unsigned), 401, 'unsigned');
      const foreign = await marketplaceClient().send(target, 'PUT', `/v1/resources/${id}`, provisionBody(id));
      assertJsonMessage(foreign, 401, 'foreign');
      for (const path of ['/v1/resources/a/b/c', '/v1/credentials', '/v1/resources/', '/V1/CREDENTIALS/x/measures']) {
        assertJsonMessage(await readAnswer(await fetch(`${server.url}${path}`)), 401, path);
      }
      assert.equal(calls.provision ?? 0, before);
    });

    it('answers a JSON 404 for paths that are not its own, signed or not', async () => {
      assertJsonMessage(await readAnswer(await fetch(`${server.url}/elsewhere`)), 404, '/elsewhere');
      assertJsonMessage(await readAnswer(await fetch(`${server.url}/v1/resourcesX/a`)), 404, '/v1/resourcesX/a');
      assertJsonMessage(await send('GET', '/v1/resources/a/b/c'), 404, 'signed, none of the routes');
      assertJsonMessage(await send('GET', `/v1/credentials/${newId()}/measures`), 404, 'no measures of credentials');
    });

    it('answers a JSON 405 with the route\'s methods in Allow', async () => {
      const id = newId();
      for (const [method, path, allow] of [
        ['GET', `/v1/resources/${id}`, 'PUT, PATCH, DELETE'],
        ['HEAD', `/v1/resources/${id}`, 'PUT, PATCH, DELETE'],
        ['POST', `/v1/resources/${id}/`, 'PUT, PATCH, DELETE'],
        ['POST', `/v1/resources/${id}/measures`, 'GET'],
        ['DELETE', `/V1/Resources/${id}/MEASURES/`, 'GET'],
        ['PATCH', `/v1/credentials/${id}`, 'PUT, DELETE'],
      ] as const) {
        const answer = await send(method, path);
        assert.equal(answer.status, 405, `${method} ${path}`);
        assert.equal(answer.headers.get('allow'), allow, `${method} ${path}`);
        if (method !== 'HEAD') assert.deepEqual(answer.body, { message: 'Method not allowed' });
      }
    });

    it('routes a trailing slash and any case, and decodes the id as Express decodes route parameters', async () => {
      const a = newId();
      assert.equal((await send('PUT', `/v1/resources/${a}/`, provisionBody(a))).status, 201);
      const b = newId();
      assert.equal((await send('PUT', `/V1/RESOURCES/${b}`, provisionBody(b))).status, 201);
      const c = newId();
      // %63 is "c": the path's id, decoded, is the body's.
      const encoded = await send('PUT', `/v1/resources/%63${c.slice(1)}`, provisionBody(c));
      assert.equal(encoded.status, 201, encoded.text);
      assert.equal((await send('DELETE', `/v1/resources/${c}`)).status, 204);
      for (const [method, path] of [['PUT', '/v1/resources/%E0%A4%A'], ['DELETE', '/v1/credentials/%'], ['GET', '/v1/resources/abc%ZZ/measures'], ['DELETE', '/v1/resources/a%2Fb']] as const) {
        assertJsonMessage(await send(method, path, method === 'PUT' ? {} : undefined), 400, `${method} ${path}`);
      }
    });

    it('refuses a body over the limit with a JSON 413, declared or chunked, and malformed or foreign bodies with 400 and 415', async () => {
      const id = newId();
      const big = Buffer.from(JSON.stringify({ ...provisionBody(id), padding: 'x'.repeat(2000) }));
      const signed = client.signer.sign({ method: 'PUT', url: `/v1/resources/${id}`, headers: { 'content-type': 'application/json' }, body: big, host: server.host });
      const declared = await rawRequest(server, 'PUT', `/v1/resources/${id}`, { ...signed, 'content-length': String(big.length) }, [big]);
      assertJsonMessage(declared, 413, 'declared');
      const chunked = await rawRequest(server, 'PUT', `/v1/resources/${id}`, { ...signed, 'transfer-encoding': 'chunked' }, [big.subarray(0, 700), big.subarray(700)]);
      assertJsonMessage(chunked, 413, 'chunked');
      assertJsonMessage(await send('PUT', `/v1/resources/${id}`, '{"id":'), 400, 'not JSON');
      const small = Buffer.from(JSON.stringify(provisionBody(id)));
      const plain = client.signer.sign({ method: 'PUT', url: `/v1/resources/${id}`, headers: { 'content-type': 'text/plain' }, body: small, host: server.host });
      assertJsonMessage(await rawRequest(server, 'PUT', `/v1/resources/${id}`, { ...plain, 'content-length': String(small.length) }, [small]), 415, 'text/plain');
      const signedSmall = client.signer.sign({ method: 'PUT', url: `/v1/resources/${id}`, headers: { 'content-type': 'application/json' }, body: small, host: server.host });
      const ok = await rawRequest(server, 'PUT', `/v1/resources/${id}`, { ...signedSmall, 'transfer-encoding': 'chunked' }, [small.subarray(0, 10), small.subarray(10)]);
      assert.equal(ok.status, 201, `a chunked body within the limit: ${ok.text}`);
    });
  });

  describe(`${adapter.name}: log lines and metrics`, () => {
    const client = marketplaceClient();
    const capture = logCapture();
    const registry = new Registry();
    let server: AdapterServer;
    let target: Running;

    before(async () => {
      server = await adapter.start({
        handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey,
        logger: createRedactingLogger(capture.stream, 'info'), metrics: { registry },
      }, false);
      target = server as unknown as Running;
    });
    after(async () => server.close());

    it('logs one line per request of its paths, with the same route labels, statuses and codes, and counts them alike', async () => {
      const id = newId();
      const steps: [() => Promise<number>, string, string, number, string | undefined][] = [
        [async () => (await client.send(target, 'PUT', `/v1/resources/${id}`, provisionBody(id), { 'x-callback-id': 'cb123' })).status, 'PUT', '/v1/resources/:id', 201, undefined],
        [async () => (await fetch(`${server.url}/v1/resources/${id}`, { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } })).status, 'PUT', '/v1/resources/:id', 401, 'ERR_SIGNATURE_MISSING'],
        [async () => (await client.send(target, 'GET', `/v1/resources/${id}`)).status, 'GET', '/v1/resources/:id', 405, undefined],
        [async () => (await client.send(target, 'GET', `/v1/resources/${id}/measures?${PERIOD}`)).status, 'GET', '/v1/resources/:id/measures', 200, undefined],
        [async () => (await client.send(target, 'DELETE', `/v1/credentials/${newId()}`)).status, 'DELETE', '/v1/credentials/:id', 404, 'ERR_NOT_FOUND'],
        [async () => (await fetch(`${server.url}/v1/resources/a/b/c`)).status, 'GET', '/v1/resources/*', 401, 'ERR_SIGNATURE_MISSING'],
        [async () => (await client.send(target, 'PUT', `/v1/resources/${id}`, '{"id":')).status, 'PUT', '/v1/resources/:id', 400, 'ERR_BAD_REQUEST'],
        [async () => (await fetch(`${server.url}/v1/sso?code=x&resource_id=${id}`)).status, 'GET', '/v1/sso', 404, 'ERR_NOT_FOUND'],
        [async () => (await fetch(`${server.url}/elsewhere`)).status, '', '', 404, undefined],
      ];
      const statuses: number[] = [];
      for (const [step] of steps) statuses.push(await step());
      assert.deepEqual(statuses, steps.map((s) => s[3]));
      const expected = steps.filter((s) => s[1] !== '').map(([, method, route, status, code]) => ({ method, route, status, ...(code === undefined ? {} : { code }) }));
      const requestLines = () => capture.lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'marketplace request');
      // A line is written when the answer has gone out, which the client may see first.
      await waitFor(() => requestLines().length >= expected.length, 'the request lines');
      const lines = requestLines();
      assert.deepEqual(lines.map((line) => ({ method: line.method, route: line.route, status: line.status, ...(line.code === undefined ? {} : { code: line.code }) })), expected);
      assert.equal(lines[0]!.id, id);
      assert.equal(lines[0]!.callbackId, 'cb123');
      assert.equal(typeof lines[0]!.latencyMs, 'number');
      assert.equal(capture.text().includes('x-signature'), false);

      const counted = (await registry.getSingleMetric('marketplace_requests_total')!.get()).values
        .map(({ labels, value }) => `${String(labels.method)} ${String(labels.route)} ${String(labels.status)} ${String(labels.code)} ${value}`).sort();
      const expectedCounts = new Map<string, number>();
      for (const line of expected) {
        const key = `${line.method} ${line.route.endsWith('*') ? 'other' : line.route} ${line.status} ${line.code ?? ''}`;
        expectedCounts.set(key, (expectedCounts.get(key) ?? 0) + 1);
      }
      assert.deepEqual(counted, [...expectedCounts].map(([key, n]) => `${key} ${n}`).sort());
    });
  });

  describe(`${adapter.name}: spans`, () => {
    const client = marketplaceClient();
    const exporter = new InMemorySpanExporter();
    let server: AdapterServer;
    let target: Running;

    before(async () => {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
      server = await adapter.start({ handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false }, false);
      target = server as unknown as Running;
    });
    after(async () => {
      await server.close();
      trace.disable();
      context.disable();
    });

    it('opens the same spans: verify, operation (kind, entity id), handler and commit; a forged request ends in verify with its code', async () => {
      const id = newId();
      assert.equal((await client.send(target, 'PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      const names = exporter.getFinishedSpans().map((span) => span.name).sort();
      assert.deepEqual(names, ['marketplace.handler', 'marketplace.operation', 'marketplace.store.commit', 'marketplace.verify']);
      const operation = exporter.getFinishedSpans().find((span) => span.name === 'marketplace.operation')!;
      assert.deepEqual([operation.attributes['marketplace.kind'], operation.attributes['marketplace.entity_id']], ['provision', id]);
      exporter.reset();
      const forged = await fetch(`${server.url}/v1/resources/${id}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', date: new Date().toISOString(), 'x-signature': 'not a signature', 'x-signed-headers': 'host date' },
        body: '{}',
      });
      assert.equal(forged.status, 401);
      const spans = exporter.getFinishedSpans();
      assert.deepEqual(spans.map((span) => span.name), ['marketplace.verify']);
      assert.equal(spans[0]!.status.code, SpanStatusCode.ERROR);
      assert.equal(spans[0]!.attributes['marketplace.error.code'], 'ERR_SIGNATURE_MALFORMED');
    });
  });

  describe(`${adapter.name}: single sign-on`, () => {
    const CLIENT = { clientId: 'conformance-client', clientSecret: 'conformance-client-secret-value' };
    const client = marketplaceClient();
    const capture = logCapture();
    let connector: FakeConnector;
    let server: AdapterServer;
    const resource = newId();
    const other = newId();

    before(async () => {
      connector = createFakeConnector(CLIENT);
      const { url } = await connector.listen();
      connector.addResource({ id: resource });
      connector.addResource({ id: other });
      server = await adapter.start({
        handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey,
        logger: createRedactingLogger(capture.stream, 'debug'), outbox: false, connector: { url, ...CLIENT },
      }, true);
    });
    after(async () => {
      await server.close();
      await connector.close();
    });

    const ssoUrl = (code: string, id: string) => `${server.url}/v1/sso?code=${encodeURIComponent(code)}&resource_id=${encodeURIComponent(id)}`;
    const cookiesOf = (response: Response) => response.headers.getSetCookie();
    const secrets: string[] = [];

    it('signs in with a 303 to the dashboard and a session cookie that opens that resource only', async () => {
      const code = connector.issueSsoCode({ resourceId: resource });
      secrets.push(code);
      const signIn = await fetch(ssoUrl(code, resource), { redirect: 'manual' });
      assert.equal(signIn.status, 303);
      assert.equal(signIn.headers.get('location'), `/dashboard/${resource}`);
      assert.equal(signIn.headers.get('cache-control'), 'no-store');
      const cookies = cookiesOf(signIn);
      assert.ok(cookies.length >= 1, 'a session cookie is set');
      assert.match(cookies.join('\n'), /HttpOnly/i);
      const cookie = cookies.map((c) => c.split(';')[0]!).join('; ');
      secrets.push(...cookies.map((c) => c.split(';')[0]!.split('=').slice(1).join('=')));
      const dashboard = await fetch(`${server.url}/dashboard/${resource}`, { headers: { cookie } });
      assert.equal(dashboard.status, 200);
      assert.deepEqual(await dashboard.json(), { resourceId: resource });
      assert.equal((await fetch(`${server.url}/dashboard/${other}`, { headers: { cookie } })).status, 403);
      assert.equal((await fetch(`${server.url}/dashboard/${resource}`)).status, 401);

      // The code is single-use: a second sign-in with it is refused, and sets no cookie.
      const again = await fetch(ssoUrl(code, resource), { redirect: 'manual' });
      assertJsonMessage(await readAnswer(again.clone()), 401, 'reused code');
      assert.deepEqual(cookiesOf(again), []);
    });

    it('refuses a tampered resource_id with 403, malformed queries with 400, HEAD with 405, and sets no cookie', async () => {
      const tampered = await fetch(ssoUrl(connector.issueSsoCode({ resourceId: resource }), other), { redirect: 'manual' });
      assertJsonMessage(await readAnswer(tampered.clone()), 403, 'tampered');
      assert.deepEqual(cookiesOf(tampered), []);
      for (const query of ['code=abc', `resource_id=${resource}`, `code=a&code=b&resource_id=${resource}`, 'code=abc&resource_id=..']) {
        const answer = await fetch(`${server.url}/v1/sso?${query}`, { redirect: 'manual' });
        assertJsonMessage(await readAnswer(answer.clone()), 400, query);
        assert.deepEqual(cookiesOf(answer), []);
      }
      const code = connector.issueSsoCode({ resourceId: resource });
      const head = await fetch(ssoUrl(code, resource), { method: 'HEAD', redirect: 'manual' });
      assert.equal(head.status, 405);
      assert.equal(head.headers.get('allow'), 'GET');
      assert.equal((await fetch(ssoUrl(code, resource), { redirect: 'manual' })).status, 303, 'the HEAD did not use up the code');
    });

    it('answers browsers with an HTML page', async () => {
      const page = await fetch(`${server.url}/v1/sso?code=abc`, { headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' } });
      assert.equal(page.status, 400);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(await page.text(), /<!doctype html>[\s\S]*resource_id/);
    });

    it('never logs the code, the token or the session cookie', () => {
      assert.ok(secrets.length >= 2);
      const text = capture.text();
      assert.ok(text.includes('single sign-on succeeded'));
      for (const secret of [...secrets, CLIENT.clientSecret]) assert.equal(text.includes(secret), false, `a secret in the log: ${secret.slice(0, 6)}…`);
    });
  });
}

/** The acceptance suite (the package's own, `runAcceptance`) over HTTP against the adapter. */
export function adapterAcceptance(adapter: AdapterUnderTest): void {
  describe(`${adapter.name}: acceptance suite`, () => {
    it('passes every case', async () => {
      const CLIENT = { clientId: 'acceptance-client', clientSecret: 'acceptance-client-secret-value' };
      const master = generateKeyPair();
      const connector = createFakeConnector(CLIENT);
      const { url } = await connector.listen();
      const server = await adapter.start({
        handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: master.publicKey,
        logger: false, outbox: false, connector: { url, ...CLIENT },
      }, true);
      try {
        const report = await runAcceptance({
          url: server.url, masterPrivateKey: master.privateKey, product: 'bonnets', plan: 'small', newPlan: 'large',
          region: 'aws::us-east-1', conflictRegion: 'all::global', ...CLIENT, connector, requestTimeoutMs: 10_000,
        });
        assert.deepEqual(failedIds(report), [], explain(report));
        assert.equal(report.summary.skipped, 0);
      } finally {
        await server.close();
        await connector.close();
      }
    });
  });
}
