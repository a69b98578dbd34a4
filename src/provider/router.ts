import express, { type Request, type RequestHandler, type Router } from 'express';
import { BadRequestError, InvalidOptionsError, NotFoundError } from '../errors.js';
import type { CompletionTarget } from '../idempotency/engine.js';
import { prepareOperation, type OperationCall } from '../idempotency/operations.js';
import { verifySignature } from '../signature/index.js';
import { ssoHandler } from '../sso/index.js';
import type { OperationKind, OperationRecord, Store } from '../store/types.js';
import { catchRejections, errorResponder, requestIdOf, requestLog, send } from './http.js';
import { answerMeasures } from './measures.js';
import { composeProvider, FACTORY, type MarketplaceRouterOptions } from './root.js';
import { validatePathId } from './schemas.js';
import type { Completion } from './types.js';
import type { HealthReport } from '../observability/health.js';

export type { ConnectorOptions, MarketplaceRouterOptions, SsoOptions } from './root.js';
export type { CompletionTarget } from '../idempotency/engine.js';

/** The Express router plus the operations a provider drives from its own code. */
export interface MarketplaceRouter extends Router {
  /** Finish a long-running operation: store the outcome and send the callback. */
  complete(target: CompletionTarget, completion: Completion): Promise<void>;
  /** Operations waiting for `complete`, oldest first (e.g. to resume work after a restart). Needs a store with `listPendingOperations`. */
  pendingOperations(limit?: number): Promise<OperationRecord[]>;
  /** Record usage for the measures route (the usage ledger). */
  recordUsage(resourceId: string, feature: string, quantity: number, at?: Date | number): Promise<void>;
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
  const { store, logger, clock, engine, env, connector, outbox, ledger, handlers, instrumentation, health } = provider;

  /** HTTP onto the operation table: the request as plain data, the answer rendered as is. */
  function operation(kind: OperationKind): RequestHandler {
    return async (req, res) => {
      const call: OperationCall = {
        kind,
        id: validatePathId(typeof req.params.id === 'string' ? req.params.id : undefined),
        body: req.body as unknown,
        callbackId: singleHeader(req, 'x-callback-id'),
        callbackUrl: singleHeader(req, 'x-callback-url'),
        signedHeaders: req.marketplaceSignature?.signedHeaders ?? [],
        requestId: requestSignature(req),
        reqId: requestIdOf(req),
      };
      send(res, await engine.execute(await prepareOperation(call, env)));
    };
  }

  const router = catchRejections(express.Router()) as MarketplaceRouter;
  router.use(requestLog(logger, instrumentation));
  router.use(['/v1/resources', '/v1/credentials'], verifySignature({
    ...(options.masterKey === undefined ? {} : { masterKey: options.masterKey }),
    ...(options.toleranceMs === undefined ? {} : { toleranceMs: options.toleranceMs }),
    ...(options.publicHost === undefined ? {} : { publicHost: options.publicHost }),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
    ...(options.bodyTimeoutMs === undefined ? {} : { bodyTimeoutMs: options.bodyTimeoutMs }),
    now: () => new Date(clock.now()),
    logger,
    instrumentation,
  }) as RequestHandler);

  router.put('/v1/resources/:id', operation('provision'));
  router.patch('/v1/resources/:id', operation('changePlan'));
  router.delete('/v1/resources/:id', operation('deprovision'));
  router.get('/v1/resources/:id/measures', async (req, res) => {
    const id = validatePathId(req.params.id);
    send(res, await answerMeasures({ store, handlers, logger }, id, req.query as Record<string, unknown>));
  });
  router.put('/v1/credentials/:id', operation('provisionCredentials'));
  router.delete('/v1/credentials/:id', operation('deprovisionCredentials'));

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

  router.use(['/v1/resources', '/v1/credentials', '/v1/sso'], errorResponder(logger));

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

/**
 * The request's own signature (the first field of X-Signature), which the verifier has checked:
 * Ed25519 signatures are not malleable, so it names this exact request and no other.
 */
function requestSignature(req: Request): string | undefined {
  const header = req.headers['x-signature'];
  if (typeof header !== 'string') return undefined;
  const first = header.trim().split(/\s+/, 1)[0];
  return first === undefined || first === '' ? undefined : first;
}

function singleHeader(req: Request, name: string): string | undefined {
  const value = req.headers[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new BadRequestError(`Header ${name} must appear once`, 'ERR_VALIDATION');
  return value;
}

