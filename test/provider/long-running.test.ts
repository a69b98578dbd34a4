import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { accepted, marketplaceRouter, memoryStore, type MarketplaceRouterOptions, type ProviderHandlers, type Store } from '../../src/index.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { sqliteStore } from '../../src/store/sqlite.js';
import { createFakeConnector, type FakeConnector, type FakeConnectorServer } from '../../src/testkit/fake-connector.js';
import { listen, logCapture, marketplaceClient, type Running } from '../helpers/http.js';
import { waitFor } from '../outbox/helpers.js';

const CLIENT = { clientId: 'provider-client', clientSecret: 'provider-client-secret-value' };
const KEY = Buffer.alloc(32, 7).toString('base64');
let seq = 0;
const newId = (prefix = 'r') => `${prefix}${Date.now().toString(36)}${(seq++).toString(36)}`.padEnd(29, '0').slice(0, 29);
const fastOutbox = { pollIntervalMs: 20, backoff: { baseMs: 5, maxMs: 40 } } as const;

/** Every operation answers 202; the test completes it through router.complete. */
const asyncHandlers: ProviderHandlers = {
  provision: () => accepted('Knitting your bonnet'),
  changePlan: () => accepted('Resizing your bonnet'),
  deprovision: () => accepted('Unravelling your bonnet'),
  provisionCredentials: () => accepted('Issuing credentials'),
  deprovisionCredentials: () => accepted('Revoking credentials'),
};

interface Setup {
  fake: FakeConnector;
  fakeServer: FakeConnectorServer;
  target: Running;
  router: ReturnType<typeof marketplaceRouter>;
  client: ReturnType<typeof marketplaceClient>;
  logs: ReturnType<typeof logCapture>;
  close(): Promise<void>;
}

async function setup(fake: FakeConnector, fakeServer: FakeConnectorServer, options: Partial<MarketplaceRouterOptions> = {}, client = marketplaceClient()): Promise<Setup> {
  const logs = logCapture();
  const router = marketplaceRouter({
    handlers: asyncHandlers,
    store: memoryStore(),
    masterKey: client.masterPublicKey,
    connector: { url: fakeServer.url, ...CLIENT },
    outbox: fastOutbox,
    logger: createRedactingLogger(logs.stream, 'debug'),
    ...options,
  });
  const app = express();
  app.use(router);
  const target = await listen(app);
  return { fake, fakeServer, target, router, client, logs, close: async () => { await target.close(); await router.close(); } };
}

const body = (id: string, plan = 'small') => ({ id, product: 'bonnets', plan, region: 'all::global' });

describe('long-running operations with callbacks', () => {
  let fake: FakeConnector;
  let fakeServer: FakeConnectorServer;
  let s: Setup;
  before(async () => {
    fake = createFakeConnector(CLIENT);
    fakeServer = await fake.listen();
    s = await setup(fake, fakeServer);
  });
  after(async () => {
    await s.close();
    await fake.close();
  });

  const callbackHeaders = (callbackId: string) => ({ 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) });

  it('provisions asynchronously: 202, repeat 202, callback done, then the stored answer', async () => {
    const id = newId();
    const callbackId = newId('c');
    const first = await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(callbackId));
    assert.equal(first.status, 202);
    assert.deepEqual(first.body, { message: 'Knitting your bonnet' });
    assert.equal((await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(callbackId))).status, 202);
    await s.router.complete({ entity: 'resource', id }, { state: 'done', message: 'Your bonnet is ready' });
    const callback = await fake.waitForCallback(callbackId, 5000);
    assert.deepEqual(callback.body, { state: 'done', message: 'Your bonnet is ready' });
    assert.equal(callback.authOk, true);
    const after = await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(callbackId));
    assert.equal(after.status, 201);
  });

  it('refuses to complete an operation abandoned past its 24 h deadline, and changes nothing', async () => {
    let offset = 0;
    const late = await setup(fake, fakeServer, { now: () => Date.now() + offset });
    try {
      const id = newId();
      const callbackId = newId('c');
      assert.equal((await late.client.send(late.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(callbackId))).status, 202);
      offset = 24 * 60 * 60 * 1000 + 1;
      await assert.rejects(late.router.complete({ entity: 'resource', id }, { state: 'done' }), { code: 'ERR_OPERATION_NOT_PENDING' });
      assert.equal(await late.router.store.getResource(id), undefined);
      assert.deepEqual((await late.router.store.listDeliveries!()).filter((d) => d.callbackId === callbackId), []);
    } finally {
      await late.close();
    }
  });

  it('changes plan, provisions credentials (values in the callback) and deprovisions asynchronously', async () => {
    const id = newId();
    const create = newId('c');
    await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(create));
    await s.router.complete({ entity: 'resource', id }, { state: 'done' });
    await fake.waitForCallback(create);

    const resize = newId('c');
    assert.equal((await s.client.send(s.target, 'PATCH', `/v1/resources/${id}`, { plan: 'large' }, callbackHeaders(resize))).status, 202);
    await s.router.complete({ entity: 'resource', id }, { state: 'done', message: 'Resized' });
    assert.deepEqual((await fake.waitForCallback(resize)).body, { state: 'done', message: 'Resized' });
    assert.equal((await s.router.store.getResource(id))?.plan, 'large');

    const credentialId = newId('k');
    const issue = newId('c');
    assert.equal((await s.client.send(s.target, 'PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id }, callbackHeaders(issue))).status, 202);
    const credentials = { BONNETS_URL: `https://u1:pw-${credentialId}@bonnets.example/${id}` };
    await s.router.complete({ entity: 'credential', id: credentialId }, { state: 'done', message: 'Credentials ready', credentials });
    assert.deepEqual((await fake.waitForCallback(issue)).body, { state: 'done', message: 'Credentials ready', credentials });
    const repeat = await s.client.send(s.target, 'PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id }, callbackHeaders(issue));
    assert.equal(repeat.status, 201);
    assert.deepEqual((repeat.body as { credentials: unknown }).credentials, credentials);

    const remove = newId('c');
    assert.equal((await s.client.send(s.target, 'DELETE', `/v1/resources/${id}`, undefined, callbackHeaders(remove))).status, 202);
    await s.router.complete({ entity: 'resource', id }, { state: 'done' });
    assert.equal(((await fake.waitForCallback(remove)).body as { state: string }).state, 'done');
    assert.equal((await s.client.send(s.target, 'DELETE', `/v1/resources/${id}`)).status, 404);
    assert.equal(s.logs.text().includes(`pw-${credentialId}`), false, 'credential value in the log');
  });

  it('reports a failed provision and leaves nothing behind for the retry', async () => {
    const id = newId();
    const callbackId = newId('c');
    await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(callbackId));
    await s.router.complete({ entity: 'resource', id }, { state: 'error', message: 'Out of wool in this region' });
    assert.deepEqual((await fake.waitForCallback(callbackId)).body, { state: 'error', message: 'Out of wool in this region' });
    assert.equal(await s.router.store.getResource(id), undefined);
    // The marketplace's retry starts clean: a new operation, answered 202 again.
    assert.equal((await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(newId('c')))).status, 202);
  });

  it('refuses a callback URL outside the connector origin before any work', async () => {
    const id = newId();
    for (const url of ['https://evil.example/v1/callbacks/x', 'http://127.0.0.2:1/v1/callbacks/x', `http://user:pw@${new URL(fakeServer.url).host}/v1/callbacks/x`]) {
      const answer = await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), { 'x-callback-id': 'abc', 'x-callback-url': url });
      assert.equal(answer.status, 400, url);
      assert.match((answer.body as { message: string }).message, /X-Callback-URL/);
    }
    assert.equal((await s.router.pendingOperations()).some((op) => op.targetId === id), false);
  });

  it('retries the callback through three 500s and a dropped connection', async () => {
    const id = newId();
    const callbackId = newId('c');
    await s.client.send(s.target, 'PUT', `/v1/resources/${id}`, body(id), callbackHeaders(callbackId));
    fake.failNext('callbacks', 3, { status: 500 });
    fake.failNext('callbacks', 1, { drop: true });
    await s.router.complete({ entity: 'resource', id }, { state: 'done', message: 'Ready after all' });
    const delivered = await fake.waitForCallback(callbackId, 10_000);
    assert.deepEqual(delivered.body, { state: 'done', message: 'Ready after all' });
    const attempts = fake.callbacks.filter((c) => c.id === callbackId).map((c) => c.status);
    assert.deepEqual(attempts, [500, 500, 500, 'dropped', 204]);
  });
});

describe('pending deliveries across a restart', () => {
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), 'em-restart-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('delivers, after a restart, a callback that could not be sent before it', async () => {
    const fake = createFakeConnector(CLIENT);
    const fakeServer = await fake.listen();
    const client = marketplaceClient();
    const path = join(dir, 'provider.db');
    const open = (): Store => sqliteStore({ path, encryptionKey: KEY });
    try {
      const first = await setup(fake, fakeServer, { store: open() }, client);
      const id = newId();
      const callbackId = newId('c');
      fake.setDown('callbacks', { status: 503 });
      await first.client.send(first.target, 'PUT', `/v1/resources/${id}`, body(id), { 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) });
      await first.router.complete({ entity: 'resource', id }, { state: 'done', message: 'Ready' });
      // One attempt fails against the down connector before the process goes away.
      await waitFor(async () => (await first.router.store.listDeliveries!()).some((d) => d.attempts > 0), 'a failed delivery attempt');
      await first.close(); // the process goes away with the delivery still pending
      assert.equal(fake.acceptedCallback(callbackId), undefined);

      fake.setUp('callbacks');
      const second = await setup(fake, fakeServer, { store: open() }, client);
      try {
        const delivered = await fake.waitForCallback(callbackId, 10_000);
        assert.deepEqual(delivered.body, { state: 'done', message: 'Ready' });
        assert.equal((await second.router.store.getResource(id))?.message, 'Ready');
      } finally {
        await second.close();
      }
    } finally {
      await fake.close();
    }
  });
});
