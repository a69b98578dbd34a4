/**
 * The example provider on each host (`EXAMPLE_ADAPTER`): the same provider options, catalog and
 * handlers (examples/provider-app.ts) served by
 * - `express`: `marketplaceRouter` behind express-session (the default);
 * - `fastify`: `marketplacePlugin` (embedded-marketplace/fastify) behind @fastify/session;
 * - `fetch`: `provider.fetch` in a Hono app on @hono/node-server, the package's sealed cookie
 *   keeping the sign-in (never `provider.node`: this is how a Web-standard host serves it).
 * Each host also answers the dashboard (`/dashboard/:id`: 200 for the resource its sign-in opens,
 * 401 without a sign-in, 403 for another resource), `/metrics`, `/healthz`, `/livez` and
 * `/example/handler-calls`, on a node:http server the caller listens with.
 */
import { createHash } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';
import express from 'express';
import session from 'express-session';
import type { Registry } from 'prom-client';
import {
  createProvider,
  marketplaceRouter,
  mountObservability,
  requireMarketplaceSession,
  type CommonProviderOptions,
  type HealthReport,
  type MarketplaceLogin,
  type Provider,
  type Store,
} from '../src/index.js';

/** The values of EXAMPLE_ADAPTER. */
export const EXAMPLE_ADAPTERS = ['express', 'fastify', 'fetch'] as const;
export type ExampleAdapter = (typeof EXAMPLE_ADAPTERS)[number];

/** EXAMPLE_ADAPTER as a host (default `express`); anything else stops the start with a clear message. */
export function exampleAdapter(value: string | undefined): ExampleAdapter {
  if (value === undefined || value === '') return 'express';
  if ((EXAMPLE_ADAPTERS as readonly string[]).includes(value)) return value as ExampleAdapter;
  throw new Error(`EXAMPLE_ADAPTER must be one of ${EXAMPLE_ADAPTERS.join(', ')} (default express), got ${JSON.stringify(value.slice(0, 40))}`);
}

/** What the provider offers the host's own code, the same on every host. */
export type ExampleMarketplace = Pick<Provider, 'complete' | 'pendingOperations' | 'recordUsage' | 'health' | 'store'>;

/** The example served by one host. */
export interface ExampleHost {
  /** Listens like Express's `app.listen(port, host, callback)`, answering the node:http server. */
  listen(port: number, host: string, callback?: () => void): Server;
  marketplace: ExampleMarketplace;
  /** Stops the provider (outbox, store) and the session store. */
  close(): Promise<void>;
}

/** What every host is built from. */
export interface HostSettings {
  /** The provider's options, single sign-on aside (on when `connector` is set). */
  options: CommonProviderOptions;
  /** Where a signed-in user lands: `/dashboard/<id>`. */
  dashboardUrl: (resourceId: string) => string;
  registry: Registry;
  store: Store;
  /** SESSION_SECRET (or a random one). */
  sessionSecret: string;
  /** The session cookie's name, the same on every host. */
  cookieName: string;
  /** The express-session store (also @fastify/session's: the same get/set/destroy contract). */
  sessionStore: () => Promise<session.Store>;
  /** How often each handler ran, served at /example/handler-calls. */
  calls: Record<string, Record<string, number>>;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const NO_LOGIN = 'Sign in through the marketplace to open this dashboard';
const OTHER_RESOURCE = 'This sign-in is for another resource: open its dashboard from the marketplace';

/** The dashboard page of a resource (a real provider shows its product here). */
export async function dashboardPage(store: Store, id: string): Promise<{ status: number; html?: string; json?: unknown }> {
  const resource = await store.getResource(id);
  if (resource === undefined) return { status: 404, json: { message: 'Resource not found' } };
  return { status: 200, html: `<!doctype html><title>Bonnet ${escapeHtml(resource.id)}</title><h1>Your bonnet</h1><p id="resource">${escapeHtml(resource.id)}</p><p id="plan">Plan: ${escapeHtml(resource.plan)}</p>` };
}

/** The dashboard for a framework-free session read: 401 without a sign-in, 403 for another resource. */
async function dashboardFor(store: Store, login: MarketplaceLogin | undefined, id: string): Promise<{ status: number; html?: string; json?: unknown }> {
  if (login === undefined) return { status: 401, json: { message: NO_LOGIN } };
  if (login.resourceId !== id) return { status: 403, json: { message: OTHER_RESOURCE } };
  return dashboardPage(store, id);
}

/** /metrics, /healthz and /livez without a framework: what mountObservability serves on Express. */
async function operatorAnswer(path: string, registry: Registry, health: () => Promise<HealthReport>): Promise<{ status: number; type: string; body: string } | undefined> {
  const json = (status: number, value: unknown) => ({ status, type: 'application/json; charset=utf-8', body: JSON.stringify(value) });
  switch (path) {
    case '/metrics':
      return { status: 200, type: registry.contentType, body: await registry.metrics() };
    case '/healthz': {
      const report = await health().catch((): HealthReport => ({ status: 'down', reason: 'The health check failed' } as HealthReport));
      return report.status === 'down' ? json(503, { message: report.reason ?? 'The instance is down', ...report }) : json(200, report);
    }
    case '/livez':
      return json(200, { status: 'ok' });
    default:
      return undefined;
  }
}

/**
 * @fastify/session and the sealed cookie want 32 characters of secret at least; a shorter
 * SESSION_SECRET (fine for express-session) is stretched rather than refused.
 */
function longSecret(secret: string): string {
  return secret.length >= 32 ? secret : createHash('sha256').update(secret).digest('hex');
}

/** A node:http server for `handler`, listened to the way Express's `app.listen` does. */
function nodeListener(server: Server): ExampleHost['listen'] {
  return (port, host, callback) => server.listen(port, host, callback);
}

async function closeSessionStore(store: session.Store | undefined): Promise<void> {
  const closable = store as { close?: () => unknown } | undefined;
  if (typeof closable?.close === 'function') await closable.close();
}

// ---------------------------------------------------------------------------------------------

/** Express: marketplaceRouter before express.json(), behind express-session. */
export async function expressHost(s: HostSettings): Promise<ExampleHost> {
  const router = marketplaceRouter({ ...s.options, ...(s.options.connector === undefined ? {} : { sso: { dashboardUrl: s.dashboardUrl } }) });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  // Operator endpoints before the session layer, so a scrape or a probe never creates a session:
  // /metrics (Prometheus text), /healthz (readiness: router.health(), 503 when the store is down)
  // and /livez (liveness).
  mountObservability(app, { registry: s.registry, router });
  const sessionStore = await s.sessionStore();
  // The provider's own session layer, mounted before the marketplace router so /v1/sso can use it.
  app.use(session({
    secret: s.sessionSecret,
    store: sessionStore,
    name: s.cookieName,
    resave: false,
    saveUninitialized: false,
    cookie: { httpOnly: true, sameSite: 'lax', secure: false, maxAge: DAY_MS },
  }));
  app.use(router);
  app.use(express.json());

  app.get('/dashboard/:id', requireMarketplaceSession(), async (req, res) => {
    const page = await dashboardPage(s.store, String(req.params.id));
    if (page.html === undefined) res.status(page.status).json(page.json);
    else res.type('html').send(page.html);
  });
  // For the multi-instance tests: how often each handler ran in this process.
  app.get('/example/handler-calls', (_req, res) => {
    res.json(s.calls);
  });

  return {
    listen: (port, host, callback) => app.listen(port, host, callback),
    marketplace: router,
    async close() {
      await router.close();
      await closeSessionStore(sessionStore);
    },
  };
}

/** Fastify 5: marketplacePlugin behind @fastify/cookie and @fastify/session. */
export async function fastifyHost(s: HostSettings): Promise<ExampleHost> {
  const [{ default: Fastify }, { default: fastifyCookie }, { default: fastifySession }, { marketplacePlugin }] = await Promise.all([
    import('fastify'),
    import('@fastify/cookie'),
    import('@fastify/session'),
    import('../src/adapters/fastify.js'),
  ]);
  let server: Server | undefined;
  // The example listens itself (port 0, the "listening on" line, keep-alive settings), on the server
  // Fastify handles requests on.
  const app = Fastify({ serverFactory: (handler: RequestListener) => (server = createServer(handler)) });
  const sessionStore = s.options.connector === undefined ? undefined : await s.sessionStore();
  if (sessionStore !== undefined) {
    await app.register(fastifyCookie);
    // A session is saved (and its cookie set) only once something is put in it: a scrape or a
    // probe creates none.
    await app.register(fastifySession, {
      secret: longSecret(s.sessionSecret),
      store: sessionStore as unknown as NonNullable<Parameters<typeof fastifySession>[1]>['store'],
      cookieName: s.cookieName,
      saveUninitialized: false,
      cookie: { httpOnly: true, sameSite: 'lax', secure: false, maxAge: DAY_MS },
    });
  }
  // Before any JSON parser of the app's own would not matter: the plugin's routes read their raw body themselves.
  await app.register(marketplacePlugin, { ...s.options, ...(sessionStore === undefined ? {} : { sso: { dashboardUrl: s.dashboardUrl } }) });
  for (const path of ['/metrics', '/healthz', '/livez']) {
    app.get(path, async (_request, reply) => {
      const answer = (await operatorAnswer(path, s.registry, () => app.marketplace.health()))!;
      return reply.code(answer.status).header('Cache-Control', 'no-store').type(answer.type).send(answer.body);
    });
  }
  app.get('/dashboard/:id', async (request, reply) => {
    const page = await dashboardFor(s.store, await app.marketplace.session(request), (request.params as { id: string }).id);
    return page.html === undefined ? reply.code(page.status).send(page.json) : reply.type('text/html; charset=utf-8').send(page.html);
  });
  app.get('/example/handler-calls', async () => s.calls);
  await app.ready();

  return {
    listen: nodeListener(server!),
    marketplace: app.marketplace,
    async close() {
      // Fastify's onClose closes the provider (outbox, store).
      await app.close();
      await closeSessionStore(sessionStore);
    },
  };
}

/**
 * A Web fetch host: a Hono app whose catch-all hands every request to `provider.fetch` (the
 * provider answers its own paths and a JSON 404 for the rest), on @hono/node-server. The sign-in
 * is kept in the package's sealed cookie; the dashboard reads it with `provider.session(request)`.
 */
export async function fetchHost(s: HostSettings): Promise<ExampleHost> {
  const [{ Hono }, { getRequestListener }] = await Promise.all([import('hono'), import('@hono/node-server')]);
  const provider = createProvider({
    ...s.options,
    ...(s.options.connector === undefined ? {} : { sso: { dashboardUrl: s.dashboardUrl, session: { secret: longSecret(s.sessionSecret), cookieName: s.cookieName } } }),
  });
  const app = new Hono();
  for (const path of ['/metrics', '/healthz', '/livez']) {
    app.get(path, async (c) => {
      const answer = (await operatorAnswer(path, s.registry, () => provider.health()))!;
      return c.body(answer.body, answer.status as 200, { 'content-type': answer.type, 'cache-control': 'no-store' });
    });
  }
  app.get('/dashboard/:id', async (c) => {
    const page = await dashboardFor(s.store, await provider.session(c.req.raw), c.req.param('id'));
    return page.html === undefined ? c.json(page.json, page.status as 401) : c.html(page.html);
  });
  app.get('/example/handler-calls', (c) => c.json(s.calls));
  // Everything else: the marketplace's signed routes, measures and /v1/sso, or the provider's JSON 404.
  app.all('*', (c) => provider.fetch(c.req.raw));
  const listener = getRequestListener(app.fetch);
  // The bridge answers through `res` and settles its promise itself; nothing to await here.
  const server = createServer((req, res) => void listener(req, res));

  return {
    listen: nodeListener(server),
    marketplace: provider,
    close: () => provider.close(),
  };
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
