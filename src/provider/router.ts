import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { BadRequestError, InvalidOptionsError, NotFoundError } from '../errors.js';
import type { CompletionTarget } from '../idempotency/engine.js';
import type { OperationCall } from '../idempotency/operations.js';
import { signatureCheck } from '../signature/middleware.js';
import { ssoHandler } from '../sso/index.js';
import type { OperationKind, OperationRecord, Store } from '../store/types.js';
import { catchRejections, decodePathId, errorResponder, requestIdOf, requestLogger, send, sendJson } from './http.js';
import { answerMeasures } from './measures.js';
import type { RecordUsageOptions } from './usage.js';
import { composeProvider, FACTORY, type MarketplaceRouterOptions } from './root.js';
import { validatePathId } from '../domain/schemas.js';
import type { Completion } from '../domain/handlers.js';
import type { HealthReport } from '../observability/health.js';

export type { ConnectorOptions, MarketplaceRouterOptions, SsoOptions } from './root.js';
export type { CompletionTarget } from '../idempotency/engine.js';

/** The Express router plus the operations a provider drives from its own code. */
export interface MarketplaceRouter extends Router {
  /** Finish a long-running operation: store the outcome and send the callback. */
  complete(target: CompletionTarget, completion: Completion): Promise<void>;
  /** Operations waiting for `complete`, oldest first (e.g. to resume work after a restart). Needs a store with `listPendingOperations`. */
  pendingOperations(limit?: number): Promise<OperationRecord[]>;
  /** Record usage for the measures route (the usage ledger); `at` in a closed period is refused unless `options.late` says otherwise (docs/usage.md). */
  recordUsage(resourceId: string, feature: string, quantity: number, at?: Date | number, options?: RecordUsageOptions): Promise<void>;
  /** The store in use. */
  readonly store: Store;
  /**
   * Readiness: whether the store answers a trivial query in time and how old the outbox's oldest
   * delivery is (`degraded` past `health.outboxMaxAgeMs`). Serve it with `healthHandler(router)`.
   */
  health(): Promise<HealthReport>;
  /** Stop the callback worker and close the store. */
  close(): Promise<void>;
}

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
  const provider = composeProvider(options);
  const { store, logger, clock, engine, connector, outbox, ledger, handlers, instrumentation, health } = provider;
  const log = requestLogger(logger, instrumentation);
  const respondError = errorResponder(logger);
  const checkSignature = signatureCheck({
    ...(options.masterKey === undefined ? {} : { masterKey: options.masterKey }),
    ...(options.toleranceMs === undefined ? {} : { toleranceMs: options.toleranceMs }),
    ...(options.publicHost === undefined ? {} : { publicHost: options.publicHost }),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
    ...(options.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: options.bodyTimeoutMs }),
    now: () => clock.now(),
    logger,
    instrumentation,
  });

  /** An error of ours rendered as JSON; should rendering itself fail, the host app's error handlers get it. */
  function fail(error: unknown, req: Request, res: Response, next: NextFunction): void {
    try {
      respondError(error, req, res, next);
    } catch (unexpected) {
      next(unexpected);
    }
  }

  /**
   * The resource and credential routes in one step: one regex instead of Express matching a layer
   * per route, and the log line, the signature and the route run inline. Everything under
   * `/v1/resources` and `/v1/credentials` is verified before anything else, so an unsigned request
   * gets a 401 whatever the path. Anything else goes on to the router's own layers (`/v1/sso`, and
   * whatever the host app adds) with `layers`; `out` leaves the router, as an error does.
   */
  function dispatch(req: Request, res: Response, out: NextFunction): void {
    const path = req.path;
    log(req, res, path);
    if (!SIGNED_PREFIX.test(path)) {
      layers(req, res, out);
      return;
    }
    checkSignature(req, res, (error) => {
      if (error === undefined) route(req, res, out, path);
      else fail(error, req, res, out);
    });
  }

  function route(req: Request, res: Response, out: NextFunction, path: string): void {
    const match = SIGNED_ROUTE.exec(path);
    // 'resources' or 'credentials' in any case: the lengths tell them apart without lowercasing.
    const credentials = match?.[1]!.length === CREDENTIALS.length;
    const measures = match?.[3] !== undefined;
    // Under our prefixes but none of our routes: verified, then left to the host app.
    if (match === null || (credentials && measures)) {
      layers(req, res, out);
      return;
    }
    let id: string;
    try {
      id = decodePathId(match[2]!);
    } catch (error) {
      fail(error, req, res, out);
      return;
    }
    const method = req.method;
    // HEAD is served as GET, as Express routes it.
    const kind = measures ? (method === 'GET' || method === 'HEAD' ? 'measures' : undefined)
      : credentials ? CREDENTIAL_METHODS[method]
        : RESOURCE_METHODS[method];
    if (kind === undefined) {
      // Our paths with a method we do not serve: a JSON 405 rather than falling through to the host app.
      res.setHeader('Allow', measures ? 'GET' : credentials ? 'PUT, DELETE' : 'PUT, PATCH, DELETE');
      sendJson(res, 405, { message: 'Method not allowed' });
      return;
    }
    void serve(kind, id, req, res, out);
  }

  /** HTTP onto the operation table: the request as plain data, the answer rendered as is. */
  async function serve(kind: OperationKind | 'measures', id: string, req: Request, res: Response, out: NextFunction): Promise<void> {
    try {
      if (kind === 'measures') {
        send(res, await answerMeasures({ store, handlers, logger }, validatePathId(id), req.query as Record<string, unknown>));
        return;
      }
      const call: OperationCall = {
        kind,
        id: validatePathId(id),
        body: req.body as unknown,
        callbackId: singleHeader(req, 'x-callback-id'),
        callbackUrl: singleHeader(req, 'x-callback-url'),
        signedHeaders: req.marketplaceSignature?.signedHeaders ?? [],
        requestId: requestSignature(req),
        reqId: requestIdOf(req),
      };
      // One call: a refusal from validation is recorded against the signature like any answer.
      send(res, await engine.handle(call));
    } catch (error) {
      fail(error, req, res, out);
    }
  }

  const router = catchRejections(express.Router()) as MarketplaceRouter;
  // Express enters a router through its `handle` (Express 4 and 5 alike): serving our routes there
  // spares each signed request the router's own bookkeeping and layer matching.
  const routable = router as unknown as RouterInternals;
  const handleLayers = routable.handle;
  const layers = (req: Request, res: Response, out: NextFunction) => handleLayers.call(router, req, res, out);
  routable.handle = dispatch;

  if (options.sso !== undefined && options.sso !== false) {
    if (connector === undefined) throw new InvalidOptionsError(`${FACTORY}: option "sso" needs option "connector" (the connector exchanges the code and checks the resource)`);
    const sso = options.sso === true ? {} : options.sso;
    router.get('/v1/sso', ssoHandler({
      connector, logger, now: clock.now,
      ...(sso.dashboardUrl === undefined ? {} : { dashboardUrl: sso.dashboardUrl }),
      ...(sso.onError === undefined ? {} : { onError: sso.onError }),
    }));
  } else {
    // A browser sent here by the marketplace gets a JSON reason, not the host app's HTML 404.
    router.all('/v1/sso', () => {
      throw new NotFoundError('Single sign-on is not configured on this provider (marketplaceRouter options "sso" and "connector")');
    });
  }

  router.use('/v1/sso', respondError);

  Object.defineProperty(router, 'store', { value: store, enumerable: true });
  router.complete = (target: CompletionTarget, completion: Completion) => engine.complete(target, completion);
  router.pendingOperations = async (limit = 100) => {
    if (store.listPendingOperations === undefined) throw new TypeError(`pendingOperations: the ${store.kind} store does not implement listPendingOperations`);
    return store.listPendingOperations(limit);
  };
  router.recordUsage = ledger.recordUsage;
  router.health = health;
  router.close = async () => {
    await outbox?.stop();
    await store.close();
  };
  return router;
}

/** What Express calls on a router for each request. */
interface RouterInternals {
  handle(req: Request, res: Response, out: NextFunction): void;
}

// Our signed paths relative to the mount, matched as Express matched the `use` and route layers
// they replace: case-insensitive, with an optional trailing slash.
const SIGNED_PREFIX = /^\/v1\/(?:resources|credentials)(?:\/|$)/i;
const SIGNED_ROUTE = /^\/v1\/(resources|credentials)\/([^/]+?)(\/measures)?\/?$/i;
const CREDENTIALS = 'credentials';
const RESOURCE_METHODS: Readonly<Record<string, OperationKind>> = Object.assign(Object.create(null) as Record<string, OperationKind>, { PUT: 'provision', PATCH: 'changePlan', DELETE: 'deprovision' });
const CREDENTIAL_METHODS: Readonly<Record<string, OperationKind>> = Object.assign(Object.create(null) as Record<string, OperationKind>, { PUT: 'provisionCredentials', DELETE: 'deprovisionCredentials' });

// X-Signature as the verifier accepts it (this runs only after it did): three parts separated by
// single spaces, the first one 86 characters long.
const SIGNATURE_LENGTH = 86 + 1 + 43 + 1 + 86;

/**
 * The request's own signature (the first field of X-Signature), which the verifier has checked:
 * Ed25519 signatures are not malleable, so it names this exact request and no other.
 */
function requestSignature(req: Request): string | undefined {
  const header = req.headers['x-signature'];
  if (typeof header !== 'string') return undefined;
  if (header.length === SIGNATURE_LENGTH && header.charCodeAt(86) === 0x20) return header.slice(0, 86);
  const first = header.trim().split(/\s+/, 1)[0];
  return first === undefined || first === '' ? undefined : first;
}

function singleHeader(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new BadRequestError(`Header ${name} must appear once`, 'ERR_VALIDATION');
  return value;
}
