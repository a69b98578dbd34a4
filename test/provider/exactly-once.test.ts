import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { accepted, marketplaceRouter, memoryStore, NotFoundError, type MarketplaceRouterOptions, type ProviderHandlers, type Store } from '../../src/index.js';
import type { CredentialRecord } from '../../src/store/types.js';
import { createFakeConnector, type FakeConnector, type FakeConnectorServer } from '../../src/testkit/fake-connector.js';
import { listen, marketplaceClient, readAnswer, type Running } from '../helpers/http.js';
import { openPostgresStore, postgresSkipReason } from '../helpers/postgres.js';
import { deferred, waitFor } from '../outbox/helpers.js';
import { sqliteStore } from '../../src/store/sqlite.js';

/**
 * Exactly-once through the public API (issue #11): replayed signed requests, a resource's deletion
 * racing its credentials, pending credential operations orphaned by that deletion, and handlers
 * handed over to the callback at the wait limit. Concurrent steps are ordered by latches, never by
 * sleeps. Each case runs on every store below: adding a store is one line.
 */
const KEY = Buffer.alloc(32, 7).toString('base64');
const pgSkip = await postgresSkipReason();
const STORES: { name: string; skip?: string | false; open: () => Promise<{ store: Store; cleanup: () => Promise<void> }> }[] = [
  { name: 'memory', open: async () => ({ store: memoryStore(), cleanup: async () => undefined }) },
  { name: 'sqlite', open: async () => openSqlite() },
  { name: 'postgres', skip: pgSkip, open: async () => openPostgres() },
];

async function openSqlite() {
  const dir = mkdtempSync(join(tmpdir(), 'em-exactly-once-'));
  const store = sqliteStore({ path: join(dir, 'provider.db'), encryptionKey: KEY, logger: false });
  return { store, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** A store in its own schema, dropped by `cleanup` (the router closes the store). */
const openPostgres = async (schema?: string) => openPostgresStore(KEY, { schema });

const CLIENT = { clientId: 'provider-client', clientSecret: 'provider-client-secret-value' };
let seq = 0;
const newId = (prefix = 'r') => `${prefix}${Date.now().toString(36)}${(seq++).toString(36)}`.padEnd(29, '0').slice(0, 29);
const provisionBody = (id: string, plan = 'small') => ({ id, product: 'bonnets', plan, region: 'all::global' });

/** A store that reports every claim answered `blocked` (the parent/child exclusion at work). */
function observed(store: Store): { store: Store; blocked: () => Promise<void> } {
  let next = deferred();
  const wrapped: Store = Object.create(store) as Store;
  wrapped.claimOperation = async (input) => {
    const result = await store.claimOperation(input);
    if (result.outcome === 'blocked') {
      next.resolve();
      next = deferred();
    }
    return result;
  };
  return { store: wrapped, blocked: () => next.promise };
}

interface Calls {
  provision: number;
  changePlan: number;
  deprovision: CredentialRecord[][];
  provisionCredentials: number;
  deprovisionCredentials: number;
}

/** Handlers that record their calls; each may be told to wait on a latch the test opens. */
function recordingHandlers() {
  const calls: Calls = { provision: 0, changePlan: 0, deprovision: [], provisionCredentials: 0, deprovisionCredentials: 0 };
  const gates: Partial<Record<keyof Calls, { entered: ReturnType<typeof deferred<void>>; open: ReturnType<typeof deferred<void>> }>> = {};
  const gate = (name: keyof Calls) => {
    const g = { entered: deferred(), open: deferred() };
    gates[name] = g;
    return g;
  };
  const pass = async (name: keyof Calls) => {
    const g = gates[name];
    if (g === undefined) return;
    delete gates[name];
    g.entered.resolve();
    await g.open.promise;
  };
  const behaviour = { asyncCredentials: false };
  const handlers: ProviderHandlers = {
    async provision({ plan }) {
      calls.provision++;
      await pass('provision');
      return `Your ${plan} bonnet is ready`;
    },
    async changePlan({ plan }) {
      calls.changePlan++;
      await pass('changePlan');
      return `Resized to ${plan}`;
    },
    async deprovision({ credentials }) {
      calls.deprovision.push(credentials);
      await pass('deprovision');
    },
    async provisionCredentials({ id }) {
      calls.provisionCredentials++;
      await pass('provisionCredentials');
      if (behaviour.asyncCredentials) return accepted('Issuing credentials');
      return { credentials: { BONNETS_URL: `https://${id}:s3cret@bonnets.example` } };
    },
    async deprovisionCredentials() {
      calls.deprovisionCredentials++;
      await pass('deprovisionCredentials');
    },
  };
  return { handlers, calls, gate, behaviour };
}

for (const { name, open, skip = false } of STORES) {
  describe(`exactly once (${name} store)`, { skip }, () => {
    let fake: FakeConnector;
    let fakeServer: FakeConnectorServer;
    before(async () => {
      fake = createFakeConnector(CLIENT);
      fakeServer = await fake.listen();
    });
    after(async () => fake.close());

    async function harness(options: Partial<MarketplaceRouterOptions> = {}) {
      const opened = await open();
      const watched = observed(opened.store);
      const recording = recordingHandlers();
      const client = marketplaceClient();
      const router = marketplaceRouter({
        handlers: recording.handlers,
        store: watched.store,
        masterKey: client.masterPublicKey,
        connector: { url: fakeServer.url, ...CLIENT },
        outbox: { pollIntervalMs: 20, backoff: { baseMs: 5, maxMs: 40 } },
        logger: false,
        ...options,
      });
      const app = express();
      app.use(router);
      const target: Running = await listen(app);
      const send = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => client.send(target, method, path, body, headers);
      /** Signs a request once; every call sends the very same bytes (a captured request replayed). */
      const capture = (method: string, path: string, body: unknown) => {
        const bytes = Buffer.from(JSON.stringify(body));
        const headers = client.signer.sign({ method, url: path, headers: { 'content-type': 'application/json' }, body: bytes, host: target.host });
        return async () => readAnswer(await fetch(target.url + path, { method, headers, body: bytes }));
      };
      const callbackHeaders = (callbackId: string) => ({ 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) });
      return {
        ...recording,
        router,
        store: opened.store,
        blocked: watched.blocked,
        send,
        capture,
        callbackHeaders,
        close: async () => {
          await target.close();
          await router.close();
          await opened.cleanup();
        },
      };
    }

    it('answers a replayed signed PATCH with its recorded answer: no handler, no state change', async () => {
      const h = await harness();
      try {
        const id = newId();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        const toLarge = h.capture('PATCH', `/v1/resources/${id}`, { plan: 'large' });
        const first = await toLarge();
        assert.deepEqual([first.status, first.body], [200, { message: 'Resized to large' }]);
        assert.equal((await h.send('PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200);

        const replayed = await toLarge();
        assert.deepEqual([replayed.status, replayed.body], [200, { message: 'Resized to large' }]);
        assert.equal(h.calls.changePlan, 2, 'the replay ran no handler');
        assert.equal((await h.store.getResource(id))?.plan, 'small', 'the later plan change stands');
      } finally {
        await h.close();
      }
    });

    it('answers a replayed refused PATCH with its refusal, even once the resource exists', async () => {
      const h = await harness();
      try {
        const id = newId();
        const early = h.capture('PATCH', `/v1/resources/${id}`, { plan: 'large' });
        assert.equal((await early()).status, 404);
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        assert.equal((await early()).status, 404);
        assert.equal(h.calls.changePlan, 0);
        assert.equal((await h.store.getResource(id))?.plan, 'small');
      } finally {
        await h.close();
      }
    });

    it('hands deprovision every credential set that exists when it runs', async () => {
      const h = await harness();
      try {
        const id = newId();
        await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        const credentialIds = [newId('c'), newId('c')];
        for (const c of credentialIds) assert.equal((await h.send('PUT', `/v1/credentials/${c}`, { id: c, resource_id: id })).status, 201);
        assert.equal((await h.send('DELETE', `/v1/resources/${id}`)).status, 204);
        assert.deepEqual(h.calls.deprovision.map((list) => list.map((c) => c.id).sort()), [[...credentialIds].sort()]);
      } finally {
        await h.close();
      }
    });

    it('never provisions credentials for a resource whose DELETE is running: the PUT waits, then answers 404', async () => {
      const h = await harness();
      try {
        const id = newId();
        await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        const gate = h.gate('deprovision');
        const deleting = h.send('DELETE', `/v1/resources/${id}`);
        await gate.entered.promise;

        const credentialId = newId('c');
        const blocked = h.blocked();
        const credential = h.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id });
        await blocked;
        gate.open.resolve();

        assert.equal((await deleting).status, 204);
        assert.equal((await credential).status, 404);
        assert.equal(h.calls.provisionCredentials, 0);
        assert.equal(await h.store.getCredential(credentialId), undefined);
      } finally {
        await h.close();
      }
    });

    it('answers 404 to a credential PUT after its resource was deleted, without calling the handler', async () => {
      const h = await harness();
      try {
        const id = newId();
        await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        assert.equal((await h.send('DELETE', `/v1/resources/${id}`)).status, 204);
        const credentialId = newId('c');
        assert.equal((await h.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id })).status, 404);
        assert.equal(h.calls.provisionCredentials, 0);
      } finally {
        await h.close();
      }
    });

    it('makes a DELETE wait for a running credential PUT, then deprovisions that credential too', async () => {
      const h = await harness();
      try {
        const id = newId();
        await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        const gate = h.gate('provisionCredentials');
        const credentialId = newId('c');
        const credential = h.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id });
        await gate.entered.promise;

        const blocked = h.blocked();
        const deleting = h.send('DELETE', `/v1/resources/${id}`);
        await blocked;
        assert.equal(h.calls.deprovision.length, 0, 'deprovision waits for the credential');
        gate.open.resolve();

        assert.equal((await credential).status, 201);
        assert.equal((await deleting).status, 204);
        assert.deepEqual(h.calls.deprovision.map((list) => list.map((c) => c.id)), [[credentialId]]);
        assert.equal(await h.store.getCredential(credentialId), undefined);
      } finally {
        await h.close();
      }
    });

    it('closes a pending credential operation with an error callback when its resource is deleted', async () => {
      const h = await harness();
      try {
        const id = newId();
        await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        h.behaviour.asyncCredentials = true;
        const credentialId = newId('c');
        const callbackId = newId('cb');
        const headers = h.callbackHeaders(callbackId);
        const pending = await h.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id }, headers);
        assert.equal(pending.status, 202);

        assert.equal((await h.send('DELETE', `/v1/resources/${id}`)).status, 204);
        const delivered = await fake.waitForCallback(callbackId, 10_000);
        assert.deepEqual(delivered.body, { state: 'error', message: 'The resource was deprovisioned' });

        assert.equal((await h.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id }, headers)).status, 404);
        await assert.rejects(
          h.router.complete({ entity: 'credential', id: credentialId }, { state: 'done', credentials: { BONNETS_URL: 'https://late.example' } }),
          (error: unknown) => error instanceof NotFoundError && error.code === 'ERR_OPERATION_NOT_PENDING',
        );
        assert.equal(h.calls.provisionCredentials, 1);
      } finally {
        await h.close();
      }
    });

    it('hands a handler past handlerTimeoutMs to the callback: 202 at the deadline, the outcome delivered when it finishes', async () => {
      // The case is a 3 s handler and a 1000 ms limit; the handler here waits on a latch the
      // test opens once it has seen the 202, so the test does not depend on the machine's speed.
      const h = await harness({ handlerTimeoutMs: 1000 });
      try {
        const id = newId();
        const callbackId = newId('cb');
        const gate = h.gate('provision');
        const first = await h.send('PUT', `/v1/resources/${id}`, provisionBody(id), h.callbackHeaders(callbackId));
        assert.equal(first.status, 202);
        assert.match((first.body as { message: string }).message, /callback/);
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id), h.callbackHeaders(callbackId))).status, 202, 'a repeat meanwhile answers 202');
        assert.equal(await h.store.getResource(id), undefined);

        gate.open.resolve();
        const delivered = await fake.waitForCallback(callbackId, 10_000);
        assert.deepEqual(delivered.body, { state: 'done', message: 'Your small bonnet is ready' });
        assert.equal((await h.store.getResource(id))?.plan, 'small');
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        assert.equal(h.calls.provision, 1);
      } finally {
        await h.close();
      }
    });

    it('hands a slow credential handler to the callback with its values', async () => {
      const h = await harness({ handlerTimeoutMs: 1000 });
      try {
        const id = newId();
        await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        const credentialId = newId('c');
        const callbackId = newId('cb');
        const gate = h.gate('provisionCredentials');
        const first = await h.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id }, h.callbackHeaders(callbackId));
        assert.equal(first.status, 202);
        gate.open.resolve();
        const delivered = await fake.waitForCallback(callbackId, 10_000);
        assert.deepEqual(delivered.body, { state: 'done', message: 'Credentials provisioned', credentials: { BONNETS_URL: `https://${credentialId}:s3cret@bonnets.example` } });
        assert.equal((await h.store.getCredential(credentialId))?.resourceId, id);
      } finally {
        await h.close();
      }
    });

    it('keeps the 503 without callback headers, and the stored outcome answers the retry', async () => {
      const h = await harness({ handlerTimeoutMs: 1000 });
      try {
        const id = newId();
        const gate = h.gate('provision');
        const first = await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        assert.equal(first.status, 503);
        gate.open.resolve();
        // The handler commits on its own; the retry then finds the outcome.
        await waitFor(async () => (await h.store.getResource(id)) !== undefined, 'the handler to commit');
        const retried = await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        assert.deepEqual([retried.status, retried.body], [201, { message: 'Your small bonnet is ready' }]);
        assert.equal(h.calls.provision, 1);
      } finally {
        await h.close();
      }
    });
  });
}

describe('exactly once across two instances on one PostgreSQL schema', { skip: pgSkip }, () => {
  /** Two routers (two "processes") over one database, signed by one marketplace. */
  async function pair() {
    const first = await openPostgres();
    const second = await openPostgres(first.schema);
    const client = marketplaceClient();
    const instances = [first, second].map((opened) => {
      const watched = observed(opened.store);
      const recording = recordingHandlers();
      const router = marketplaceRouter({ handlers: recording.handlers, store: watched.store, masterKey: client.masterPublicKey, logger: false });
      const app = express();
      app.use(router);
      return { ...recording, router, blocked: watched.blocked, app };
    });
    const targets = await Promise.all(instances.map((i) => listen(i.app)));
    const [a, b] = instances.map((instance, n) => ({
      ...instance,
      send: (method: string, path: string, body?: unknown) => client.send(targets[n]!, method, path, body),
    }));
    return {
      a: a!,
      b: b!,
      store: first.store,
      close: async () => {
        for (const target of targets) await target.close();
        for (const instance of instances) await instance.router.close();
        await first.cleanup();
      },
    };
  }

  it('a credential PUT on one instance waits for the DELETE running on the other, then answers 404', async () => {
    const p = await pair();
    try {
      const id = newId();
      assert.equal((await p.a.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      const gate = p.a.gate('deprovision');
      const deleting = p.a.send('DELETE', `/v1/resources/${id}`);
      await gate.entered.promise;
      const credentialId = newId('c');
      const blocked = p.b.blocked();
      const credential = p.b.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id });
      await blocked;
      gate.open.resolve();
      assert.equal((await deleting).status, 204);
      assert.equal((await credential).status, 404);
      assert.equal(p.b.calls.provisionCredentials, 0);
    } finally {
      await p.close();
    }
  });

  it('a DELETE on one instance waits for the credential PUT running on the other and deprovisions it too', async () => {
    const p = await pair();
    try {
      const id = newId();
      assert.equal((await p.a.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      const gate = p.a.gate('provisionCredentials');
      const credentialId = newId('c');
      const credential = p.a.send('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: id });
      await gate.entered.promise;
      const blocked = p.b.blocked();
      const deleting = p.b.send('DELETE', `/v1/resources/${id}`);
      await blocked;
      gate.open.resolve();
      assert.equal((await credential).status, 201);
      assert.equal((await deleting).status, 204);
      assert.deepEqual(p.b.calls.deprovision.map((list) => list.map((c) => c.id)), [[credentialId]]);
      assert.equal(await p.store.getCredential(credentialId), undefined);
    } finally {
      await p.close();
    }
  });
});
