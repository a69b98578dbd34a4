/**
 * The core without a framework, as a node:http or fetch host serves it: `provider.node` on
 * node:http (the host's own routes through `next`), and `provider.fetch` through a Request/Response
 * bridge; the dashboard reads `provider.session(request)`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createProvider } from '../../src/core/provider.js';
import type { CommonProviderOptions, MarketplaceLogin, Provider } from '../../src/core/types.js';
import { listening, serveFetch } from './bridge.js';
import type { AdapterServer, AdapterUnderTest } from './conformance.js';

export const SESSION_SECRET = 'conformance-sealed-session-secret-0123456789';
const DASHBOARD = /^\/dashboard\/([^/?]+)$/;

/** The dashboard's answer for a login: 200 for its resource, 401 without one, 403 for another. */
export function dashboardAnswer(login: MarketplaceLogin | undefined, id: string): { status: number; body: unknown } {
  if (login === undefined) return { status: 401, body: { message: 'Sign in through the marketplace to open this dashboard' } };
  if (login.resourceId !== id) return { status: 403, body: { message: 'This sign-in is for another resource' } };
  return { status: 200, body: { resourceId: login.resourceId } };
}

function build(options: CommonProviderOptions, sso: boolean): Provider {
  return createProvider({ ...options, ...(sso ? { sso: { session: { secret: SESSION_SECRET } } } : {}) });
}

export const nodeHost: AdapterUnderTest = {
  name: 'provider.node on node:http',
  async start(options, sso): Promise<AdapterServer> {
    const provider = build(options, sso);
    const host = (req: IncomingMessage, res: ServerResponse): void => {
      const dashboard = DASHBOARD.exec((req.url ?? '').split('?')[0]!);
      const send = (status: number, body: unknown) => {
        res.statusCode = status;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(body));
      };
      if (dashboard === null) {
        send(404, { message: 'host: not found' });
        return;
      }
      void provider.session(req).then((login) => {
        const answer = dashboardAnswer(login, decodeURIComponent(dashboard[1]!));
        send(answer.status, answer.body);
      });
    };
    const running = await listening(createServer((req, res) => provider.node(req, res, () => host(req, res))));
    return { url: running.url, host: running.host, close: async () => { await running.close(); await provider.close(); } };
  },
};

export const fetchHost: AdapterUnderTest = {
  name: 'provider.fetch through a Request/Response bridge',
  async start(options, sso): Promise<AdapterServer> {
    const provider = build(options, sso);
    const running = await serveFetch(async (request) => {
      const dashboard = DASHBOARD.exec(new URL(request.url).pathname);
      if (dashboard === null) return provider.fetch(request);
      const answer = dashboardAnswer(await provider.session(request), decodeURIComponent(dashboard[1]!));
      return Response.json(answer.body, { status: answer.status });
    });
    return { url: running.url, host: running.host, close: async () => { await running.close(); await provider.close(); } };
  },
};
