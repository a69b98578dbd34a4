/**
 * The example provider: sells "bonnets" through the marketplace. Everything a real provider writes
 * is in `handlers` below; the rest is configuration. `examples/provider.ts` starts it from the
 * environment; tests and the demo build it in-process with `createProviderApp(env)`.
 *
 * Test knobs (all optional; the fault-injection and multi-instance tests in test/deploy and
 * test/faults use them to make crashes land where they want and to shorten every wait):
 * - STORE_SCHEMA: the PostgreSQL schema (default `embedded_marketplace`), one per test run.
 * - STORE_BUSY_TIMEOUT_MS: SQLite's wait for a lock held by another connection (default 5000).
 * - EXAMPLE_HANDLER_DELAY_MS: every handler waits this long after being counted (a kill or a
 *   SIGTERM then lands in the middle of it).
 * - EXAMPLE_LEASE_MS: the router's operation lease (`leaseMs`, default 30 000).
 * - EXAMPLE_OUTBOX_POLL_MS, EXAMPLE_OUTBOX_LEASE_MS: the outbox's poll interval and claim lease.
 * - EXAMPLE_OUTBOX_BACKOFF_MS: the longest wait between two callback attempts (default 15 min).
 * - CONNECTOR_TIMEOUT_MS: per-request timeout of connector calls (default 10 000); keep it below
 *   half of EXAMPLE_OUTBOX_LEASE_MS.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import session from 'express-session';
import { Registry } from 'prom-client';
import {
  accepted,
  BadRequestError,
  memoryStore,
  type Completion,
  type HandlerContext,
  type ProviderHandlers,
  type Store,
} from '../src/index.js';
import { createLogger, type Logger } from '../src/lib/logger.js';
import { exampleAdapter, expressHost, fastifyHost, fetchHost, type ExampleAdapter, type ExampleHost, type ExampleMarketplace } from './hosts.js';
import { sqliteSessionStore } from './sqlite-session-store.js';

export { EXAMPLE_ADAPTERS, exampleAdapter, type ExampleAdapter } from './hosts.js';

export interface ExampleEnv {
  PORT?: string;
  /** The host serving the provider: `express` (default), `fastify` or `fetch` (examples/hosts.ts). */
  EXAMPLE_ADAPTER?: string;
  MASTER_PUBLIC_KEY?: string;
  /** `memory`, `sqlite:<path>` or `postgres://…`. Default `sqlite:./data/example.db`. */
  STORE?: string;
  STORE_ENCRYPTION_KEY?: string;
  CONNECTOR_URL?: string;
  CONNECTOR_CLIENT_ID?: string;
  CONNECTOR_CLIENT_SECRET?: string;
  SESSION_SECRET?: string;
  /** `1`: answer 202 to every operation and complete it through the callback about a second later. */
  EXAMPLE_ASYNC?: string;
  /** Milliseconds the async mode waits before completing. Default 800. */
  EXAMPLE_ASYNC_DELAY_MS?: string;
  /**
   * Usage the measures route answers for every resource and period, as a JSON map of feature to
   * integer (`{"bonnet-hours":12}`), e.g. to satisfy grafton's `--resource-measures`. Default: a
   * deterministic figure per resource and period (`exampleUsage`).
   */
  EXAMPLE_MEASURES?: string;
  /** Test knobs: see the file header. */
  STORE_SCHEMA?: string;
  STORE_BUSY_TIMEOUT_MS?: string;
  EXAMPLE_HANDLER_DELAY_MS?: string;
  EXAMPLE_LEASE_MS?: string;
  EXAMPLE_OUTBOX_POLL_MS?: string;
  EXAMPLE_OUTBOX_LEASE_MS?: string;
  EXAMPLE_OUTBOX_BACKOFF_MS?: string;
  CONNECTOR_TIMEOUT_MS?: string;
  LOG_LEVEL?: string;
}

export const CATALOG = {
  bonnets: { plans: ['small', 'large', 'locked'], regions: ['aws::us-east-1', 'all::global'] },
} as const;

/** A development-only key so the example starts with no setup; a real provider sets its own. */
const EXAMPLE_DEV_KEY = createHash('sha256').update('embedded-marketplace example provider: not a secret').digest('base64');

export interface ProviderApp {
  /** The host serving it (EXAMPLE_ADAPTER). */
  adapter: ExampleAdapter;
  /** Listens like Express's `app.listen(port, host, callback)` (on every host), answering the node:http server. */
  app: Pick<ExampleHost, 'listen'>;
  /** The provider's operations for the host's own code: complete, recordUsage, health, store. */
  marketplace: ExampleMarketplace;
  /** The registry `/metrics` serves (the router's metrics). */
  registry: Registry;
  /** How often each handler ran, by resource or credential id (the multi-instance tests sum these). */
  calls: Record<string, Record<string, number>>;
  close(): Promise<void>;
}

/** Deterministic usage for a resource: the same numbers for the same resource and period. */
export function exampleUsage(resourceId: string, periodStart: Date, periodEnd: Date): Record<string, number> {
  const digest = createHash('sha256').update(`${resourceId}|${periodStart.toISOString()}|${periodEnd.toISOString()}`).digest();
  const hours = Math.max(1, Math.round((periodEnd.getTime() - periodStart.getTime()) / 3_600_000));
  return { 'bonnet-hours': hours, 'storage-gb': digest.readUInt16BE(0) % 500, requests: digest.readUInt32BE(2) % 100_000 };
}

/** EXAMPLE_MEASURES as a feature → integer map; anything else stops the start with a clear message. */
export function parseExampleMeasures(text: string | undefined): Record<string, number> | undefined {
  if (text === undefined || text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('EXAMPLE_MEASURES must be a JSON object of feature to integer, such as {"bonnet-hours":12}');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)
    || !Object.values(value).every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) {
    throw new Error('EXAMPLE_MEASURES must be a JSON object of feature to non-negative integer, such as {"bonnet-hours":12}');
  }
  return { ...(value as Record<string, number>) };
}

/** A test knob in milliseconds: undefined when unset; anything but a positive integer stops the start. */
function knobMs(env: ExampleEnv, name: keyof ExampleEnv): number | undefined {
  const text = env[name];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer (milliseconds), got ${JSON.stringify(text.slice(0, 20))}`);
  return value;
}

async function openStore(spec: string, encryptionKey: string, logger: Logger, env: ExampleEnv): Promise<Store> {
  if (spec === 'memory') return memoryStore();
  if (spec.startsWith('sqlite:')) {
    const path = spec.slice('sqlite:'.length);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const { sqliteStore } = await import('../src/store/sqlite.js');
    const busyTimeoutMs = knobMs(env, 'STORE_BUSY_TIMEOUT_MS');
    return sqliteStore({ path, encryptionKey, logger, ...(busyTimeoutMs === undefined ? {} : { busyTimeoutMs }) });
  }
  if (spec.startsWith('postgres://') || spec.startsWith('postgresql://')) {
    const { postgresStore } = await import('../src/store/postgres/index.js');
    return postgresStore({ connectionString: spec, encryptionKey, logger, ...(env.STORE_SCHEMA === undefined ? {} : { schema: env.STORE_SCHEMA }) });
  }
  throw new Error(`STORE must be memory, sqlite:<path> or postgres://…, got ${JSON.stringify(spec.slice(0, 40))}`);
}

async function openSessionStore(spec: string): Promise<session.Store> {
  if (spec.startsWith('sqlite:') && spec !== 'sqlite::memory:') return sqliteSessionStore({ path: `${spec.slice('sqlite:'.length)}.sessions` });
  if (spec.startsWith('postgres://') || spec.startsWith('postgresql://')) {
    const { default: connectPgSimple } = await import('connect-pg-simple');
    const PgStore = connectPgSimple(session);
    return new PgStore({ conString: spec, createTableIfMissing: true, pruneSessionInterval: 600 });
  }
  return new session.MemoryStore();
}

export async function createProviderApp(env: ExampleEnv = process.env, options: { logger?: Logger; registry?: Registry } = {}): Promise<ProviderApp> {
  // Checked before anything is opened: a mistyped host stops the start at once.
  const adapter = exampleAdapter(env.EXAMPLE_ADAPTER);
  const registry = options.registry ?? new Registry();
  // The demo passes a logger writing to a file, so that no JSON line lands inside its report.
  const logger = options.logger ?? createLogger(undefined, { app: 'example-provider' });
  if (env.LOG_LEVEL !== undefined) logger.level = env.LOG_LEVEL;
  const storeSpec = env.STORE ?? 'sqlite:./data/example.db';
  if (env.STORE_ENCRYPTION_KEY === undefined && storeSpec !== 'memory') logger.warn('STORE_ENCRYPTION_KEY not set: using the example development key; never do this in production');
  const store = await openStore(storeSpec, env.STORE_ENCRYPTION_KEY ?? EXAMPLE_DEV_KEY, logger, env);
  const asyncMode = env.EXAMPLE_ASYNC === '1';
  const asyncDelayMs = Number(env.EXAMPLE_ASYNC_DELAY_MS ?? 800);
  const calls: Record<string, Record<string, number>> = {};
  const count = (handler: string, id: string) => {
    const byId = (calls[handler] ??= {});
    byId[id] = (byId[id] ?? 0) + 1;
  };
  const handlerDelayMs = knobMs(env, 'EXAMPLE_HANDLER_DELAY_MS') ?? 0;
  // Counted first, then slow: a test sees the handler start and can kill the process inside it.
  const slow = () => (handlerDelayMs > 0 ? new Promise((resolve) => setTimeout(resolve, handlerDelayMs)) : undefined);

  // In async mode every operation answers 202 and finishes a moment later through the callback.
  function later(context: HandlerContext, completion: () => Completion, message: string) {
    if (!asyncMode) return undefined;
    setTimeout(() => {
      context.complete(completion()).catch((error: unknown) => logger.error({ err: String(error) }, 'example: completion failed'));
    }, asyncDelayMs).unref();
    return accepted(message);
  }

  const newCredentials = (resourceId: string) => {
    const user = `u${randomBytes(6).toString('hex')}`;
    const password = randomBytes(18).toString('base64url');
    return { BONNETS_URL: `https://${user}:${password}@bonnets.example/${resourceId}` };
  };

  const fixedMeasures = parseExampleMeasures(env.EXAMPLE_MEASURES);
  const handlers: ProviderHandlers = {
    async provision({ id, plan }, context) {
      count('provision', id);
      await slow();
      return later(context, () => ({ state: 'done', message: `Your ${plan} bonnet is ready` }), 'Knitting your bonnet') ?? `Your ${plan} bonnet is ready`;
    },
    async changePlan({ id, resource, plan }, context) {
      count('changePlan', id);
      await slow();
      if (resource.plan === 'locked') throw new BadRequestError('The locked plan cannot be changed', 'ERR_PLAN_CHANGE_REFUSED');
      return later(context, () => ({ state: 'done', message: `Bonnet resized to ${plan}` }), 'Resizing your bonnet') ?? `Bonnet resized to ${plan}`;
    },
    async deprovision({ id }, context) {
      count('deprovision', id);
      await slow();
      return later(context, () => ({ state: 'done', message: 'Bonnet unravelled' }), 'Unravelling your bonnet') ?? 'Bonnet unravelled';
    },
    async provisionCredentials({ id, resourceId }, context) {
      count('provisionCredentials', id);
      await slow();
      const asyncAnswer = later(context, () => ({ state: 'done', message: 'Credentials ready', credentials: newCredentials(resourceId) }), 'Issuing credentials');
      return asyncAnswer ?? { message: 'Credentials ready', credentials: newCredentials(resourceId) };
    },
    async deprovisionCredentials({ id }, context) {
      count('deprovisionCredentials', id);
      await slow();
      return later(context, () => ({ state: 'done', message: 'Credentials revoked' }), 'Revoking credentials') ?? 'Credentials revoked';
    },
    measures({ resource, periodStart, periodEnd }) {
      return fixedMeasures ?? exampleUsage(resource.id, periodStart, periodEnd);
    },
  };

  const connectorTimeoutMs = knobMs(env, 'CONNECTOR_TIMEOUT_MS');
  const connector = env.CONNECTOR_URL === undefined
    ? undefined
    : { url: env.CONNECTOR_URL, clientId: env.CONNECTOR_CLIENT_ID ?? '', clientSecret: env.CONNECTOR_CLIENT_SECRET ?? '', ...(connectorTimeoutMs === undefined ? {} : { timeoutMs: connectorTimeoutMs }) };
  if (connector !== undefined && (connector.clientId === '' || connector.clientSecret === '')) {
    throw new Error('CONNECTOR_URL is set: CONNECTOR_CLIENT_ID and CONNECTOR_CLIENT_SECRET are required too');
  }

  const leaseMs = knobMs(env, 'EXAMPLE_LEASE_MS');
  const outboxPollMs = knobMs(env, 'EXAMPLE_OUTBOX_POLL_MS');
  const outboxLeaseMs = knobMs(env, 'EXAMPLE_OUTBOX_LEASE_MS');
  const outboxBackoffMs = knobMs(env, 'EXAMPLE_OUTBOX_BACKOFF_MS');
  const host = await HOSTS[adapter]({
    options: {
      store,
      catalog: CATALOG,
      handlers,
      logger,
      metrics: { registry },
      ...(leaseMs === undefined ? {} : { leaseMs }),
      outbox: {
        ...(outboxPollMs === undefined ? {} : { pollIntervalMs: outboxPollMs }),
        ...(outboxLeaseMs === undefined ? {} : { leaseMs: outboxLeaseMs }),
        ...(outboxBackoffMs === undefined ? {} : { backoff: { baseMs: Math.min(1000, outboxBackoffMs), maxMs: outboxBackoffMs } }),
      },
      ...(env.MASTER_PUBLIC_KEY === undefined ? {} : { masterKey: env.MASTER_PUBLIC_KEY }),
      ...(connector === undefined ? {} : { connector }),
    },
    dashboardUrl: (id: string) => `/dashboard/${encodeURIComponent(id)}`,
    registry,
    store,
    sessionSecret: env.SESSION_SECRET ?? randomBytes(32).toString('hex'),
    cookieName: 'bonnets.sid',
    sessionStore: () => openSessionStore(storeSpec),
    calls,
  });

  return {
    adapter,
    app: host,
    marketplace: host.marketplace,
    registry,
    calls,
    close: () => host.close(),
  };
}

const HOSTS: Record<ExampleAdapter, (settings: Parameters<typeof expressHost>[0]) => Promise<ExampleHost>> = {
  express: expressHost,
  fastify: fastifyHost,
  fetch: fetchHost,
};
