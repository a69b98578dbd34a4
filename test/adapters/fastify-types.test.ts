/**
 * Type-level tests of embedded-marketplace/fastify: type-checked in CI (`npm run typecheck`), so a
 * change that makes misuse compile, or correct use stop compiling, fails the build. The runtime part
 * registers the plugin as typed and checks `app.marketplace`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import Fastify, { type FastifyInstance } from 'fastify';
import { marketplacePlugin, type FastifyMarketplace, type FastifySessionHooks, type MarketplaceLogin, type MarketplacePluginOptions } from '../../src/adapters/fastify.js';
import { accepted, memoryStore, type ProviderHandlers } from '../../src/index.js';

const handlers: ProviderHandlers = {
  provision: ({ plan }) => `Your ${plan} bonnet is ready`,
  changePlan: () => undefined,
  deprovision: () => undefined,
  provisionCredentials: ({ resourceId }) => ({ credentials: { BONNETS_URL: `https://u:p@bonnets.example/${resourceId}` } }),
  deprovisionCredentials: () => accepted('Revoking'),
};

async function typeChecks(app: FastifyInstance): Promise<void> {
  await app.register(marketplacePlugin, { handlers, store: memoryStore(), prefix: '/marketplace' });
  await app.register(marketplacePlugin, { handlers, sso: { session: { secret: 'x'.repeat(32) }, dashboardUrl: (id) => `/dashboard/${id}` } });
  // @ts-expect-error handlers are required
  await app.register(marketplacePlugin, { store: memoryStore() });
  // @ts-expect-error sso.onError answers through reply, it takes (failure, request, reply)
  const wrongHook: MarketplacePluginOptions['sso'] = { onError: (failure: string) => void failure };
  void wrongHook;
  const hooks: FastifySessionHooks = {
    set: (_request, reply, login) => void reply.header('set-cookie', `sid=${login.resourceId}`),
    get: () => undefined,
  };
  void hooks;
  // @ts-expect-error set receives the reply to put its cookie on
  const wrongHooks: FastifySessionHooks = { set: (_request: unknown, login: string) => void login, get: () => undefined };
  void wrongHooks;
  const marketplace: FastifyMarketplace = app.marketplace;
  const login: MarketplaceLogin | undefined = await marketplace.session({} as never);
  void login;
  await marketplace.complete({ entity: 'resource', id: 'r1' }, { state: 'done' });
  // @ts-expect-error completion state is done or error
  await marketplace.complete({ entity: 'resource', id: 'r1' }, { state: 'finished' });
  // @ts-expect-error the provider's fetch is not on app.marketplace: Fastify routes the requests
  void marketplace.fetch;
}

describe('embedded-marketplace/fastify types', () => {
  it('registers as typed and decorates app.marketplace', async () => {
    assert.equal(typeof typeChecks, 'function');
    const app = Fastify();
    await app.register(marketplacePlugin, { handlers, store: memoryStore(), logger: false });
    await app.ready();
    assert.deepEqual(Object.keys(app.marketplace).sort(), ['close', 'complete', 'health', 'pendingOperations', 'recordUsage', 'session', 'store']);
    await app.close();
  });
});
