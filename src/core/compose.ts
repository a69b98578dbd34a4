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
import { createOutbox, type Outbox } from '../outbox/index.js';
import { resolveInstrumentation } from '../observability/index.js';
import { createHealthCheck, type HealthCheckOptions, type HealthReport } from '../observability/health-check.js';
import type { Instrumentation } from '../observability/hooks.js';
import { createSignatureCheck, signatureSettings, type SignatureCheck } from '../signature/check.js';
import { DEFAULT_TOLERANCE_MS } from '../signature/verifier.js';
import { memoryStore } from '../store/memory.js';
import type { Store } from '../store/types.js';
import type { Catalog, ProviderHandlers, ValidateHook } from '../domain/handlers.js';
import { checkCatalog } from '../domain/catalog.js';
import { createUsageLedger, usageGraceOption } from './usage.js';
import type { CommonProviderOptions, ConnectorOptions } from './types.js';

/**
 * The provider's composition root: options checked once, and the parts built from them (store,
 * connector, outbox, engine, usage ledger, signature check). The core (provider.ts) and the
 * adapters only map HTTP onto these.
 */

/** The options every host shares; each factory adds its own (`sso`, `basePath`). */
export const COMMON_OPTIONS = [
  'handlers', 'store', 'catalog', 'validate', 'masterKey', 'toleranceMs', 'publicHost', 'bodyLimit', 'bodyTimeoutMs', 'connector',
  'logger', 'now', 'handlerTimeoutMs', 'leaseMs', 'outbox', 'metrics', 'health', 'usageGraceMs',
] as const;
const HANDLER_NAMES = ['provision', 'changePlan', 'deprovision', 'provisionCredentials', 'deprovisionCredentials'] as const;
const PENDING_DEADLINE_MS = 24 * 60 * 60 * 1000;
/** Replay records outlive any Date the verifier still accepts, with a margin when the tolerance is tiny. */
const MIN_REPLAY_TTL_MS = 60_000;

/** Everything the routes use, built once. */
export interface ProviderParts {
  /** The factory's name, for its errors and warnings (`createProvider`, `marketplaceRouter`). */
  factory: string;
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
  signature: SignatureCheck;
  /** Stops the callback worker and closes the store. */
  close(): Promise<void>;
}

/**
 * Checks the common options (and rejects any key that is neither one of them nor in `own`, the
 * factory's own options) and builds the parts.
 */
export function composeProvider(FACTORY: string, options: CommonProviderOptions, own: readonly string[]): ProviderParts {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, [...COMMON_OPTIONS, ...own]);
  const handlers = checkHandlers(FACTORY, raw.handlers);
  const clock = systemClock(optionalFunction<() => number>(FACTORY, raw, 'now') ?? Date.now);
  const handlerTimeoutMs = optionalPositiveNumber(FACTORY, raw, 'handlerTimeoutMs') ?? 50_000;
  const leaseMs = optionalPositiveNumber(FACTORY, raw, 'leaseMs') ?? 30_000;
  const toleranceMs = optionalPositiveNumber(FACTORY, raw, 'toleranceMs', { allowZero: true }) ?? DEFAULT_TOLERANCE_MS;
  const catalog = parseCatalog(FACTORY, raw.catalog);
  const validate = optionalFunction<ValidateHook>(FACTORY, raw, 'validate');
  const usageGraceMs = usageGraceOption(FACTORY, raw.usageGraceMs);
  const logger = createLogger(options.logger, { component: 'provider' });
  const store = options.store ?? memoryStore();
  if (options.store === undefined) logger.warn(`${FACTORY}: no store given, using memoryStore(): every resource is lost when the process exits`);
  // The outbox and pending-operation gauges are read from the store at scrape time, so every
  // instance reports the shared queue.
  const instrumentation = resolveInstrumentation(FACTORY, options.metrics, { store: () => store, now: clock.now });
  const health = createHealthCheck({ store, now: clock.now, ...healthOptions(FACTORY, raw.health) });
  // The signature options are checked before anything starts (the outbox's timer).
  const signature = createSignatureCheck(signatureSettings(FACTORY, {
    ...(options.masterKey === undefined ? {} : { masterKey: options.masterKey }),
    ...(options.toleranceMs === undefined ? {} : { toleranceMs: options.toleranceMs }),
    ...(options.publicHost === undefined ? {} : { publicHost: options.publicHost }),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
    ...(options.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: options.bodyTimeoutMs }),
    now: () => clock.now(),
    instrumentation,
  }, createLogger(logger, { component: 'signature' })));
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

  const connector = options.connector === undefined ? undefined : buildConnector(FACTORY, options.connector, logger);
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
  const close = async (): Promise<void> => {
    await outbox?.stop();
    await store.close();
  };
  return { factory: FACTORY, store, logger, clock, handlers, connector, outbox, engine, env, ledger, instrumentation, health, signature, close };
}

function healthOptions(FACTORY: string, value: unknown): Pick<HealthCheckOptions, 'timeoutMs' | 'outboxMaxAgeMs'> {
  if (value === undefined) return {};
  const raw = asOptionsObject(`${FACTORY}: option "health"`, value);
  rejectUnknownKeys(`${FACTORY}: option "health"`, raw, ['timeoutMs', 'outboxMaxAgeMs']);
  const timeoutMs = optionalPositiveNumber(`${FACTORY}: option "health"`, raw, 'timeoutMs');
  const outboxMaxAgeMs = optionalPositiveNumber(`${FACTORY}: option "health"`, raw, 'outboxMaxAgeMs');
  return { ...(timeoutMs === undefined ? {} : { timeoutMs }), ...(outboxMaxAgeMs === undefined ? {} : { outboxMaxAgeMs }) };
}

/** The provider takes the connector options as `connector: { url, clientId, ... }`: its errors say so. */
const ROUTER_CONNECTOR_NAMES: OptionNaming = {
  name: (key) => `connector.${key === 'connectorUrl' ? 'url' : key}`,
  offersInsecureHttp: false,
};

function buildConnector(FACTORY: string, options: ConnectorOptions, logger: Logger): ConnectorClient {
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

function checkHandlers(FACTORY: string, value: unknown): ProviderHandlers {
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

function parseCatalog(FACTORY: string, value: unknown): Catalog | undefined {
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
  checkCatalog(catalog, FACTORY);
  return catalog;
}

