/**
 * The Express adapter as a host app mounts it, on the Express major given: express-session before
 * the router (for /v1/sso), the dashboard behind requireMarketplaceSession, a JSON 404 after.
 */
import type { Express, Router } from 'express';
import session from 'express-session';
import { expressAdapter } from '../../src/adapters/express.js';
import type { CommonProviderOptions } from '../../src/core/types.js';
import { requireMarketplaceSession } from '../../src/sso/index.js';
import { listening } from './bridge.js';
import type { AdapterServer, AdapterUnderTest } from './conformance.js';

/** What the tests need of an Express major: the app factory and its Router. */
export interface ExpressMajor {
  (): Express;
  Router: () => Router;
}

export function expressHost(name: string, express: ExpressMajor): AdapterUnderTest {
  return {
    name,
    async start(options: CommonProviderOptions, sso: boolean): Promise<AdapterServer> {
      const router = expressAdapter(express.Router, { ...options, ...(sso ? { sso: true } : {}) });
      const app = express();
      if (sso) app.use(session({ secret: 'conformance-session-secret', resave: false, saveUninitialized: false }));
      app.use(router);
      app.get('/dashboard/:id', requireMarketplaceSession({ logger: false }), (_req, res) => void res.json({ resourceId: res.locals.marketplace?.resourceId }));
      app.use((_req, res) => void res.status(404).json({ message: 'host app: not found' }));
      const running = await listening((await import('node:http')).createServer(app));
      return { url: running.url, host: running.host, close: async () => { await running.close(); await router.close(); } };
    },
  };
}
