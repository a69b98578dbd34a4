/**
 * The Express adapter (Express 4 and 5): `marketplaceRouter` as real Express routes over the core.
 * Express routes our paths itself, so a host app's middleware sees `req.route.path` and
 * `req.params.id` for them, and nothing of Express is patched. What each route does is the core's:
 * the signature check, the operation, the measures, the answer and the log line.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import { InvalidOptionsError, isMarketplaceError } from '../errors.js';
import { asOptionsObject, optionalFunction, rejectUnknownKeys } from '../lib/options.js';
import type { Completion } from '../domain/handlers.js';
import type { HealthReport } from '../observability/health-check.js';
import type { OperationRecord, Store } from '../store/types.js';
import { sentOnceEach, type Accepted } from '../signature/check.js';
import { acceptRequest } from '../signature/middleware.js';
import { ssoHandler, type SsoFailureHook } from '../sso/index.js';
import { errorAnswer, methodNotAllowed, writeAnswer } from '../core/answer.js';
import { composeProvider } from '../core/compose.js';
import { ProviderCore, requestIdOf } from '../core/provider.js';
import { actionOf, clientError, type RoutePattern } from '../core/routes.js';
import type { CommonProviderOptions, CompletionTarget, CoreAnswer } from '../core/types.js';
import type { RecordUsageOptions } from '../core/usage.js';

export type { CompletionTarget, ConnectorOptions } from '../core/types.js';

/** Single sign-on options (`GET /v1/sso`); needs `connector` and express-session mounted before the router. */
export interface SsoOptions {
  /** Where a signed-in user lands. Default `/dashboard/<resource id>`. */
  dashboardUrl?: (resourceId: string) => string;
  /** Answers a failed sign-in yourself (e.g. redirect to your own page); see `ssoHandler`'s `onError`. */
  onError?: SsoFailureHook;
}

/** Options of {@link marketplaceRouter}: the core's ({@link CommonProviderOptions}) and SSO behind express-session. */
export interface MarketplaceRouterOptions extends CommonProviderOptions {
  /** Mounts `GET /v1/sso`. Needs `connector`. */
  sso?: SsoOptions | boolean;
}

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

const FACTORY = 'marketplaceRouter';
const SSO_OFF = 'Single sign-on is not configured on this provider (marketplaceRouter options "sso" and "connector")';

/**
 * The provider side of the marketplace as one Express router: signature verification, the
 * resource and credential routes with idempotency, measures, long-running operations with
 * durable callbacks, and single sign-on.
 *
 * Mount it before `express.json()`: it reads the raw body itself, because the signature covers
 * the exact bytes. Its routes are Express routes (`/v1/resources/:id`, `/v1/resources/:id/measures`,
 * `/v1/credentials/:id`, `/v1/sso`): your middleware sees `req.route` and `req.params` as for your own.
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
  return expressAdapter(express.Router, options);
}

/**
 * @internal {@link marketplaceRouter} on the given `Router` factory: Express's own, as the host app
 * resolves it (the tests run it on Express 4 and 5 side by side).
 */
export function expressAdapter(makeRouter: () => Router, options: MarketplaceRouterOptions): MarketplaceRouter {
  const raw = asOptionsObject(FACTORY, options);
  const ssoOption = raw.sso;
  if (ssoOption !== undefined && typeof ssoOption !== 'boolean' && (typeof ssoOption !== 'object' || ssoOption === null)) {
    throw new InvalidOptionsError(`${FACTORY}: option "sso" must be true, false or { dashboardUrl, onError }`);
  }
  const ssoOn = ssoOption !== undefined && ssoOption !== false;
  // Checked before anything starts (the callback worker's timer).
  if (ssoOn && raw.connector === undefined) throw new InvalidOptionsError(`${FACTORY}: option "sso" needs option "connector" (the connector exchanges the code and checks the resource)`);
  if (typeof ssoOption === 'object') {
    const name = `${FACTORY}: option "sso"`;
    const sso = asOptionsObject(name, ssoOption);
    rejectUnknownKeys(name, sso, ['dashboardUrl', 'onError']);
    optionalFunction(name, sso, 'dashboardUrl');
    optionalFunction(name, sso, 'onError');
  }
  const parts = composeProvider(FACTORY, options, ['sso']);
  const core = new ProviderCore(parts, { ssoOff: SSO_OFF });
  const { logger, signature, connector } = parts;
  const log = core.log;

  /**
   * Verifies the request, then `then(req, res, next, accepted)`; a refusal is answered here. What
   * the verified request carries is handed on as an argument, not stored on `req`: a property
   * added to an Express request is a map transition of an object whose shape no other request
   * shares, a few µs each (docs/performance.md). Requests passed on to the app get `req.body`,
   * `req.rawBody` and `req.marketplaceSignature` as `verifySignature` documents (`passOn`).
   */
  function verify(req: Request, res: Response, next: NextFunction, path: string, then: (req: Request, res: Response, next: NextFunction, accepted: Accepted) => void): void {
    const method = req.method;
    if (log.enabled()) log.watch(res, method, path, req.headers['x-callback-id'], requestIdOf(req), lockedCode);
    const headers = req.headers;
    const onceEach = sentOnceEach(req);
    signature.check({ method, url: req.originalUrl, headers, onceEach, distinct: onceEach ? undefined : req.headersDistinct, body: { stream: req } }, (failure, accepted) => {
      if (accepted === undefined) {
        answer(res, errorAnswer(failure, logger), method, next);
        return;
      }
      then(req, res, next, accepted);
    });
  }

  /**
   * One route: verified first (an unsigned request gets 401 whatever its method), then its action
   * for the method (HEAD as GET), or a JSON 405 listing the route's methods. One handler for all
   * methods: Express matches the route once and dispatches no further.
   */
  function serving(route: Exclude<RoutePattern, '/v1/sso'>): RequestHandler {
    const refusal = methodNotAllowed(route);
    function act(req: Request, res: Response, next: NextFunction, accepted: Accepted): void {
      const method = req.method;
      let body: unknown;
      try {
        body = core.parseBody(req.headers, accepted);
      } catch (error) {
        answer(res, errorAnswer(error, logger), method, next);
        return;
      }
      const action = actionOf(route, method);
      if (action === undefined) {
        answer(res, refusal, method, next);
        return;
      }
      const url = req.url;
      const mark = url.indexOf('?');
      const params = req.params as Record<string, string | undefined>;
      void core.serve(route, action, params.id ?? '', mark === -1 ? '' : url.slice(mark + 1), req.headers, body, accepted.verified, requestIdOf(req))
        .then((done) => answer(res, done, method, next));
    }
    return function marketplaceRoute(req: Request, res: Response, next: NextFunction): void {
      const url = req.url;
      const mark = url.indexOf('?');
      verify(req, res, next, mark === -1 ? url : url.slice(0, mark), act);
    };
  }

  const router = makeRouter() as MarketplaceRouter;
  router.all('/v1/resources/:id', serving('/v1/resources/:id'));
  router.all('/v1/resources/:id/measures', serving('/v1/resources/:id/measures'));
  router.all('/v1/credentials/:id', serving('/v1/credentials/:id'));
  // Everything else under /v1/resources and /v1/credentials is verified too (an unsigned request
  // gets 401 whatever the path), then left to the host app with what verifySignature leaves.
  router.use(['/v1/resources', '/v1/credentials'], function marketplaceSigned(req: Request, res: Response, next: NextFunction): void {
    verify(req, res, next, signedPath(req), passOn);
  });

  const ssoRoute = router.route('/v1/sso').all(function marketplaceSsoLog(req: Request, res: Response, next: NextFunction): void {
    if (log.enabled()) log.watch(res, req.method, '/v1/sso', req.headers['x-callback-id'], requestIdOf(req), lockedCode);
    next();
  });
  if (ssoOn && connector !== undefined) {
    const sso = ssoOption === true ? {} : ssoOption as SsoOptions;
    ssoRoute.get(ssoHandler({
      connector, logger, now: parts.clock.now,
      ...(sso.dashboardUrl === undefined ? {} : { dashboardUrl: sso.dashboardUrl }),
      ...(sso.onError === undefined ? {} : { onError: sso.onError }),
    }));
  } else {
    // A browser sent here by the marketplace gets a JSON reason, not the host app's HTML 404.
    ssoRoute.all(function marketplaceSsoOff(req: Request, res: Response, next: NextFunction): void {
      answer(res, { status: 404, json: { message: SSO_OFF }, code: 'ERR_NOT_FOUND' }, req.method, next);
    });
  }

  // Express's own refusals on our paths (a path id that is not valid percent-encoding) as JSON 4xx;
  // any other error is the host app's to handle.
  router.use(['/v1/resources', '/v1/credentials', '/v1/sso'], function marketplaceErrors(error: unknown, req: Request, res: Response, next: NextFunction): void {
    if (res.headersSent || (!isMarketplaceError(error) && clientError(error) === undefined)) {
      next(error);
      return;
    }
    answer(res, errorAnswer(error, logger), req.method, next);
  });

  // Express 4 ignores a promise a handler returns: the host app's handlers added to this router
  // get Express 5's behaviour on both majors (a rejection goes to the error handlers).
  catchRejections(router);

  Object.defineProperty(router, 'store', { value: parts.store, enumerable: true });
  router.complete = (target: CompletionTarget, completion: Completion) => core.complete(target, completion);
  router.pendingOperations = (limit?: number) => core.pendingOperations(limit);
  router.recordUsage = parts.ledger.recordUsage;
  router.health = parts.health;
  router.close = parts.close;
  return router;
}

/** A verified request the router does not answer goes on to the app, with what `verifySignature` leaves on `req`. */
function passOn(req: Request, _res: Response, next: NextFunction, accepted: Accepted): void {
  try {
    acceptRequest(req, accepted);
  } catch (error) {
    next(error);
    return;
  }
  next();
}

/** Writes an answer; should writing itself fail, the host app's error handlers get it. */
function answer(res: Response, done: CoreAnswer, method: string, next: NextFunction): void {
  try {
    if (done.code !== undefined) res.locals.errorCode = done.code;
    writeAnswer(res, done, method);
  } catch (error) {
    next(error);
  }
}

/** The code an answer written by someone else left in `res.locals` (as `errorResponder` does). */
function lockedCode(res: object): string | undefined {
  const code = (res as { locals?: Record<string, unknown> }).locals?.errorCode;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The request's path relative to the router, inside the verify layer: Express has moved the part
 * its `use` path matched (`/v1/resources`, in the case sent) into `req.baseUrl`.
 */
function signedPath(req: Request): string {
  const base = req.baseUrl;
  const url = req.url;
  const mark = url.indexOf('?');
  const rest = mark === -1 ? url : url.slice(0, mark);
  const tail = /\/v1\/credentials$/i.test(base) ? base.slice(-15) : base.slice(-13);
  return rest === '/' ? tail : tail + rest;
}

const ROUTE_METHODS = ['get', 'put', 'patch', 'delete', 'all', 'use'] as const;

/**
 * Express 5 passes a handler's rejected promise to the error handlers; Express 4 ignores it, so
 * the request hangs and Node ends the process on the unhandled rejection. Wrapping every handler
 * registered on `router` from now on gives both majors the Express 5 behaviour. Error handlers
 * (four parameters) are left as they are.
 */
export function catchRejections<T extends Router>(router: T): T {
  for (const method of ROUTE_METHODS) {
    const register = (router[method] as (...args: unknown[]) => unknown).bind(router);
    (router as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => register(...args.map(settleToNext));
  }
  return router;
}

function settleToNext(arg: unknown): unknown {
  if (typeof arg !== 'function' || arg.length === 4) return arg;
  const handler = arg as (req: Request, res: Response, next: NextFunction) => unknown;
  // Returns nothing, so Express 5 does not also see the promise and call next twice.
  return function settled(req: Request, res: Response, next: NextFunction): void {
    const result = handler(req, res, next);
    if (typeof (result as Promise<unknown> | undefined)?.then === 'function') (result as Promise<unknown>).then(undefined, next);
  };
}
