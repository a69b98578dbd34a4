import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { BadRequestError, marketplaceRouter, memoryStore, type Catalog, type MarketplaceRouter, type ProviderHandlers, type Store } from '../../src/index.js';
import { createSigner } from '../../src/testkit/signer.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { listen, marketplaceClient, readAnswer, type Running } from '../helpers/http.js';
import { openPostgresStore, postgresSkipReason } from '../helpers/postgres.js';
import { deferred, waitFor } from '../outbox/helpers.js';
import { sqliteStore } from '../../src/store/sqlite.js';

/**
 * Exactly-once on the failure paths (issue 19), through the router, on every store: whatever the
 * first answer to a signed request was (a 409, a 500, a 503 while the handler ran on, a 400 from
 * the `validate` hook or the catalog, a 404), the same signed request sent again answers it (or
 * the state's answer where that needs no handler) and never runs a handler; a new request (a new
 * Date, so a new signature) keeps the usual rules. Concurrent steps are ordered by latches.
 */
const KEY = Buffer.alloc(32, 9).toString('base64');
const pgSkip = await postgresSkipReason();
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const STORES: { name: string; skip?: string | false; open: (schema?: string) => Promise<{ store: Store; schema?: string; cleanup: () => Promise<void> }> }[] = [
  { name: 'memory', open: async () => ({ store: memoryStore(), cleanup: async () => undefined }) },
  {
    name: 'sqlite',
    open: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'em-failure-replays-'));
      dirs.push(dir);
      return { store: sqliteStore({ path: join(dir, 'provider.db'), encryptionKey: KEY, logger: false }), cleanup: async () => undefined };
    },
  },
  { name: 'postgres', skip: pgSkip, open: async (schema) => openPostgres(schema) },
];

/** A store in its own schema, dropped by `cleanup` (the router closes the store). */
const openPostgres = async (schema?: string) => openPostgresStore(KEY, { schema });

const CATALOG: Catalog = { bonnets: { plans: ['small', 'large', 'locked'] } };
let seq = 0;
const newId = (prefix = 'r') => `${prefix}${Date.now().toString(36)}${(seq++).toString(36)}`.padEnd(29, '0').slice(0, 29);
const provisionBody = (id: string, plan = 'small') => ({ id, product: 'bonnets', plan, region: 'all::global' });

type Kind = 'provision' | 'changePlan' | 'provisionCredentials';

/** Handlers that count calls, can be made to throw once, and can wait on a latch the test opens. */
function recordingHandlers() {
  const calls: Record<Kind, number> = { provision: 0, changePlan: 0, provisionCredentials: 0 };
  const failNext = new Set<Kind>();
  const gates: Partial<Record<Kind, { entered: ReturnType<typeof deferred<void>>; open: ReturnType<typeof deferred<void>> }>> = {};
  const step = async (kind: Kind): Promise<void> => {
    calls[kind]++;
    const gate = gates[kind];
    if (gate !== undefined) {
      delete gates[kind];
      gate.entered.resolve();
      await gate.open.promise;
    }
    if (failNext.delete(kind)) throw new Error('the provider backend fell over');
  };
  const handlers: ProviderHandlers = {
    provision: async ({ plan }) => (await step('provision'), `Your ${plan} bonnet is ready`),
    changePlan: async ({ plan }) => (await step('changePlan'), `Resized to ${plan}`),
    deprovision: async () => undefined,
    provisionCredentials: async ({ id }) => (await step('provisionCredentials'), { credentials: { BONNETS_URL: `https://${id}@bonnets.example` } }),
    deprovisionCredentials: async () => undefined,
  };
  const gate = (kind: Kind) => (gates[kind] = { entered: deferred(), open: deferred() });
  return { handlers, calls, failNext, gate };
}

/**
 * One provider (or several, with `instances`) on one store. The clock is real time plus an offset
 * the test moves: `tick()` makes the next request carry a new Date (a new signature), as the
 * marketplace's own retry does; requests within one second carry the same Date.
 */
async function harness(open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>, options: { handlerTimeoutMs?: number } = {}) {
  const opened = await open();
  let offset = 0;
  const now = () => Date.now() + offset;
  const client = marketplaceClient({ now });
  const recording = recordingHandlers();
  const hook = { refusePlan: undefined as string | undefined };
  const routers: MarketplaceRouter[] = [];
  const make = (catalog: Catalog) => {
    const router = marketplaceRouter({
      handlers: recording.handlers,
      store: opened.store,
      masterKey: client.masterPublicKey,
      catalog,
      validate: ({ plan }) => {
        if (plan === hook.refusePlan) throw new BadRequestError(`Plan ${plan} is not available for this account`, 'ERR_PLAN_CHANGE_REFUSED');
      },
      now,
      logger: false,
      ...(options.handlerTimeoutMs === undefined ? {} : { handlerTimeoutMs: options.handlerTimeoutMs }),
    });
    routers.push(router);
    return router;
  };
  // The router in service; `redeploy` swaps in another (a new catalog) on the same store and port.
  let current = make(CATALOG);
  const app = express();
  app.use((req: Request, res: Response, next: NextFunction) => current(req, res, next));
  const target: Running = await listen(app);
  const send = (method: string, path: string, body?: unknown) => client.send(target, method, path, body);
  /** Signs a request once; every call sends the very same bytes (a captured request replayed, or the marketplace re-sending within the same second). */
  const capture = (method: string, path: string, body?: unknown) => {
    const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
    const headers = client.signer.sign({ method, url: path, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: bytes, host: target.host });
    return async () => readAnswer(await fetch(target.url + path, { method, headers, ...(bytes.length > 0 ? { body: bytes } : {}) }));
  };
  return {
    ...recording,
    store: opened.store,
    hook,
    send,
    capture,
    tick: () => {
      offset += 1000;
    },
    redeploy: (catalog: Catalog) => {
      current = make(catalog);
    },
    close: async () => {
      await target.close();
      for (const router of routers) await router.close();
      await opened.cleanup();
    },
  };
}

const status = (answer: { status: number; body: unknown }) => [answer.status, answer.body];

for (const { name, open, skip = false } of STORES) {
  describe(`failure paths answer the same, never run twice (${name} store)`, { skip }, () => {
    it('409 first: a PATCH refused while another ran answers 409 when replayed, whatever came after (issue 19, 1)', async () => {
      const h = await harness(open);
      try {
        const id = newId();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        const gate = h.gate('changePlan');
        const toLarge = h.send('PATCH', `/v1/resources/${id}`, { plan: 'large' });
        await gate.entered.promise;
        const toLocked = h.capture('PATCH', `/v1/resources/${id}`, { plan: 'locked' });
        const refused = await toLocked();
        assert.deepEqual(status(refused), [409, { message: 'Another operation on this entity is in progress' }]);
        gate.open.resolve();
        assert.equal((await toLarge).status, 200);

        assert.deepEqual(status(await toLocked()), status(refused), 'the replay answers its 409');
        assert.equal((await h.store.getResource(id))?.plan, 'large');
        h.tick();
        assert.equal((await h.send('PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200);
        assert.deepEqual(status(await toLocked()), status(refused));
        assert.equal((await h.store.getResource(id))?.plan, 'small', 'never locked');
        assert.equal(h.calls.changePlan, 2, 'large, then small: the refused request never ran');
      } finally {
        await h.close();
      }
    });

    it('500 first: a PATCH whose handler threw answers 500 when replayed and undoes nothing (issue 19, 2)', async () => {
      const h = await harness(open);
      try {
        const id = newId();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        h.failNext.add('changePlan');
        const failing = h.capture('PATCH', `/v1/resources/${id}`, { plan: 'large' });
        const failed = await failing();
        assert.deepEqual(status(failed), [500, { message: 'Internal error' }]);
        assert.equal(await h.store.getOperation(`resource:${id}`), undefined, 'no claim left behind');

        h.tick(); // the marketplace retries later: a new Date, a new signature
        assert.deepEqual(status(await h.send('PATCH', `/v1/resources/${id}`, { plan: 'large' })), [200, { message: 'Resized to large' }]);
        assert.equal((await h.send('PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200, 'the user downgrades');
        assert.deepEqual(status(await failing()), status(failed), 'the failed request replayed: its 500 again');
        assert.equal((await h.store.getResource(id))?.plan, 'small');
        assert.equal(h.calls.changePlan, 3, 'failed, retried, downgraded: no fourth run');
      } finally {
        await h.close();
      }
    });

    it('503 first, the handler failing on: the replay answers the outcome recorded at its end (500), never running again', async () => {
      const h = await harness(open, { handlerTimeoutMs: 1000 });
      try {
        const id = newId();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        const gate = h.gate('changePlan');
        h.failNext.add('changePlan');
        const slow = h.capture('PATCH', `/v1/resources/${id}`, { plan: 'large' });
        assert.deepEqual(status(await slow()), [503, { message: 'The operation is still in progress, retry later' }]);
        gate.open.resolve();
        await waitFor(async () => (await h.store.getOperation(`resource:${id}`)) === undefined, 'the handler to fail and release');

        assert.deepEqual(status(await slow()), [500, { message: 'Internal error' }]);
        h.tick();
        assert.equal((await h.send('PATCH', `/v1/resources/${id}`, { plan: 'large' })).status, 200);
        assert.equal((await h.send('PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200);
        assert.deepEqual(status(await slow()), [500, { message: 'Internal error' }]);
        assert.equal((await h.store.getResource(id))?.plan, 'small');
        assert.equal(h.calls.changePlan, 3);
      } finally {
        await h.close();
      }
    });

    it('503 first, the handler succeeding on: the replay answers its outcome (200) and a later change stands', async () => {
      const h = await harness(open, { handlerTimeoutMs: 1000 });
      try {
        const id = newId();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
        const gate = h.gate('changePlan');
        const slow = h.capture('PATCH', `/v1/resources/${id}`, { plan: 'large' });
        assert.equal((await slow()).status, 503);
        gate.open.resolve();
        await waitFor(async () => (await h.store.getResource(id))?.plan === 'large', 'the handler to commit');
        h.tick();
        assert.equal((await h.send('PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200);
        assert.deepEqual(status(await slow()), [200, { message: 'Resized to large' }]);
        assert.equal((await h.store.getResource(id))?.plan, 'small');
        assert.equal(h.calls.changePlan, 2);
      } finally {
        await h.close();
      }
    });

    it('validate-hook 400 first: a refused PUT or PATCH answers its 400 when replayed after the hook changed its mind', async () => {
      const h = await harness(open);
      try {
        const id = newId();
        h.hook.refusePlan = 'large';
        const put = h.capture('PUT', `/v1/resources/${id}`, provisionBody(id, 'large'));
        const refusedPut = await put();
        assert.deepEqual(status(refusedPut), [400, { message: 'Plan large is not available for this account' }]);

        const other = newId();
        assert.equal((await h.send('PUT', `/v1/resources/${other}`, provisionBody(other))).status, 201);
        const patch = h.capture('PATCH', `/v1/resources/${other}`, { plan: 'large' });
        const refusedPatch = await patch();
        assert.equal(refusedPatch.status, 400);

        h.hook.refusePlan = undefined;
        assert.deepEqual(status(await put()), status(refusedPut));
        assert.deepEqual(status(await patch()), status(refusedPatch));
        assert.equal(await h.store.getResource(id), undefined, 'never provisioned by a replay');
        assert.equal((await h.store.getResource(other))?.plan, 'small');
        assert.deepEqual([h.calls.provision, h.calls.changePlan], [1, 0]);
        h.tick();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id, 'large'))).status, 201, 'a new request follows the hook of now');
      } finally {
        await h.close();
      }
    });

    it('catalog 400 first: a PUT refused for an unknown plan answers 400 when replayed after a redeploy added the plan', async () => {
      const h = await harness(open);
      try {
        const id = newId();
        const put = h.capture('PUT', `/v1/resources/${id}`, provisionBody(id, 'huge'));
        const refused = await put();
        assert.deepEqual(status(refused), [400, { message: 'Unknown plan huge for product bonnets' }]);
        h.redeploy({ bonnets: { plans: ['small', 'large', 'huge'] } });
        assert.deepEqual(status(await put()), status(refused));
        assert.equal(await h.store.getResource(id), undefined);
        assert.equal(h.calls.provision, 0);
        h.tick();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id, 'huge'))).status, 201);
      } finally {
        await h.close();
      }
    });

    it('404 first: a credential PUT for a resource not yet there answers 404 when replayed once it exists', async () => {
      const h = await harness(open);
      try {
        const resourceId = newId();
        const credentialId = newId('c');
        const put = h.capture('PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: resourceId });
        const refused = await put();
        assert.deepEqual(status(refused), [404, { message: 'Resource not found' }]);
        assert.equal((await h.send('PUT', `/v1/resources/${resourceId}`, provisionBody(resourceId))).status, 201);
        assert.deepEqual(status(await put()), status(refused));
        assert.equal(await h.store.getCredential(credentialId), undefined);
        assert.equal(h.calls.provisionCredentials, 0);
      } finally {
        await h.close();
      }
    });

    it('the marketplace re-sending within the same second sends the same signature and gets the recorded answer', async () => {
      const h = await harness(open);
      try {
        const id = newId();
        h.failNext.add('provision');
        // Within one second the same request signs to the same bytes: one request to the provider.
        const failed = await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        assert.equal(failed.status, 500);
        const again = await h.send('PUT', `/v1/resources/${id}`, provisionBody(id));
        // The clock may have crossed a second between the two: then it was a new request, and ran.
        if (h.calls.provision === 1) assert.deepEqual(status(again), status(failed), 'same second: the recorded 500, no second run');
        else assert.equal(again.status, 201);
        h.tick();
        assert.equal((await h.send('PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201, 'a second later: a new request, provisioned');
      } finally {
        await h.close();
      }
    });
  });
}

describe('a re-sent request within the same second is byte-identical', () => {
  it('signs to the same X-Signature (Ed25519 is deterministic, Date has second resolution)', () => {
    const master = generateKeyPair();
    const live = generateKeyPair();
    let at = Date.parse('2030-01-01T10:00:00.100Z');
    const signer = createSigner({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, now: () => at });
    const request = { method: 'PUT', url: '/v1/resources/r1', headers: { 'content-type': 'application/json' }, body: Buffer.from('{"plan":"small"}'), host: 'provider.example' };
    const first = signer.sign(request);
    at += 850;
    assert.deepEqual(signer.sign(request), first, '850 ms later, same second: identical');
    at += 100;
    assert.notEqual(signer.sign(request)['x-signature'], first['x-signature'], 'the next second: a new signature');
  });
});

/** A request with the given Host header (fetch sets its own): a load balancer in front of two instances. */
function sendTo(target: Running, method: string, path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const url = new URL(target.url + path);
    const request = http.request({ host: url.hostname, port: url.port, method, path, headers: { ...headers, 'content-length': String(body.length) } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: response.statusCode ?? 0, body: text.length > 0 ? JSON.parse(text) : undefined });
      });
    });
    request.on('error', reject);
    request.end(body);
  });
}

describe('failure paths across two instances on one PostgreSQL schema', { skip: pgSkip }, () => {
  const HOST = 'provider.example';

  /** Two routers (two "processes") on one schema behind one public host: a signed request is valid on either. */
  async function pair() {
    const first = await openPostgres();
    const second = await openPostgres(first.schema);
    const master = generateKeyPair();
    // Each new request is signed a second after the last (a new Date, a new signature), well
    // within the Date tolerance.
    let offset = 0;
    const signer = createSigner({ masterPrivateKey: master.privateKey, now: () => Date.now() + offset });
    const recordings = [recordingHandlers(), recordingHandlers()];
    const routers = [first, second].map((opened, n) =>
      marketplaceRouter({ handlers: recordings[n]!.handlers, store: opened.store, masterKey: master.publicKey, catalog: CATALOG, publicHost: HOST, logger: false }));
    const targets = await Promise.all(routers.map((router) => {
      const app = express();
      app.use(router);
      return listen(app);
    }));
    const sign = (method: string, path: string, body: unknown) => {
      const bytes = Buffer.from(JSON.stringify(body));
      return { bytes, headers: signer.sign({ method, url: path, headers: { 'content-type': 'application/json' }, body: bytes, host: HOST }) };
    };
    return {
      recordings,
      store: first.store,
      /** A new request. */
      send: (n: number, method: string, path: string, body: unknown) => {
        offset += 1000;
        const { bytes, headers } = sign(method, path, body);
        return sendTo(targets[n]!, method, path, headers, bytes);
      },
      /** Signs once; `to(n)` sends those very bytes to instance n. */
      capture: (method: string, path: string, body: unknown) => {
        const { bytes, headers } = sign(method, path, body);
        return (n: number) => sendTo(targets[n]!, method, path, headers, bytes);
      },
      close: async () => {
        for (const target of targets) await target.close();
        for (const router of routers) await router.close();
        await first.cleanup();
      },
    };
  }

  it('409 first on one instance: the replay on either instance answers 409 and runs nothing', async () => {
    const p = await pair();
    try {
      const id = newId();
      assert.equal((await p.send(0, 'PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      const gate = p.recordings[0]!.gate('changePlan');
      const toLarge = p.send(0, 'PATCH', `/v1/resources/${id}`, { plan: 'large' });
      await gate.entered.promise;
      const toLocked = p.capture('PATCH', `/v1/resources/${id}`, { plan: 'locked' });
      const refused = await toLocked(1);
      assert.deepEqual(status(refused), [409, { message: 'Another operation on this entity is in progress' }]);
      gate.open.resolve();
      assert.equal((await toLarge).status, 200);
      assert.deepEqual(status(await toLocked(0)), status(refused));
      assert.equal((await p.send(1, 'PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200);
      assert.deepEqual(status(await toLocked(1)), status(refused));
      assert.deepEqual(status(await toLocked(0)), status(refused));
      assert.equal((await p.store.getResource(id))?.plan, 'small');
      assert.deepEqual(p.recordings.map((r) => r.calls.changePlan), [1, 1]);
    } finally {
      await p.close();
    }
  });

  it('500 first on one instance: the replay on the other answers 500 and runs nothing', async () => {
    const p = await pair();
    try {
      const id = newId();
      assert.equal((await p.send(0, 'PUT', `/v1/resources/${id}`, provisionBody(id))).status, 201);
      p.recordings[0]!.failNext.add('changePlan');
      const failing = p.capture('PATCH', `/v1/resources/${id}`, { plan: 'large' });
      assert.deepEqual(status(await failing(0)), [500, { message: 'Internal error' }]);
      assert.equal((await p.send(1, 'PATCH', `/v1/resources/${id}`, { plan: 'large' })).status, 200);
      assert.equal((await p.send(1, 'PATCH', `/v1/resources/${id}`, { plan: 'small' })).status, 200);
      assert.deepEqual(status(await failing(1)), [500, { message: 'Internal error' }]);
      assert.deepEqual(status(await failing(0)), [500, { message: 'Internal error' }]);
      assert.equal((await p.store.getResource(id))?.plan, 'small');
      assert.deepEqual(p.recordings.map((r) => r.calls.changePlan), [1, 2]);
    } finally {
      await p.close();
    }
  });
});
