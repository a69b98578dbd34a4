/**
 * The instrumentation hooks the platform factories call (src/observability/hooks.ts): one platformRequest
 * per answered platform call (by route pattern), one event per webhook delivery with its outcome.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import express from 'express';
import supertest from 'supertest';
import { noInstrumentation, type Instrumentation } from '../../src/observability/index.js';
import { MemorySeenEventStore, marketplaceEvents, platformRouter, type SeenEventStore } from '../../src/platform/index.js';

describe('platform metrics hooks', () => {
  it('platformRouter calls platformRequest once per answer with the route pattern and status', async () => {
    const calls: { route: string; status: number }[] = [];
    const instrumentation: Instrumentation = { ...noInstrumentation, platformRequest: (event) => void calls.push(event) };
    const app = express();
    app.use(platformRouter({
      accessTokens: 'platform-token',
      getProfile: (id) => (id === 'u-1' ? { id: 'u-1', name: 'One', email: 'one@example.com', state: 'active' } : null),
      listUsers: () => [],
      authorize: () => false,
      logger: false,
      ...({ instrumentation } as object),
    }));
    const auth = { Authorization: 'Bearer platform-token' };
    await supertest(app).get('/v1/profiles/u-1').set(auth);
    await supertest(app).get('/v1/profiles/u-404').set(auth);
    await supertest(app).get('/v1/users?resource_id=r&owner_id=o');
    await supertest(app).get('/elsewhere');
    assert.deepEqual(calls, [
      { route: '/v1/profiles/:id', status: 200 },
      { route: '/v1/profiles/:id', status: 404 },
      { route: '/v1/users', status: 401 },
    ]);
  });

  it('marketplaceEvents calls event once per delivery with its outcome', async () => {
    const calls: { type: string; outcome: string }[] = [];
    const instrumentation: Instrumentation = { ...noInstrumentation, event: (event) => void calls.push(event) };
    let fail = false;
    let busy = false;
    const memory = new MemorySeenEventStore();
    const seenStore: SeenEventStore = {
      claim: (key, claim) => (busy ? Promise.resolve({ outcome: 'busy', leaseExpiresAt: claim.leaseExpiresAt }) : memory.claim(key, claim)),
      complete: (key, owner, expiresAt) => memory.complete(key, owner, expiresAt),
      release: (key, owner) => memory.release(key, owner),
    };
    const app = express();
    app.post('/events', marketplaceEvents({
      verify: (req) => req.headers['x-secret'] === 'ok',
      seenStore,
      logger: false,
      handlers: {
        'resource:provisioned': () => {
          if (fail) throw new Error('down');
        },
      },
      ...({ instrumentation } as object),
    }));
    const send = (type: string, resource = 'r-1', secret = 'ok') =>
      supertest(app).post('/events').set('X-Secret', secret).set('X-Marketplace-Event', type).send({ version: 1, data: { resource_id: resource, subject: 's' } });
    await send('resource:provisioned');
    await send('resource:provisioned');
    await send('resource:renamed');
    await send('resource:provisioned', 'r-2', 'forged');
    fail = true;
    await send('resource:provisioned', 'r-3');
    fail = false;
    busy = true;
    await send('resource:provisioned', 'r-4');
    assert.deepEqual(calls, [
      { type: 'resource:provisioned', outcome: 'processed' },
      { type: 'resource:provisioned', outcome: 'duplicate' },
      { type: 'other', outcome: 'ignored' },
      { type: 'other', outcome: 'refused' },
      { type: 'resource:provisioned', outcome: 'failed' },
      { type: 'resource:provisioned', outcome: 'duplicate' },
    ]);
  });
});
