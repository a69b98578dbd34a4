import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import { marketplaceRouter } from '../../src/provider/router.js';
import { memoryStore } from '../../src/store/memory.js';
import { InvalidOptionsError } from '../../src/errors.js';
import type { ProviderHandlers } from '../../src/domain/handlers.js';
import { listen, marketplaceClient } from '../helpers/http.js';

const handlers: ProviderHandlers = {
  provision: () => undefined,
  changePlan: () => undefined,
  deprovision: () => undefined,
  provisionCredentials: () => ({ credentials: { A_URL: 'x' } }),
  deprovisionCredentials: () => undefined,
};

describe('X-Callback-URL at the router', () => {
  it('must be the connector callback route of the request\'s X-Callback-ID', async () => {
    const client = marketplaceClient();
    const provisioned: string[] = [];
    const router = marketplaceRouter({
      store: memoryStore(), masterKey: client.masterPublicKey, logger: false, outbox: false, publicHost: '127.0.0.1',
      connector: { url: 'http://127.0.0.1:9', clientId: 'id', clientSecret: 'secret' },
      handlers: { ...handlers, provision: ({ id }) => void provisioned.push(id) },
    });
    const app = express();
    app.use(router);
    const running = await listen(app);
    running.host = '127.0.0.1';
    try {
      const provision = (id: string) => ({ id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });
      const bad = await client.send(running, 'PUT', '/v1/resources/r1', provision('r1'), { 'x-callback-id': 'cb1', 'x-callback-url': 'http://127.0.0.1:9/v1/oauth/tokens' });
      assert.equal(bad.status, 400);
      const other = await client.send(running, 'PUT', '/v1/resources/r2', provision('r2'), { 'x-callback-id': 'cb2', 'x-callback-url': 'http://127.0.0.1:9/v1/callbacks/cb1' });
      assert.equal(other.status, 400);
      const good = await client.send(running, 'PUT', '/v1/resources/r3', provision('r3'), { 'x-callback-id': 'cb3', 'x-callback-url': 'http://127.0.0.1:9/v1/callbacks/cb3' });
      assert.equal(good.status, 201);
      assert.deepEqual(provisioned, ['r3']);
    } finally {
      await running.close();
      await router.close();
    }
  });

  it('names connector options as the user wrote them in errors', () => {
    assert.throws(() => marketplaceRouter({ handlers, logger: false, connector: { url: 'ftp://x', clientId: 'a', clientSecret: 'b' } }), (error: unknown) => {
      assert.ok(error instanceof InvalidOptionsError);
      assert.match(error.message, /^marketplaceRouter: option "connector\.url"/);
      assert.doesNotMatch(error.message, /connectorUrl|allowInsecureHttp/);
      return true;
    });
    assert.throws(() => marketplaceRouter({ handlers, logger: false, connector: { url: 'http://connector.internal', clientId: 'a', clientSecret: 'b' } }), /option "connector\.url" must use https \(plain http is accepted for loopback hosts\)$/);
    assert.throws(() => marketplaceRouter({ handlers, logger: false, connector: { url: 'http://127.0.0.1:9', clientId: '', clientSecret: 'b' } }), /"connector\.clientId"/);
  });
});
