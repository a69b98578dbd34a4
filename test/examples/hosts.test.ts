/**
 * `npm run example` on each host (EXAMPLE_ADAPTER=express|fastify|fetch): the same provider passes
 * the acceptance suite, signs in through single sign-on to `/dashboard/<id>` with a session cookie
 * (200 for that session, 401 without one, 403 for another resource), answers EXAMPLE_MEASURES and
 * the operator endpoints alike. `npm run example` itself starts and stops on every host, and an
 * unknown EXAMPLE_ADAPTER stops it at start with a message naming the variable and its values.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createProviderApp, EXAMPLE_ADAPTERS, exampleAdapter, type ExampleAdapter, type ProviderApp } from '../../examples/provider-app.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { runAcceptance } from '../../src/testkit/acceptance/index.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { listen, readAnswer, type Running } from '../helpers/http.js';
import { startExample, stopAll, type ExampleProcess } from '../helpers/processes.js';
import { explain, failedIds } from '../testkit/helpers/harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT = { clientId: 'hosts-client', clientSecret: 'hosts-client-secret-value-0c7e' };
const SETTINGS = { product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', conflictRegion: 'all::global' } as const;
const PERIOD = 'period_start=2026-10-01T00:00:00Z&period_end=2026-11-01T00:00:00Z';

/** The marketplace's side: a master key, and signed requests to a target. */
function marketplace() {
  const master = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey });
  return {
    masterPublicKey: master.publicKey,
    masterPrivateKey: master.privateKey,
    async send(target: { url: string; host: string }, method: string, path: string, body?: unknown) {
      const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
      const headers = signer.sign({ method, url: path, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: bytes, host: target.host });
      return readAnswer(await fetch(target.url + path, { method, headers, ...(bytes.length > 0 ? { body: bytes } : {}) }));
    },
  };
}

for (const adapter of EXAMPLE_ADAPTERS) {
  describe(`the example provider with EXAMPLE_ADAPTER=${adapter}`, () => {
    const market = marketplace();
    let connector: FakeConnector;
    let provider: ProviderApp;
    let target: Running;

    before(async () => {
      connector = createFakeConnector(CLIENT);
      const { url } = await connector.listen();
      provider = await createProviderApp({
        EXAMPLE_ADAPTER: adapter,
        STORE: 'memory',
        MASTER_PUBLIC_KEY: market.masterPublicKey,
        CONNECTOR_URL: url,
        CONNECTOR_CLIENT_ID: CLIENT.clientId,
        CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret,
        EXAMPLE_MEASURES: '{"bonnet-hours":12}',
        LOG_LEVEL: 'silent',
      });
      target = await listen(provider.app);
    });
    after(async () => {
      await target?.close();
      await provider?.close();
      await connector?.close();
    });

    it('is served by that host', () => {
      assert.equal(provider.adapter, adapter);
    });

    it('signs in through /v1/sso to /dashboard/<id> with a session cookie: 200 for it, 401 without, 403 for another resource', async () => {
      const id = `h${adapter.padEnd(28, '0')}`;
      const provisioned = await market.send(target, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });
      assert.equal(provisioned.status, 201, provisioned.text);
      connector.addResource({ id });
      const code = connector.issueSsoCode({ resourceId: id });
      const signIn = await fetch(`${target.url}/v1/sso?code=${code}&resource_id=${id}`, { redirect: 'manual' });
      assert.equal(signIn.status, 303, await signIn.clone().text());
      assert.equal(signIn.headers.get('location'), `/dashboard/${id}`);
      // @fastify/session clears the cookie it had before it sets the new one: the last one counts.
      const setCookie = signIn.headers.getSetCookie().at(-1) ?? '';
      assert.match(setCookie, /^bonnets\.sid=[^;]+;/);
      assert.match(setCookie, /HttpOnly/i);
      assert.match(setCookie, /SameSite=Lax/i);
      const cookie = setCookie.split(';')[0]!;

      const dashboard = await fetch(`${target.url}/dashboard/${id}`, { headers: { cookie } });
      assert.equal(dashboard.status, 200);
      const page = await dashboard.text();
      assert.match(page, new RegExp(`<p id="resource">${id}</p>`));
      assert.match(page, /Plan: small/);
      const anonymous = await fetch(`${target.url}/dashboard/${id}`);
      assert.deepEqual([anonymous.status, await anonymous.json()], [401, { message: 'Sign in through the marketplace to open this dashboard' }]);
      const other = await fetch(`${target.url}/dashboard/h${'x'.repeat(28)}`, { headers: { cookie } });
      assert.equal(other.status, 403);
      assert.equal(typeof ((await other.json()) as { message?: unknown }).message, 'string');
    });

    it('answers EXAMPLE_MEASURES, /metrics, /healthz, /livez and /example/handler-calls', async () => {
      const id = `m${adapter.padEnd(28, '0')}`;
      assert.equal((await market.send(target, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' })).status, 201);
      const measures = await market.send(target, 'GET', `/v1/resources/${id}/measures?${PERIOD}`);
      assert.deepEqual((measures.body as { measures?: unknown }).measures, { 'bonnet-hours': 12 });
      const metrics = await fetch(`${target.url}/metrics`);
      assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
      assert.match(await metrics.text(), /^marketplace_requests_total\{[^}]*route="\/v1\/resources\/:id"[^}]*\} \d+/m);
      const health = await fetch(`${target.url}/healthz`);
      assert.deepEqual([health.status, ((await health.json()) as { status?: unknown }).status], [200, 'ok']);
      assert.deepEqual(await (await fetch(`${target.url}/livez`)).json(), { status: 'ok' });
      const calls = (await (await fetch(`${target.url}/example/handler-calls`)).json()) as Record<string, Record<string, number>>;
      assert.equal(calls.provision?.[id], 1);
      const unknown = await fetch(`${target.url}/elsewhere`);
      assert.equal(unknown.status, 404);
    });

    it('passes the acceptance suite', async () => {
      const report = await runAcceptance({ url: target.url, masterPrivateKey: market.masterPrivateKey, ...SETTINGS, ...CLIENT, connector, requestTimeoutMs: 10_000 });
      assert.deepEqual(failedIds(report), [], explain(report));
      assert.equal(report.summary.skipped, 0);
    });
  });
}

describe('EXAMPLE_ADAPTER', () => {
  it('defaults to express and refuses anything else, naming the variable and the values', () => {
    assert.equal(exampleAdapter(undefined), 'express');
    assert.equal(exampleAdapter(''), 'express');
    for (const value of EXAMPLE_ADAPTERS) assert.equal(exampleAdapter(value), value satisfies ExampleAdapter);
    for (const value of ['koa', 'Express', 'fastify ', 'node']) {
      assert.throws(() => exampleAdapter(value), (error: unknown) => error instanceof Error && /^EXAMPLE_ADAPTER must be one of express, fastify, fetch/.test(error.message) && error.message.includes(JSON.stringify(value)));
    }
  });

  it('stops `npm run example` at start, before opening anything, with that message', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/provider.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', PORT: '0', EXAMPLE_ADAPTER: 'koa', STORE: 'sqlite:/nonexistent/never-created.db' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 1);
    assert.match(stderr, /EXAMPLE_ADAPTER must be one of express, fastify, fetch \(default express\), got "koa"/);
    assert.doesNotMatch(stdout, /listening/);
  });
});

describe('`npm run example` on each host', () => {
  const started: ExampleProcess[] = [];
  after(() => stopAll(started));

  it('starts, answers a signed request and /healthz, and stops on SIGTERM after finishing', async () => {
    const market = marketplace();
    for (const adapter of EXAMPLE_ADAPTERS) {
      const example = await startExample({ EXAMPLE_ADAPTER: adapter, STORE: 'memory', MASTER_PUBLIC_KEY: market.masterPublicKey }, { name: adapter });
      started.push(example);
      assert.match(example.stdout(), new RegExp(`example provider listening on http://127\\.0\\.0\\.1:\\d+ \\(${adapter}\\)`));
      const id = `p${adapter.padEnd(28, '0')}`;
      const answer = await market.send(example, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });
      assert.equal(answer.status, 201, `${adapter}: ${answer.text}`);
      const exit = await example.stop();
      assert.deepEqual(exit, { code: 0, signal: null }, `${adapter} exits cleanly`);
      assert.match(example.stdout(), /stopped \(requests finished, outbox stopped, store closed\)/);
    }
  });
});
