import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { InvalidOptionsError } from '../errors.js';
import { OperationEngine } from '../idempotency/engine.js';
import type { TableEnv } from '../idempotency/operations.js';
import { systemClock, type Clock } from '../lib/clock.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, optionalFunction, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import type { ConnectorClient } from '../connector/index.js';
import { buildConnectorClient } from '../connector/client.js';
import type { OptionNaming } from '../connector/callback-url.js';
import { createOutbox, type Outbox, type OutboxOptions } from '../outbox/index.js';
import type { SsoFailureHook } from '../sso/index.js';
import { resolveInstrumentation, type MetricsOptions } from '../observability/index.js';
import { createHealthCheck, type HealthCheckOptions, type HealthReport } from '../observability/health.js';
import type { Instrumentation } from '../observability/hooks.js';
import { DEFAULT_TOLERANCE_MS } from '../signature/index.js';
import { memoryStore } from '../store/memory.js';
import type { Store } from '../store/types.js';
import type { Catalog, ProviderHandlers, ValidateHook } from '../domain/handlers.js';
import { createUsageLedger, usageGraceOption, type UsageOptions } from './usage.js';

/**
 * The provider's composition root: options checked once, and the parts built from them (store,
 * connector, outbox, engine, usage ledger). The route table (router.ts) only maps HTTP onto these.
 */

/** How the router reaches the marketplace's connector (callbacks and single sign-on). */
export interface ConnectorOptions {
  /** `{connector_url}`: the marketplace connector's base URL. */
  url: string;
  clientId: string;
  clientSecret: string;
  /** Origins besides the connector's that X-Callback-URL may name. Default none. */
  allowedCallbackOrigins?: readonly string[];
  /** Per-request timeout for connector calls. Default 10 s. */
  timeoutMs?: number;
  /** The connector's callback route before the callback id. Default `/v1/callbacks/`. */
  callbackPathPrefix?: string;
}

/** Single sign-on options (`GET /v1/sso`); needs `connector` and express-session mounted before the router. */
export interface SsoOptions {
  /** Where a signed-in user lands. Default `/dashboard/<resource id>`. */
  dashboardUrl?: (resourceId: string) => string;
  /** Answers a failed sign-in yourself (e.g. redirect to your own page); see `ssoHandler`'s `onError`. */
  onError?: SsoFailureHook;
}

export interface MarketplaceRouterOptions extends UsageOptions {
  /** Your business logic. Required. */
  handlers: ProviderHandlers;
  /** Where state lives. Default `memoryStore()` (lost on exit; a warning is logged). */
  store?: Store;
  /** Products, plans and regions you sell; unknown ones answer 400. */
  catalog?: Catalog;
  /** Extra checks before any handler runs; throw `BadRequestError` to refuse. */
  validate?: ValidateHook;
  /** Master public key (base64url or base64). Default: the production key. */
  masterKey?: string;
  /** Date tolerance for signed requests. Default 300 000 ms (5 minutes); 0 means exact. */
  toleranceMs?: number;
  /**
   * The Host (or Hosts) the marketplace addresses, e.g. `api.example.com`: signatures made for any
   * other Host are refused, and behind a proxy that rewrites Host the listed one is verified.
   * Unset, the received Host is trusted (a warning is logged at start-up; SECURITY.md).
   */
  publicHost?: string | readonly string[];
  /** Largest accepted body in bytes. Default 1 MiB; larger answers 413. */
  bodyLimit?: number;
  /** Longest wait for a whole request body, in ms; slower senders get 408. Default 10 000. */
  bodyTimeoutMs?: number;
  /** Enables long-running operations (callbacks) and single sign-on. */
  connector?: ConnectorOptions;
  /** Mounts `GET /v1/sso`. Needs `connector`. */
  sso?: SsoOptions | boolean;
  /** pino logger, or `false` for none. Default: JSON lines on stdout at `info`, secrets redacted. */
  logger?: Logger | false;
  /** Clock, for tests. */
  now?: () => number;
  /**
   * How long a request waits for its handler. Past it the work goes on, and the request answers 202
   * when it carries X-Callback-ID/X-Callback-URL and `connector` is set (the outcome follows by
   * callback, docs/long-running.md), else 503 (the marketplace's retry finds the stored outcome).
   * Default 50 s.
   */
  handlerTimeoutMs?: number;
  /** Lease of an operation claim; a crashed process's claims lapse after it. Default 30 s. */
  leaseMs?: number;
  /**
   * Tuning of the callback delivery worker (see docs/outbox.md), or `false` to run none in this
   * process (another process over the same store delivers).
   */
  outbox?: Pick<OutboxOptions, 'pollIntervalMs' | 'leaseMs' | 'sendTimeoutMs' | 'batchSize' | 'concurrency' | 'backoff'> | false;
  /** Prometheus metrics: `{ registry }`, a prom-client Registry (docs/observability.md). */
  metrics?: MetricsOptions;
  /** What `router.health()` checks (docs/observability.md): store answer time, outbox age. */
  health?: Pick<HealthCheckOptions, 'timeoutMs' | 'outboxMaxAgeMs'>;
}

const KNOWN_OPTIONS = [
  'handlers', 'store', 'catalog', 'validate', 'masterKey', 'toleranceMs', 'publicHost', 'bodyLimit', 'bodyTimeoutMs', 'connector', 'sso',
  'logger', 'now', 'handlerTimeoutMs', 'leaseMs', 'outbox', 'metrics', 'health', 'usageGraceMs',
] as const;
const HANDLER_NAMES = ['provision', 'changePlan', 'deprovision', 'provisionCredentials', 'deprovisionCredentials'] as const;
const PENDING_DEADLINE_MS = 24 * 60 * 60 * 1000;
/** Replay records outlive any Date the verifier still accepts, with a margin when the tolerance is tiny. */
const MIN_REPLAY_TTL_MS = 60_000;
export const FACTORY = 'marketplaceRouter';

/** Everything the routes use, built once. */
export interface Provider {
  options: MarketplaceRouterOptions;
  store: Store;
  logger: Logger;
  clock: Clock;
  handlers: ProviderHandlers;
  connector: ConnectorClient | undefined;
  outbox: Outbox | undefined;
  engine: OperationEngine;
  env: TableEnv;
  ledger: ReturnType<typeof createUsageLedger>;
  instrumentation: Instrumentation;
  health: () => Promise<HealthReport>;
}

export function composeProvider(options: MarketplaceRouterOptions): Provider {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, KNOWN_OPTIONS);
  const handlers = checkHandlers(raw.handlers);
  const clock = systemClock(optionalFunction<() => number>(FACTORY, raw, 'now') ?? Date.now);
  const handlerTimeoutMs = optionalPositiveNumber(FACTORY, raw, 'handlerTimeoutMs') ?? 50_000;
  const leaseMs = optionalPositiveNumber(FACTORY, raw, 'leaseMs') ?? 30_000;
  const toleranceMs = optionalPositiveNumber(FACTORY, raw, 'toleranceMs', { allowZero: true }) ?? DEFAULT_TOLERANCE_MS;
  const catalog = parseCatalog(raw.catalog);
  const validate = optionalFunction<ValidateHook>(FACTORY, raw, 'validate');
  const usageGraceMs = usageGraceOption(FACTORY, raw.usageGraceMs);
  const logger = createLogger(options.logger, { component: 'provider' });
  const store = options.store ?? memoryStore();
  if (options.store === undefined) logger.warn('marketplaceRouter: no store given, using memoryStore(): every resource is lost when the process exits');
  // The outbox and pending-operation gauges are read from the store at scrape time, so every
  // instance reports the shared queue.
  const instrumentation = resolveInstrumentation(FACTORY, options.metrics, { store: () => store, now: clock.now });
  const health = createHealthCheck({ store, now: clock.now, ...healthOptions(raw.health) });
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

  const connector = options.connector === undefined ? undefined : buildConnector(options.connector, logger);
  const outbox: Outbox | undefined = connector === undefined || options.outbox === false
    ? undefined
    : createOutbox({
      ...options.outbox,
      store,
      send: (url, payload, context) => connector.sendCallback(url, payload, { signal: context.signal }),
      owner,
      now: clock.now,
      logger,
      instrumentation,
    });
  outbox?.start();

  const env: TableEnv = { catalog, validate, checkCallbackUrl: connector === undefined ? undefined : (url, callbackId) => connector.checkCallbackUrl(url, callbackId) };
  const engine = new OperationEngine({
    store,
    handlers,
    env,
    owner,
    clock,
    leaseMs,
    waitMs: handlerTimeoutMs,
    pendingDeadlineMs: PENDING_DEADLINE_MS,
    replayTtlMs: Math.max(2 * toleranceMs, MIN_REPLAY_TTL_MS),
    callbacks: connector !== undefined,
    onDelivery: () => {
      if (outbox === undefined) logger.warn('callback enqueued but no delivery worker runs in this process');
      else outbox.kick();
    },
    logger,
    instrumentation,
  });
  const ledger = createUsageLedger({ store, now: clock.now, logger, graceMs: usageGraceMs });
  return { options, store, logger, clock, handlers, connector, outbox, engine, env, ledger, instrumentation, health };
}

function healthOptions(value: unknown): Pick<HealthCheckOptions, 'timeoutMs' | 'outboxMaxAgeMs'> {
  if (value === undefined) return {};
  const raw = asOptionsObject(`${FACTORY}: option "health"`, value);
  rejectUnknownKeys(`${FACTORY}: option "health"`, raw, ['timeoutMs', 'outboxMaxAgeMs']);
  const timeoutMs = optionalPositiveNumber(`${FACTORY}: option "health"`, raw, 'timeoutMs');
  const outboxMaxAgeMs = optionalPositiveNumber(`${FACTORY}: option "health"`, raw, 'outboxMaxAgeMs');
  return { ...(timeoutMs === undefined ? {} : { timeoutMs }), ...(outboxMaxAgeMs === undefined ? {} : { outboxMaxAgeMs }) };
}

/** The router takes the connector options as `connector: { url, clientId, ... }`: its errors say so. */
const ROUTER_CONNECTOR_NAMES: OptionNaming = {
  name: (key) => `connector.${key === 'connectorUrl' ? 'url' : key}`,
  offersInsecureHttp: false,
};

function buildConnector(options: ConnectorOptions, logger: Logger): ConnectorClient {
  const raw = asOptionsObject(`${FACTORY} connector`, options);
  rejectUnknownKeys(`${FACTORY} connector`, raw, ['url', 'clientId', 'clientSecret', 'allowedCallbackOrigins', 'timeoutMs', 'callbackPathPrefix']);
  return buildConnectorClient({
    connectorUrl: options.url,
    clientId: options.clientId,
    clientSecret: options.clientSecret,
    logger,
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.allowedCallbackOrigins === undefined ? {} : { allowedCallbackOrigins: options.allowedCallbackOrigins }),
    ...(options.callbackPathPrefix === undefined ? {} : { callbackPathPrefix: options.callbackPathPrefix }),
  }, FACTORY, ROUTER_CONNECTOR_NAMES);
}

function checkHandlers(value: unknown): ProviderHandlers {
  if (typeof value !== 'object' || value === null) {
    throw new InvalidOptionsError(`${FACTORY}: option "handlers" is required: { ${HANDLER_NAMES.join(', ')} } (and optionally measures)`);
  }
  const handlers = value as Record<string, unknown>;
  for (const name of HANDLER_NAMES) {
    if (typeof handlers[name] !== 'function') throw new InvalidOptionsError(`${FACTORY}: handlers.${name} must be a function`);
  }
  if (handlers.measures !== undefined && typeof handlers.measures !== 'function') throw new InvalidOptionsError(`${FACTORY}: handlers.measures must be a function when given`);
  return value as ProviderHandlers;
}

function parseCatalog(value: unknown): Catalog | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidOptionsError(`${FACTORY}: option "catalog" must map product names to { plans, regions? }`);
  const catalog: Catalog = Object.create(null) as Catalog;
  for (const [product, entry] of Object.entries(value)) {
    const plans = (entry as { plans?: unknown }).plans;
    const regions = (entry as { regions?: unknown }).regions;
    if (!Array.isArray(plans) || plans.some((p) => typeof p !== 'string')) throw new InvalidOptionsError(`${FACTORY}: catalog.${product}.plans must be an array of plan names`);
    if (regions !== undefined && (!Array.isArray(regions) || regions.some((r) => typeof r !== 'string'))) throw new InvalidOptionsError(`${FACTORY}: catalog.${product}.regions must be an array of region names`);
    catalog[product] = { plans: [...(plans as string[])], ...(regions === undefined ? {} : { regions: [...(regions as string[])] }) };
  }
  return catalog;
}

