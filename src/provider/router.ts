import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import { BadRequestError, InvalidOptionsError, NotFoundError, safeMessage, SignatureError } from '../errors.js';
import { OperationEngine, type OperationSpec } from '../idempotency/engine.js';
import { catchRejections, errorResponder, requestIdOf, requestLog, send } from './http.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { memoryStore } from '../store/memory.js';
import { operationKey, type Mutation, type NewDelivery, type OperationRecord, type Store } from '../store/types.js';
import { verifySignature } from '../signature/index.js';
import { asOptionsObject, optionalFunction, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import { createConnectorClient, type ConnectorClient } from '../connector/index.js';
import { createOutbox, type Outbox, type OutboxOptions } from '../outbox/index.js';
import { ssoHandler, type SsoFailureHook } from '../sso/index.js';
import { resolveInstrumentation, type MetricsOptions } from '../observability/index.js';
import { answerMeasures } from './measures.js';
import {
  changePlanSpec,
  credentialRecord,
  deprovisionCredentialsSpec,
  deprovisionSpec,
  provisionCredentialsSpec,
  provisionSpec,
  refuse,
  type OperationDeps,
} from './operations.js';
import { cleanFeatures, validateChangePlan, validateCredential, validatePathId, validateProvision } from './schemas.js';
import type { Catalog, Completion, HandlerContext, ProviderHandlers, ValidateHook } from './types.js';
import { createUsageLedger } from './usage.js';

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

export interface MarketplaceRouterOptions {
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
  /** How long a request waits for its handler before answering 503 (the work goes on). Default 50 s. */
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
}

/** Which entity a `complete` call finishes. */
export interface CompletionTarget {
  entity: 'resource' | 'credential';
  id: string;
}

/** The Express router plus the operations a provider drives from its own code. */
export interface MarketplaceRouter extends Router {
  /** Finish a long-running operation: store the outcome and send the callback. */
  complete(target: CompletionTarget, completion: Completion): Promise<void>;
  /** Operations waiting for `complete`, oldest first (e.g. to resume work after a restart). */
  pendingOperations(limit?: number): Promise<OperationRecord[]>;
  /** Record usage for the measures route (the usage ledger). */
  recordUsage(resourceId: string, feature: string, quantity: number, at?: Date | number): Promise<void>;
  /** The store in use. */
  readonly store: Store;
  /** Stop the callback worker and close the store. */
  close(): Promise<void>;
}

const KNOWN_OPTIONS = [
  'handlers', 'store', 'catalog', 'validate', 'masterKey', 'toleranceMs', 'publicHost', 'bodyLimit', 'bodyTimeoutMs', 'connector', 'sso',
  'logger', 'now', 'handlerTimeoutMs', 'leaseMs', 'outbox', 'metrics',
] as const;
const HANDLER_NAMES = ['provision', 'changePlan', 'deprovision', 'provisionCredentials', 'deprovisionCredentials'] as const;
const PENDING_DEADLINE_MS = 24 * 60 * 60 * 1000;
const FACTORY = 'marketplaceRouter';

/**
 * The provider side of the marketplace as one Express router: signature verification, the
 * resource and credential routes with idempotency, measures, long-running operations with
 * durable callbacks, and single sign-on.
 *
 * Mount it before `express.json()`: it reads the raw body itself, because the signature covers
 * the exact bytes.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { marketplaceRouter } from 'embedded-marketplace';
 * const app = express();
 * app.use(marketplaceRouter({
 *   catalog: { bonnets: { plans: ['small', 'large'], regions: ['aws::us-east-1'] } },
 *   handlers: {
 *     provision: async ({ id, plan }) => { await db.create(id, plan); return 'Your bonnet is ready'; },
 *     changePlan: async ({ id, plan }) => { await db.resize(id, plan); },
 *     deprovision: async ({ id }) => { await db.drop(id); },
 *     provisionCredentials: async ({ id, resourceId }) => ({ credentials: { BONNETS_URL: await db.user(resourceId, id) } }),
 *     deprovisionCredentials: async ({ id }) => { await db.dropUser(id); },
 *   },
 * }));
 * app.listen(4567);
 * ```
 */
export function marketplaceRouter(options: MarketplaceRouterOptions): MarketplaceRouter {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, KNOWN_OPTIONS);
  const handlers = checkHandlers(raw.handlers);
  const now = optionalFunction<() => number>(FACTORY, raw, 'now') ?? Date.now;
  const handlerTimeoutMs = optionalPositiveNumber(FACTORY, raw, 'handlerTimeoutMs') ?? 50_000;
  const leaseMs = optionalPositiveNumber(FACTORY, raw, 'leaseMs') ?? 30_000;
  const catalog = parseCatalog(raw.catalog);
  const validate = optionalFunction<ValidateHook>(FACTORY, raw, 'validate');
  const logger = createLogger(options.logger, { component: 'provider' });
  // Not yet called from the core: the hooks' call sites arrive with the operation table.
  const instrumentation = resolveInstrumentation(FACTORY, options.metrics);
  void instrumentation;
  const store = options.store ?? memoryStore();
  if (options.store === undefined) logger.warn('marketplaceRouter: no store given, using memoryStore(): every resource is lost when the process exits');
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

  const connector = options.connector === undefined ? undefined : buildConnector(options.connector, logger);
  const outbox: Outbox | undefined = connector === undefined || options.outbox === false
    ? undefined
    : createOutbox({ ...options.outbox, store, send: (url, payload, context) => connector.sendCallback(url, payload, { signal: context.signal }), owner, now, logger });
  outbox?.start();

  const engine = new OperationEngine({ store, owner, now, leaseMs, waitMs: handlerTimeoutMs, pendingDeadlineMs: PENDING_DEADLINE_MS, logger });
  const ledger = createUsageLedger({ store, now, logger });

  async function complete(target: CompletionTarget, completion: Completion): Promise<void> {
    await completeOperation({ store, now, logger, outbox }, target, completion);
  }

  // A request with an id (pino-http's req.id) gets a child logger bound to it; the handler context
  // finds the id again through that logger, which is what the operation specs carry.
  const requestIds = new WeakMap<Logger, string>();
  function loggerFor(req: Request): Logger {
    const id = requestIdOf(req);
    if (id === undefined) return logger;
    const child = logger.child({ reqId: id });
    requestIds.set(child, id);
    return child;
  }

  const deps: OperationDeps = {
    store,
    handlers,
    now,
    logger,
    // Built only when a handler runs, so replays and refusals pay nothing for it.
    context: (target, callbackId, requestLogger): HandlerContext => ({
      callbackId,
      requestId: requestIds.get(requestLogger),
      logger: requestLogger.child({ entity: target.entity, id: target.id, ...(callbackId === undefined ? {} : { callbackId }) }),
      complete: (completion) => complete(target, completion),
    }),
  };

  async function checkOffer(operation: 'provision' | 'changePlan', id: string, product: string, plan: string, region: string, features: Record<string, string | number | boolean> | undefined): Promise<void> {
    if (catalog !== undefined) {
      const entry = Object.prototype.hasOwnProperty.call(catalog, product) ? catalog[product] : undefined;
      if (entry === undefined) refuse(`Unknown product ${product}`, 'ERR_UNKNOWN_PRODUCT');
      if (!entry.plans.includes(plan)) refuse(`Unknown plan ${plan} for product ${product}`, 'ERR_UNKNOWN_PLAN');
      if (!(entry.regions ?? ['all::global']).includes(region)) refuse(`Unknown region ${region} for product ${product}`, 'ERR_UNKNOWN_REGION');
    }
    await validate?.({ operation, id, product, plan, region, features });
  }

  function callbackHeaders(req: Request): { callbackId: string | undefined; callbackUrl: string | undefined } {
    const callbackId = singleHeader(req, 'x-callback-id');
    const callbackUrl = singleHeader(req, 'x-callback-url');
    // They decide where the outcome (credentials included) goes, so a replayed request must not be
    // able to add or swap them: the marketplace signs them whenever it sends them (section 5.2).
    const signed = req.marketplaceSignature?.signedHeaders ?? [];
    if ((callbackId !== undefined && !signed.includes('x-callback-id')) || (callbackUrl !== undefined && !signed.includes('x-callback-url'))) {
      throw new SignatureError('ERR_REQUIRED_HEADER_UNSIGNED', 'X-Callback-ID and X-Callback-URL must be listed in X-Signed-Headers');
    }
    // Without a connector no callback is ever sent, so the URL is never dereferenced.
    if (callbackUrl !== undefined && connector !== undefined) {
      const verdict = connector.checkCallbackUrl(callbackUrl, callbackId);
      if (!verdict.allowed) throw new BadRequestError(verdict.reason, 'ERR_CALLBACK_URL_REFUSED');
    }
    if (callbackId !== undefined && !/^[A-Za-z0-9]{1,64}$/.test(callbackId)) throw new BadRequestError('Invalid X-Callback-ID', 'ERR_VALIDATION');
    return { callbackId, callbackUrl };
  }

  async function run(res: Response, spec: OperationSpec): Promise<void> {
    send(res, await engine.execute(spec));
  }

  const router = catchRejections(express.Router()) as MarketplaceRouter;
  router.use(requestLog(logger));
  router.use(['/v1/resources', '/v1/credentials'], verifySignature({
    ...(options.masterKey === undefined ? {} : { masterKey: options.masterKey }),
    ...(options.toleranceMs === undefined ? {} : { toleranceMs: options.toleranceMs }),
    ...(options.publicHost === undefined ? {} : { publicHost: options.publicHost }),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
    ...(options.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: options.bodyTimeoutMs }),
    now: () => new Date(now()),
    logger,
    instrumentation,
  }) as RequestHandler);

  router.put('/v1/resources/:id', async (req, res) => {
    const id = validatePathId(req.params.id);
    const body = validateProvision(req.body);
    if (body.id !== id) throw new BadRequestError('Body id does not match the id in the path', 'ERR_ID_MISMATCH');
    const features = cleanFeatures(body.features);
    await checkOffer('provision', id, body.product, body.plan, body.region, features);
    const callback = callbackHeaders(req);
    await run(res, provisionSpec(deps, { id, product: body.product, plan: body.plan, region: body.region, features, body: req.body as Record<string, unknown> }, callback, loggerFor(req)));
  });

  router.patch('/v1/resources/:id', async (req, res) => {
    const id = validatePathId(req.params.id);
    const body = validateChangePlan(req.body);
    const features = body.features === undefined ? undefined : cleanFeatures(body.features);
    const callback = callbackHeaders(req);
    const checkPlan = (resource: { product: string; region: string }) => checkOffer('changePlan', id, resource.product, body.plan, resource.region, features);
    await run(res, changePlanSpec(deps, { id, plan: body.plan, features, checkPlan }, callback, loggerFor(req)));
  });

  router.delete('/v1/resources/:id', async (req, res) => {
    const id = validatePathId(req.params.id);
    await run(res, deprovisionSpec(deps, id, callbackHeaders(req), loggerFor(req)));
  });

  router.get('/v1/resources/:id/measures', async (req, res) => {
    const id = validatePathId(req.params.id);
    send(res, await answerMeasures({ store, handlers, logger: logger }, id, req.query as Record<string, unknown>));
  });

  router.put('/v1/credentials/:id', async (req, res) => {
    const id = validatePathId(req.params.id);
    const body = validateCredential(req.body);
    if (body.id !== id) throw new BadRequestError('Body id does not match the id in the path', 'ERR_ID_MISMATCH');
    await run(res, provisionCredentialsSpec(deps, { id, resourceId: body.resource_id }, callbackHeaders(req), loggerFor(req)));
  });

  router.delete('/v1/credentials/:id', async (req, res) => {
    const id = validatePathId(req.params.id);
    await run(res, deprovisionCredentialsSpec(deps, id, callbackHeaders(req), loggerFor(req)));
  });

  // Our paths with a method we do not serve: a JSON 405 rather than falling through to the host app.
  router.all(['/v1/resources/:id', '/v1/resources/:id/measures', '/v1/credentials/:id'], (req, res) => {
    const allow = req.path.endsWith('/measures') ? 'GET' : req.path.startsWith('/v1/credentials') ? 'PUT, DELETE' : 'PUT, PATCH, DELETE';
    res.setHeader('Allow', allow);
    res.status(405).json({ message: 'Method not allowed' });
  });

  if (options.sso !== undefined && options.sso !== false) {
    if (connector === undefined) throw new InvalidOptionsError(`${FACTORY}: option "sso" needs option "connector" (the connector exchanges the code and checks the resource)`);
    const sso = options.sso === true ? {} : options.sso;
    router.get('/v1/sso', ssoHandler({
      connector, logger, now,
      ...(sso.dashboardUrl === undefined ? {} : { dashboardUrl: sso.dashboardUrl }),
      ...(sso.onError === undefined ? {} : { onError: sso.onError }),
    }));
  } else {
    // A browser sent here by the marketplace gets a JSON reason, not the host app's HTML 404.
    router.all('/v1/sso', () => {
      throw new NotFoundError('Single sign-on is not configured on this provider (marketplaceRouter options "sso" and "connector")');
    });
  }

  router.use(['/v1/resources', '/v1/credentials', '/v1/sso'], errorResponder(logger));

  Object.defineProperty(router, 'store', { value: store, enumerable: true });
  router.complete = complete;
  router.pendingOperations = (limit = 100) => store.listPendingOperations(limit);
  router.recordUsage = ledger.recordUsage;
  router.close = async () => {
    await outbox?.stop();
    await store.close();
  };
  return router;
}

function buildConnector(options: ConnectorOptions, logger: Logger): ConnectorClient {
  const raw = asOptionsObject(`${FACTORY} connector`, options);
  rejectUnknownKeys(`${FACTORY} connector`, raw, ['url', 'clientId', 'clientSecret', 'allowedCallbackOrigins', 'timeoutMs', 'callbackPathPrefix']);
  try {
    return createConnectorClient({
      connectorUrl: options.url,
      clientId: options.clientId,
      clientSecret: options.clientSecret,
      logger,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(options.allowedCallbackOrigins === undefined ? {} : { allowedCallbackOrigins: options.allowedCallbackOrigins }),
      ...(options.callbackPathPrefix === undefined ? {} : { callbackPathPrefix: options.callbackPathPrefix }),
    });
  } catch (error) {
    if (!(error instanceof InvalidOptionsError)) throw error;
    // Name the options as the user wrote them (connector.url, not connectorUrl), and do not
    // suggest client options this router does not take.
    const message = error.message
      .replace(/^createConnectorClient: /, `${FACTORY}: `)
      .replace(/"connectorUrl"/g, '"connector.url"')
      .replace(/option "(clientId|clientSecret|timeoutMs|allowedCallbackOrigins|callbackPathPrefix)"/g, 'option "connector.$1"')
      .replace(/ \(plain http is accepted for loopback hosts, or with allowInsecureHttp: true\)/, ' (plain http is accepted for loopback hosts)')
      .replace(/; pass clientId and clientSecret instead/, '; pass connector.clientId and connector.clientSecret instead');
    throw new InvalidOptionsError(message);
  }
}

/** Applies a completion: entity change, operation removal and the callback, in one store commit. */
async function completeOperation(
  deps: { store: Store; now: () => number; logger: Logger; outbox: Outbox | undefined },
  target: CompletionTarget,
  completion: Completion,
): Promise<void> {
  const { store, now, logger } = deps;
  if (target === null || typeof target !== 'object' || (target.entity !== 'resource' && target.entity !== 'credential') || typeof target.id !== 'string') {
    throw new TypeError('complete: target must be { entity: "resource" | "credential", id }');
  }
  if (completion === null || typeof completion !== 'object' || (completion.state !== 'done' && completion.state !== 'error')) {
    throw new TypeError('complete: completion must be { state: "done" | "error", message?, credentials? }');
  }
  const key = operationKey(target.entity, target.id);
  const operation = await store.getOperation(key);
  if (operation === undefined || operation.state !== 'pending') throw new NotFoundError(`No pending operation for ${target.entity} ${target.id}`);

  const request = operation.request;
  let mutation: Mutation = { type: 'none' };
  let message = completion.message ?? '';
  let credentials: Record<string, string> | undefined;
  if (completion.state === 'done') {
    switch (request.kind) {
      case 'provision': {
        message = message || 'Resource provisioned';
        const at = now();
        mutation = { type: 'putResource', resource: { id: operation.targetId, product: request.product, plan: request.plan, region: request.region, features: request.features, message, createdAt: at, updatedAt: at } };
        break;
      }
      case 'changePlan': {
        message = message || 'Plan changed';
        const resource = await store.getResource(operation.targetId);
        if (resource === undefined) throw new NotFoundError('Resource not found');
        mutation = { type: 'putResource', resource: { ...resource, plan: request.plan, features: request.features ?? resource.features, updatedAt: now() } };
        break;
      }
      case 'deprovision':
        message = message || 'Resource deprovisioned';
        mutation = { type: 'deleteResource', id: operation.targetId, deletedAt: now() };
        break;
      case 'provisionCredentials': {
        const record = credentialRecord({ now }, operation.targetId, request.resourceId, completion.credentials, completion.message, logger);
        message = record.message;
        credentials = record.values;
        mutation = { type: 'putCredential', credential: record };
        break;
      }
      case 'deprovisionCredentials':
        message = message || 'Credentials deprovisioned';
        mutation = { type: 'deleteCredential', id: operation.targetId, deletedAt: now() };
        break;
    }
  } else if (message.trim().length < 3) {
    throw new TypeError('complete: an error completion needs a message of 3 to 256 characters for the user');
  }
  // A failed operation leaves nothing behind, no tombstone either: the marketplace's retry starts clean.

  let delivery: NewDelivery | undefined;
  if (operation.callbackUrl !== undefined && operation.callbackId !== undefined) {
    delivery = {
      id: randomBytes(12).toString('base64url'),
      callbackId: operation.callbackId,
      url: operation.callbackUrl,
      payload: { state: completion.state, message: safeMessage(message), ...(credentials === undefined ? {} : { credentials }) },
      createdAt: now(),
      deadlineAt: operation.deadlineAt ?? now() + PENDING_DEADLINE_MS,
    };
  } else {
    logger.warn({ key, kind: operation.kind }, 'completed an operation that carried no callback headers: the marketplace learns the outcome when it repeats the request');
  }
  await store.commitOperation(key, operation.token, delivery === undefined ? { mutation } : { mutation, delivery });
  logger.info({ key, kind: operation.kind, state: completion.state, callbackId: operation.callbackId }, 'long-running operation completed');
  if (delivery !== undefined) {
    if (deps.outbox === undefined) logger.warn({ callbackId: delivery.callbackId }, 'callback enqueued but no delivery worker runs in this process');
    else deps.outbox.kick();
  }
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

function singleHeader(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new BadRequestError(`Header ${name} must appear once`, 'ERR_VALIDATION');
  return value;
}

