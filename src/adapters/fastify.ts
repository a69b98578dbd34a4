/**
 * The Fastify adapter (Fastify 4 and 5): `marketplacePlugin`, registered with
 * `app.register(marketplacePlugin, options)`. Our paths are real Fastify routes
 * (`/v1/resources/:id`, `/v1/resources/:id/measures`, `/v1/credentials/:id`, `/v1/sso`), so the
 * host's hooks, `request.routeOptions.url` and Fastify's OpenTelemetry spans see them. What each
 * route does is the core's: the signature check, the operation, the measures, the answer and the
 * log line. No runtime import of Fastify: the plugin is a plain function, whichever major the host runs.
 *
 * Raw bytes: the routes live in an encapsulated context of their own whose only content-type parser
 * leaves the body unread (the host's parsers, `@fastify/formbody` and the like, are removed there
 * and nowhere else), and the core reads `request.raw` itself, within `bodyLimit` and `bodyTimeoutMs`,
 * after the cheap header checks. `app.marketplace` is decorated on the host's instance.
 */
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { InvalidOptionsError } from '../errors.js';
import { asOptionsObject, optionalFunction, rejectUnknownKeys } from '../lib/options.js';
import type { Completion } from '../domain/handlers.js';
import type { HealthReport } from '../observability/health-check.js';
import type { OperationRecord, Store } from '../store/types.js';
import { sentOnceEach, type Accepted } from '../signature/check.js';
import { defaultDashboardUrl, MAX_SSO_SESSION_MS, safeErr, signInSteps, SSO_MESSAGES, type MarketplaceSessionData } from '../sso/exchange.js';
import { errorPage, prefersHtml, type SsoFailure } from '../sso/failure.js';
import { errorAnswer, JSON_TYPE, methodNotAllowed, noteCode } from '../core/answer.js';
import { composeProvider, type ProviderParts } from '../core/compose.js';
import { ProviderCore } from '../core/provider.js';
import { actionOf, ALLOW, matchPath, type RoutePattern } from '../core/routes.js';
import { sealedSession, type SealedSession } from '../core/session.js';
import type { RecordUsageOptions } from '../core/usage.js';
import type { CommonProviderOptions, CompletionTarget, CoreAnswer, MarketplaceLogin, SealedSessionOptions } from '../core/types.js';

export type { CompletionTarget, ConnectorOptions, MarketplaceLogin, SealedSessionOptions } from '../core/types.js';
export type { MarketplaceSessionData } from '../sso/exchange.js';
export type { SsoFailure } from '../sso/failure.js';

/**
 * Your own session for the sign-in instead of `@fastify/session` or the sealed cookie: `set` keeps
 * the login after a successful sign-in (the access token included: keep it server-side), and may
 * set headers on `reply` (a cookie); `get` finds it again for `app.marketplace.session(request)`.
 */
export interface FastifySessionHooks {
  /** Keeps the login; called before the 303 to the dashboard is sent on `reply`. */
  set(request: FastifyRequest, reply: FastifyReply, login: MarketplaceSessionData): void | Promise<void>;
  /** The login kept for this request, if any (its `expiresAt` is checked by the plugin). */
  get(request: FastifyRequest): MarketplaceLogin | MarketplaceSessionData | undefined | Promise<MarketplaceLogin | MarketplaceSessionData | undefined>;
}

/** Single sign-on of {@link marketplacePlugin} (`GET /v1/sso`); needs `connector`. */
export interface FastifySsoOptions {
  /** Where a signed-in user lands. Default `/dashboard/<resource id>`. */
  dashboardUrl?: (resourceId: string) => string;
  /**
   * Where the login is kept. Default: `@fastify/session`'s `request.session` (register
   * `@fastify/cookie` and `@fastify/session` before the plugin), under `request.session.marketplace`
   * as `marketplaceRouter` keeps it in express-session. `{ secret }`: the package's sealed cookie,
   * as `createProvider` sets it. `{ get, set }`: your own session ({@link FastifySessionHooks}).
   */
  session?: SealedSessionOptions | FastifySessionHooks;
  /**
   * Answers a failed sign-in yourself (e.g. `reply.redirect('/login-failed')`); it must send the
   * reply. Default: an HTML page for browsers, JSON `{message}` otherwise.
   */
  onError?: (failure: SsoFailure, request: FastifyRequest, reply: FastifyReply) => void | Promise<void>;
}

/** Options of {@link marketplacePlugin}: the core's ({@link CommonProviderOptions}) and SSO. */
export interface MarketplacePluginOptions extends CommonProviderOptions {
  /** Serves `GET /v1/sso`. Needs `connector`. `true`: the defaults (`@fastify/session`). */
  sso?: FastifySsoOptions | boolean;
}

/** What the plugin decorates the host's instance with: `app.marketplace`. */
export interface FastifyMarketplace {
  /** Finish a long-running operation: store the outcome and send the callback. */
  complete(target: CompletionTarget, completion: Completion): Promise<void>;
  /** Operations waiting for `complete`, oldest first. Needs a store with `listPendingOperations`. */
  pendingOperations(limit?: number): Promise<OperationRecord[]>;
  /** Record usage for the measures route (the usage ledger); `at` in a closed period is refused unless `options.late` says otherwise (docs/usage.md). */
  recordUsage(resourceId: string, feature: string, quantity: number, at?: Date | number, options?: RecordUsageOptions): Promise<void>;
  /** Readiness: the store answers in time, and the outbox's oldest delivery age. */
  health(): Promise<HealthReport>;
  /**
   * Which resource the request's marketplace sign-in opens (from `@fastify/session`, the sealed
   * cookie or your `session.get`), when there is one and it has not expired; else undefined.
   */
  session(request: FastifyRequest): Promise<MarketplaceLogin | undefined>;
  /** The store in use. */
  readonly store: Store;
  /** Stop the callback worker and close the store (the plugin also does it from Fastify's `onClose`). */
  close(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The marketplace provider of `embedded-marketplace/fastify` (`app.register(marketplacePlugin, …)`). */
    marketplace: FastifyMarketplace;
  }
}

const FACTORY = 'marketplacePlugin';
const SSO_OFF = 'Single sign-on is not configured on this provider (marketplacePlugin options "sso" and "connector")';
/** Options Fastify's `register` itself reads; they reach the plugin too and are not ours. */
const REGISTER_OPTIONS = ['prefix', 'logLevel', 'logSerializers'] as const;
// Fastify 4 routes these methods (its `all`); Fastify 5 says which in `supportedMethods`.
const FASTIFY4_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS', 'PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK', 'TRACE', 'SEARCH', 'REPORT', 'MKCALENDAR'];
// The URL carries a single-use code: keep it out of caches and out of Referer headers.
const NO_STORE = { 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' } as const;
const HTML_TYPE = 'text/html; charset=utf-8';
const SESSION_HOWTO = 'request.session is missing: register @fastify/cookie and @fastify/session before the marketplace plugin, e.g. '
  + 'app.register(fastifyCookie); app.register(fastifySession, { secret, store }); app.register(marketplacePlugin, { ... }), '
  + 'or pass sso.session ({ secret } for the package\'s sealed cookie, or { get, set } for your own session)';

type SessionStore =
  | { type: 'fastify-session' }
  | { type: 'sealed'; sealed: SealedSession }
  | { type: 'hooks'; hooks: FastifySessionHooks };

/**
 * The provider side of the marketplace as a Fastify plugin (Fastify 4 and 5): signature
 * verification, the resource and credential routes with idempotency, measures, long-running
 * operations with durable callbacks, and single sign-on. Raw bytes reach the verifier whatever
 * content-type parsers the host app registered. `app.marketplace` drives the rest from your code
 * (`complete`, `recordUsage`, `health`, `session`, `close`); Fastify's `onClose` closes it.
 *
 * @throws {InvalidOptionsError} when the app loads the plugin, for a wrong option.
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import fastifyCookie from '@fastify/cookie';
 * import fastifySession from '@fastify/session';
 * import { marketplacePlugin } from 'embedded-marketplace/fastify';
 *
 * const app = Fastify();
 * await app.register(fastifyCookie);
 * await app.register(fastifySession, { secret: process.env.SESSION_SECRET!, cookie: { secure: 'auto' } });
 * await app.register(marketplacePlugin, {
 *   masterKey: process.env.MASTER_PUBLIC_KEY,
 *   publicHost: 'api.example.com',
 *   connector: { url: process.env.CONNECTOR_URL!, clientId, clientSecret },
 *   sso: { dashboardUrl: (id) => `/dashboard/${id}` },
 *   handlers,
 * });
 * app.get('/dashboard/:id', async (request, reply) => {
 *   const login = await app.marketplace.session(request);
 *   if (login === undefined) return reply.code(401).send({ message: 'Sign in through the marketplace' });
 *   return `Your bonnet ${login.resourceId}`;
 * });
 * await app.listen({ port: 4567 });
 * ```
 */
export const marketplacePlugin: FastifyPluginCallback<MarketplacePluginOptions> = Object.assign(
  function marketplacePlugin(fastify: FastifyInstance, options: MarketplacePluginOptions, done: (error?: Error) => void): void {
    let parts: ProviderParts | undefined;
    try {
      const own = asOptionsObject(FACTORY, options);
      const registerOptions: Record<string, unknown> = {};
      const providerOptions: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(own)) {
        if ((REGISTER_OPTIONS as readonly string[]).includes(key)) registerOptions[key] = value;
        else providerOptions[key] = value;
      }
      const ssoOption = readSsoOption(providerOptions.sso);
      parts = composeProvider(FACTORY, providerOptions as unknown as CommonProviderOptions, ['sso']);
      const opened = parts;
      const sso = ssoOption === undefined ? undefined : ssoSettings(ssoOption, opened);
      const core = new ProviderCore(opened, { ssoOff: SSO_OFF, basePath: basePathOf(registerOptions.prefix) });
      const marketplace: FastifyMarketplace = {
        complete: (target, completion) => core.complete(target, completion),
        pendingOperations: (limit) => core.pendingOperations(limit),
        recordUsage: opened.ledger.recordUsage,
        health: opened.health,
        session: (request) => (sso === undefined ? Promise.resolve(undefined) : sso.session(request)),
        store: opened.store,
        close: opened.close,
      };
      fastify.decorate('marketplace', marketplace);
      fastify.addHook('onClose', (_instance, closed) => {
        opened.close().then(() => closed(), closed);
      });
      // The routes in a context of their own (the host's parsers removed there only), under the
      // prefix given to register, if any.
      fastify.register(function marketplaceRoutes(child, _options, registered) {
        routes(child, core, sso);
        registered();
      }, registerOptions);
    } catch (error) {
      void parts?.close();
      done(error as Error);
      return;
    }
    done();
  },
  {
    // Like fastify-plugin: the plugin runs in the host's context, so `app.marketplace` and the
    // onClose hook land there; the routes get their own context, registered from here.
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'embedded-marketplace',
    [Symbol.for('plugin-meta')]: { name: 'embedded-marketplace', fastify: '4.x || 5.x' },
  },
);

/** Fastify's `prefix` as the core's base path: `/marketplace` (none for `''` or `/`). */
function basePathOf(prefix: unknown): string {
  if (typeof prefix !== 'string') return '';
  const trimmed = prefix.replace(/\/+$/, '');
  return trimmed === '' ? '' : trimmed.startsWith('/') ? trimmed : `/${trimmed}`;
}

/** The routes of the plugin, in their own context. */
function routes(fastify: FastifyInstance, core: ProviderCore, sso: SsoSettings | undefined): void {
  const { logger, signature } = core.parts;
  const log = core.log;

  // Only our parser here: the body stays unread for the core, whatever the host registered.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', function unread(_request: FastifyRequest, _payload: unknown, parsed: (error: Error | null, body?: unknown) => void): void {
    parsed(null, undefined);
  });

  /** Writes an answer through Fastify's reply (its onSend and onResponse hooks see it). */
  function send(reply: FastifyReply, answer: CoreAnswer): void {
    noteCode(reply.raw, answer.code);
    reply.code(answer.status);
    const headers = answer.headers;
    if (headers !== undefined) for (const name in headers) reply.header(name, headers[name]);
    if (answer.json !== undefined) reply.type(JSON_TYPE).send(JSON.stringify(answer.json));
    else if (answer.text !== undefined) reply.type(answer.type ?? 'text/plain; charset=utf-8').send(answer.text);
    else reply.send();
  }

  /**
   * The signature check on the raw request (the body read by the core, after the header checks)
   * and the body parsed as JSON; then `serve` answers (null: verified but none of our routes, left
   * to the host's 404 handler as any other path).
   */
  function verified(request: FastifyRequest, reply: FastifyReply, path: string, serve: (query: string, headers: IncomingMessage['headers'], body: unknown, accepted: Accepted) => Promise<CoreAnswer> | CoreAnswer | null): void {
    const raw: IncomingMessage = request.raw;
    const url = raw.url ?? request.url;
    const method = request.method;
    const headers = raw.headers;
    if (log.enabled()) log.watch(reply.raw, method, path, headers['x-callback-id'], String(request.id));
    const onceEach = sentOnceEach(raw);
    signature.check({ method, url, headers, onceEach, distinct: onceEach ? undefined : raw.headersDistinct, body: { stream: raw } }, (failure, accepted) => {
      if (accepted === undefined) {
        send(reply, errorAnswer(failure, logger));
        return;
      }
      let body: unknown;
      try {
        body = core.parseBody(headers, accepted);
      } catch (error) {
        send(reply, errorAnswer(error, logger));
        return;
      }
      if (body !== undefined) request.body = body;
      const mark = url.indexOf('?');
      const answer = serve(mark === -1 ? '' : url.slice(mark + 1), headers, body, accepted);
      if (answer === null) reply.callNotFound();
      else if (answer instanceof Promise) void answer.then((done) => send(reply, done));
      else send(reply, answer);
    });
  }

  /** One of our three signed routes, as Fastify routed it (`request.params.id` decoded by Fastify). */
  function signedRoute(route: Exclude<RoutePattern, '/v1/sso'>): RouteHandler {
    return function marketplaceRoute(request, reply): void {
      const id = (request.params as Record<string, string | undefined>).id ?? '';
      verified(request, reply, relativePath(request), (query, headers, body, accepted) =>
        core.serve(route, actionOf(route, request.method), id, query, headers, body, accepted.verified, String(request.id)));
    };
  }

  /**
   * Any other path under our prefixes, and ours in another case (`/V1/Resources/x`): routed by the
   * core as Express routes them (any case, an optional trailing slash), after the signature check.
   */
  function otherPath(request: FastifyRequest, reply: FastifyReply): void | Promise<void> {
    const path = relativePath(request);
    const match = matchPath(path);
    if (match?.type === 'sso') return signOn(request, reply);
    verified(request, reply, path, (query, headers, body, accepted) =>
      (match?.type === 'route' ? core.serveMatched(match, request.method, query, headers, body, accepted.verified, String(request.id)) : null));
  }

  async function signOn(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (log.enabled()) log.watch(reply.raw, request.method, '/v1/sso', request.raw.headers['x-callback-id'], String(request.id));
    if (sso === undefined) {
      send(reply, { status: 404, json: { message: core.ssoOff }, code: 'ERR_NOT_FOUND' });
      return;
    }
    await sso.answer(request, reply, send);
  }

  /** The path relative to where the plugin is mounted (its prefix), without the query. */
  function relativePath(request: FastifyRequest): string {
    const url = request.raw.url ?? request.url;
    const mark = url.indexOf('?');
    return core.relative(mark === -1 ? url : url.slice(0, mark)) ?? '/';
  }

  // Fastify 5 refuses a Content-Type it cannot parse (415) before any handler runs: on our routes
  // the core decides instead (an unsigned request is a 401 whatever its type), as on every host.
  // Any other error (a host hook's) goes on to the host's error handler.
  fastify.setErrorHandler(function marketplaceErrors(error: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void | Promise<void> {
    const handler = (request.routeOptions.config as { marketplace?: RouteHandler }).marketplace;
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' && !reply.sent && handler !== undefined) return handler(request, reply);
    throw error;
  });

  const methods: readonly string[] = (fastify as FastifyInstance & { supportedMethods?: readonly string[] }).supportedMethods ?? FASTIFY4_METHODS;
  // Express serves `/v1/resources/x/` as `/v1/resources/x`: so do we, unless the host's router
  // already ignores trailing slashes (then registering both throws, and one is enough).
  let slashes = true;
  function register(url: string, handler: RouteHandler): void {
    const route = { method: [...methods], exposeHeadRoute: false, handler, config: { marketplace: handler } };
    if (!url.endsWith('/')) {
      fastify.route({ ...route, url });
      return;
    }
    if (!slashes) return;
    try {
      fastify.route({ ...route, url });
    } catch (error) {
      // Fastify 5 names the error; Fastify 4 passes on its router's.
      if ((error as { code?: unknown }).code !== 'FST_ERR_DUPLICATED_ROUTE' && !/already declared/.test(String((error as Error).message))) throw error;
      slashes = false;
    }
  }
  for (const route of ['/v1/resources/:id', '/v1/resources/:id/measures', '/v1/credentials/:id'] as const) {
    const handler = signedRoute(route);
    register(route, handler);
    register(`${route}/`, handler);
  }
  register('/v1/sso', signOn);
  register('/v1/sso/', signOn);
  // Everything else under our prefixes is verified too (an unsigned request gets a 401 whatever the
  // path), then left to the host's routes and 404 handler; and our paths in another case.
  for (const url of ['/v1/resources', '/v1/resources/', '/v1/resources/*', '/v1/credentials', '/v1/credentials/', '/v1/credentials/*', ...ANY_CASE]) register(url, otherPath);
}

type RouteHandler = (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>;

/** `[vV]1` for `v1`: a segment in any case, as a regular expression. */
const anyCase = (word: string): string => word.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`);
const VERSION = `:marketplaceVersion(^${anyCase('v1')}$)`;
const COLLECTION = `:marketplaceCollection(^(?:${anyCase('resources')}|${anyCase('credentials')}|${anyCase('sso')})$)`;
const MEASURES = `:marketplaceMeasures(^${anyCase('measures')}$)`;
/**
 * Our paths in another case than the routes': routes of regular-expression parameters, which the
 * router tries only after its static segments failed (`/V1/Resources/x`), so the lowercase paths keep
 * their named routes. Express matches paths in any case; so does the plugin, whatever the host's
 * router's `caseSensitive`.
 */
const ANY_CASE = [`/${VERSION}/${COLLECTION}`, `/${VERSION}/${COLLECTION}/`, `/${VERSION}/${COLLECTION}/:id`, `/${VERSION}/${COLLECTION}/:id/`,
  `/${VERSION}/${COLLECTION}/:id/${MEASURES}`, `/${VERSION}/${COLLECTION}/:id/${MEASURES}/`, `/${VERSION}/${COLLECTION}/*`];

// ---------------------------------------------------------------------------------------------
// Single sign-on
// ---------------------------------------------------------------------------------------------

interface SsoSettings {
  answer(request: FastifyRequest, reply: FastifyReply, send: (reply: FastifyReply, answer: CoreAnswer) => void): Promise<void>;
  session(request: FastifyRequest): Promise<MarketplaceLogin | undefined>;
}

function readSsoOption(value: unknown): FastifySsoOptions | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return {};
  if (typeof value !== 'object' || value === null) throw new InvalidOptionsError(`${FACTORY}: option "sso" must be true, false or { dashboardUrl, session, onError }`);
  return value;
}

function ssoSettings(options: FastifySsoOptions, parts: ProviderParts): SsoSettings {
  const name = `${FACTORY}: option "sso"`;
  const raw = asOptionsObject(name, options);
  rejectUnknownKeys(name, raw, ['dashboardUrl', 'session', 'onError']);
  const connector = parts.connector;
  if (connector === undefined) throw new InvalidOptionsError(`${FACTORY}: option "sso" needs option "connector" (the connector exchanges the code and checks the resource)`);
  const dashboardUrl = optionalFunction<(resourceId: string) => string>(name, raw, 'dashboardUrl') ?? defaultDashboardUrl;
  const onError = optionalFunction<NonNullable<FastifySsoOptions['onError']>>(name, raw, 'onError');
  const now = parts.clock.now;
  const logger = parts.logger.child({ component: 'sso' });
  const store = readSessionStore(raw.session, now);
  const signIn = signInSteps({ connector, dashboardUrl, tokenTtlMs: MAX_SSO_SESSION_MS, now, logger });

  async function failed(request: FastifyRequest, reply: FastifyReply, send: (reply: FastifyReply, answer: CoreAnswer) => void, failure: SsoFailure): Promise<void> {
    if (onError !== undefined) {
      reply.headers(NO_STORE);
      await onError(failure, request, reply);
      return;
    }
    const accept = request.headers.accept;
    send(reply, prefersHtml(Array.isArray(accept) ? accept.join(', ') : accept)
      ? { status: failure.status, text: errorPage(failure), type: HTML_TYPE, headers: NO_STORE }
      : { status: failure.status, json: { message: failure.message }, headers: NO_STORE });
  }

  async function answer(request: FastifyRequest, reply: FastifyReply, send: (reply: FastifyReply, answer: CoreAnswer) => void): Promise<void> {
    // A link checker's HEAD must not burn the single-use code.
    if (request.method !== 'GET') {
      const refusal = methodNotAllowed('/v1/sso', 'Single sign-on only answers GET');
      send(reply, { ...refusal, headers: { Allow: ALLOW['/v1/sso'], ...NO_STORE } });
      return;
    }
    const session = store.type === 'fastify-session' ? sessionOf(request) : undefined;
    if (store.type === 'fastify-session' && session === undefined) {
      logger.error({ code: 'ERR_SSO_SESSION_MISSING' }, `single sign-on: ${SESSION_HOWTO}`);
      await failed(request, reply, send, { status: 500, reason: 'not-configured', message: SSO_MESSAGES.notConfigured });
      return;
    }
    const query = request.query as Record<string, unknown>;
    const result = await signIn(query.code, query.resource_id);
    if (!result.ok) {
      await failed(request, reply, send, result.failure);
      return;
    }
    const { login, location } = result;
    try {
      if (store.type === 'sealed') reply.header('Set-Cookie', store.sealed.cookie(login, request.protocol === 'https'));
      else if (store.type === 'hooks') await store.hooks.set(request, reply, login);
      else await keepInSession(request, session!, login);
    } catch (err) {
      logger.error({ resourceId: login.resourceId, err: safeErr(err) }, store.type === 'hooks'
        ? 'single sign-on failed: the session hook could not keep the login (sso.session.set threw)'
        : 'single sign-on failed: could not keep the login in the session (is the session store up?)');
      await failed(request, reply, send, { status: 500, reason: 'internal', message: SSO_MESSAGES.internal });
      return;
    }
    logger.info({ resourceId: login.resourceId }, 'single sign-on succeeded');
    send(reply, { status: 303, headers: { ...NO_STORE, Location: location } });
  }

  async function session(request: FastifyRequest): Promise<MarketplaceLogin | undefined> {
    let found: unknown;
    if (store.type === 'sealed') {
      const cookie = request.headers.cookie;
      return store.sealed.open(Array.isArray(cookie) ? cookie.join('; ') : cookie);
    }
    if (store.type === 'hooks') found = await store.hooks.get(request);
    else found = (sessionOf(request) as { marketplace?: unknown } | undefined)?.marketplace;
    if (typeof found !== 'object' || found === null) return undefined;
    const { resourceId, expiresAt } = found as Partial<MarketplaceLogin>;
    if (typeof resourceId !== 'string' || typeof expiresAt !== 'number' || !(now() < expiresAt)) return undefined;
    return { resourceId, expiresAt };
  }

  return { answer, session };
}

function readSessionStore(value: unknown, now: () => number): SessionStore {
  if (value === undefined) return { type: 'fastify-session' };
  const hint = `${FACTORY}: option "sso.session" must be { secret } for the package's sealed cookie, or { get, set } for your own session; leave it out to use @fastify/session`;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionsError(hint);
  const hooks = value as Partial<FastifySessionHooks>;
  if (typeof hooks.get === 'function' || typeof hooks.set === 'function') {
    if (typeof hooks.get !== 'function' || typeof hooks.set !== 'function') throw new InvalidOptionsError(`${FACTORY}: option "sso.session" needs both get(request) and set(request, reply, login)`);
    return { type: 'hooks', hooks: hooks as FastifySessionHooks };
  }
  if (!('secret' in value)) throw new InvalidOptionsError(hint);
  return { type: 'sealed', sealed: sealedSession(FACTORY, value as SealedSessionOptions, now) };
}

/**
 * @fastify/session's session as this plugin uses it: the callback forms of regenerate, save and
 * destroy, which every version has (the promise forms came later).
 */
interface FastifySession {
  regenerate(callback: (error?: unknown) => void): void;
  save(callback: (error?: unknown) => void): void;
  destroy(callback: (error?: unknown) => void): void;
  marketplace?: MarketplaceSessionData;
}

/** The request's @fastify/session session, or undefined when no session plugin ran. */
function sessionOf(request: FastifyRequest): FastifySession | undefined {
  const session = (request as FastifyRequest & { session?: unknown }).session;
  if (typeof session !== 'object' || session === null) return undefined;
  const s = session as Partial<Record<'regenerate' | 'save' | 'destroy', unknown>>;
  return typeof s.regenerate === 'function' && typeof s.save === 'function' && typeof s.destroy === 'function' ? session : undefined;
}

const settle = (step: (callback: (error?: unknown) => void) => void): Promise<void> =>
  new Promise((resolve, reject) => step((error) => (error === undefined || error === null ? resolve() : reject(error instanceof Error ? error : new Error('session store failed')))));

/**
 * The login in @fastify/session as marketplaceRouter keeps it in express-session: a new session id
 * (an id planted in the browser beforehand is worthless), the login under `marketplace`, saved.
 */
async function keepInSession(request: FastifyRequest, session: FastifySession, login: MarketplaceSessionData): Promise<void> {
  await settle((done) => session.regenerate(done));
  // regenerate() replaces request.session.
  const fresh = sessionOf(request) ?? session;
  fresh.marketplace = login;
  try {
    await settle((done) => fresh.save(done));
  } catch (error) {
    // Destroyed (not just cleared): the half-made login is not saved at the end of the request.
    delete fresh.marketplace;
    await settle((done) => fresh.destroy(done)).catch(() => undefined);
    throw error;
  }
}
