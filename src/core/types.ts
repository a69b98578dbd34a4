/**
 * The framework-free provider core: its options, the `Provider` it returns, and the plain shapes an
 * adapter (Express, Fastify, a fetch host) builds from its framework's request and renders back.
 * Nothing here knows Express or Fastify: a request is method, target, headers and body bytes; an
 * answer is status, headers and a body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../lib/logger.js';
import type { HealthReport } from '../observability/health-check.js';
import type { MetricsOptions } from '../observability/index.js';
import type { OutboxOptions } from '../outbox/index.js';
import type { OperationRecord, Store } from '../store/types.js';
import type { Catalog, Completion, ProviderHandlers, ValidateHook } from '../domain/handlers.js';
import type { SsoFailure } from '../sso/failure.js';
import type { MarketplaceSessionData } from '../sso/exchange.js';
import type { RecordUsageOptions, UsageOptions } from './usage.js';

/** How the provider reaches the marketplace's connector (callbacks and single sign-on). */
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

/** Which entity a `complete` call finishes. */
export interface CompletionTarget {
  entity: 'resource' | 'credential';
  id: string;
}

/**
 * The options `createProvider` and `marketplaceRouter` share: everything but how the host app
 * hands requests over and keeps sessions.
 *
 * @example
 * ```ts
 * const common: CommonProviderOptions = { handlers, store, catalog, masterKey, publicHost: 'api.example.com' };
 * const router = marketplaceRouter({ ...common, sso: true });
 * const provider = createProvider({ ...common, sso: { session: { secret } } });
 * ```
 */
export interface CommonProviderOptions extends UsageOptions {
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
   * The callback delivery worker (on when `connector` is set). `false` runs none in this process:
   * callbacks are still stored durably, and another process's worker (or `embedded-marketplace
   * outbox`) sends them. Use it to run delivery apart from the HTTP servers (docs/outbox.md).
   */
  outbox?: Pick<OutboxOptions, 'pollIntervalMs' | 'leaseMs' | 'sendTimeoutMs' | 'batchSize' | 'concurrency' | 'backoff'> | false;
  /** Prometheus metrics: `{ registry }`, a prom-client Registry (docs/observability.md). */
  metrics?: MetricsOptions;
  /** What `health()` checks (docs/observability.md): store answer time, outbox age. */
  health?: { timeoutMs?: number; outboxMaxAgeMs?: number };
}

/**
 * What a marketplace sign-in leaves for the dashboard: the one resource it opens and until when.
 * The connector's access token is not part of it unless the host keeps it through {@link SessionHooks}.
 *
 * @example
 * ```ts
 * const login = await provider.session(request); // MarketplaceLogin | undefined
 * if (login?.resourceId !== params.id) return new Response('{"message":"Sign in again"}', { status: 401 });
 * ```
 */
export interface MarketplaceLogin {
  /** The one resource this login may open. */
  resourceId: string;
  /** When the login ends (ms since the epoch): the token's expiry, at most 24 h after sign-in. */
  expiresAt: number;
}

/**
 * The package's own session: a sealed cookie (AES-256-GCM, the key derived from `secret`) that
 * holds the resource and the expiry, never the access token. HttpOnly, SameSite=Lax, Secure when the
 * request arrived over https.
 */
/**
 * @example
 * ```ts
 * createProvider({ ...options, sso: { session: { secret: [process.env.SSO_SESSION_SECRET!, process.env.SSO_SESSION_SECRET_OLD!] } } });
 * ```
 */
export interface SealedSessionOptions {
  /**
   * At least 32 characters of randomness (`openssl rand -base64 32`). A list rotates: the first
   * seals new cookies, every one of them opens cookies (drop the old one after 24 h, the longest a
   * login lasts).
   */
  secret: string | readonly string[];
  /** The cookie's name. Default `marketplace_session`. */
  cookieName?: string;
  /** The cookie's Path. Default `/`. */
  path?: string;
  /**
   * `true` always marks the cookie Secure, `false` never; default `'auto'`: Secure when the request
   * URL is https (behind a TLS-terminating proxy on the node path, set `true`).
   */
  secure?: boolean | 'auto';
}

/**
 * Headers a session hook adds to the sign-in's redirect: a `Headers`, a record or a list of pairs.
 *
 * @example
 * ```ts
 * return [['Set-Cookie', `sid=${id}; Path=/; HttpOnly`], ['Set-Cookie', 'seen=1; Path=/']];
 * ```
 */
export type SessionHeaders = Headers | Readonly<Record<string, string | readonly string[]>> | readonly (readonly [string, string])[];

/**
 * The host's own session instead of the sealed cookie: after a successful sign-in `set` stores the
 * login (the access token included, server-side) and answers the headers the redirect carries (its
 * Set-Cookie); `get` finds it again for `provider.session(request)`.
 *
 * @example
 * ```ts
 * const session: SessionHooks = {
 *   async set(_request, login) { const id = await sessions.create(login); return { 'Set-Cookie': `sid=${id}; Path=/; HttpOnly; Secure; SameSite=Lax` }; },
 *   async get(request) { const id = /sid=([^;]+)/.exec(request.headers.get('cookie') ?? '')?.[1]; return id === undefined ? undefined : sessions.find(id); },
 * };
 * ```
 */
export interface SessionHooks {
  /** Stores the login; the returned headers (e.g. `Set-Cookie`) go on the 303 to the dashboard. */
  set(request: Request, login: MarketplaceSessionData): SessionHeaders | undefined | void | Promise<SessionHeaders | undefined | void>;
  /** The login stored for this request, if any (`expiresAt` is checked by the provider). */
  get(request: Request): MarketplaceLogin | MarketplaceSessionData | undefined | Promise<MarketplaceLogin | MarketplaceSessionData | undefined>;
}

/**
 * Single sign-on of `createProvider` (`GET /v1/sso`); needs `connector`.
 *
 * @example
 * ```ts
 * sso: { session: { secret: process.env.SSO_SESSION_SECRET! }, dashboardUrl: (id) => `/app/${id}` }
 * ```
 */
export interface ProviderSsoOptions {
  /** Where a signed-in user lands. Default `/dashboard/<resource id>`. */
  dashboardUrl?: (resourceId: string) => string;
  /** The package's sealed cookie (`{ secret }`), or your own session through {@link SessionHooks}. Required. */
  session: SealedSessionOptions | SessionHooks;
  /**
   * Answers a failed sign-in yourself (e.g. a redirect to your own page). Default: an HTML page for
   * browsers, JSON `{message}` otherwise.
   */
  onError?: (failure: SsoFailure, request: Request) => Response | Promise<Response>;
}

/**
 * Options of `createProvider`.
 *
 * @example
 * ```ts
 * const options: ProviderOptions = { handlers, masterKey: process.env.MASTER_PUBLIC_KEY, publicHost: 'api.example.com', basePath: '/marketplace' };
 * ```
 */
export interface ProviderOptions extends CommonProviderOptions {
  /** Serves `GET /v1/sso`. Needs `connector`. */
  sso?: ProviderSsoOptions | false;
  /**
   * The path the provider's routes sit under when the host hands over whole URLs (`/marketplace`
   * for `/marketplace/v1/resources/:id`). Default none. Node hosts that mount (Connect's
   * `app.use('/marketplace', provider.node)`) need none: the mount is stripped from `req.url`.
   */
  basePath?: string;
}

/**
 * The provider side of the marketplace without a framework: the signed resource and credential
 * routes, measures and single sign-on behind `fetch` and `node`, plus what your own code drives.
 *
 * @example
 * ```ts
 * const provider: Provider = createProvider(options);
 * export const PUT = (request: Request) => provider.fetch(request);
 * await provider.complete({ entity: 'resource', id }, { state: 'done' });
 * ```
 */
export interface Provider {
  /**
   * The Web-standard handler (Next.js route handlers, Hono, Deno, Bun, any `Request → Response`
   * host): answers the signed routes, measures and `/v1/sso`, and a JSON 404 for anything else.
   */
  fetch(request: Request): Promise<Response>;
  /**
   * The node:http and Connect-style handler: answers our paths, calls `next()` for the others (a
   * JSON 404 when there is no `next`). Reads the body from the stream itself: mount it before any
   * body parser.
   */
  node(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void;
  /**
   * Which resource the request's sign-in opens: the sealed cookie's (or your `session.get`'s)
   * login when there is one and it has not expired, else undefined. Takes a Web `Request` or a
   * node request (anything with `headers`).
   */
  session(request: Request | Pick<IncomingMessage, 'headers'>): Promise<MarketplaceLogin | undefined>;
  /** Finish a long-running operation: store the outcome and send the callback. */
  complete(target: CompletionTarget, completion: Completion): Promise<void>;
  /** Operations waiting for `complete`, oldest first. Needs a store with `listPendingOperations`. */
  pendingOperations(limit?: number): Promise<OperationRecord[]>;
  /** Record usage for the measures route (the usage ledger); `at` in a closed period is refused unless `options.late` says otherwise (docs/usage.md). */
  recordUsage(resourceId: string, feature: string, quantity: number, at?: Date | number, options?: RecordUsageOptions): Promise<void>;
  /** Readiness: the store answers in time, and the outbox's oldest delivery age. */
  health(): Promise<HealthReport>;
  /** The store in use. */
  readonly store: Store;
  /** Stop the callback worker and close the store. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// What adapters build and render (internal: not exported from the package root).
// ---------------------------------------------------------------------------------------------

/** Header values as node keeps them: lowercase names, arrays for repeats. */
export type CoreHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * How an adapter hands over the body bytes. The core reads them only after the cheap header checks
 * passed, so an unsigned request is refused before its body is buffered.
 * - `stream`: a node request (node:http, Connect, Express, Fastify's `request.raw`) the core reads
 *   itself, within the body limit and timeout; bytes an earlier body parser kept (`req.rawBody`, or
 *   `req.body` as a Buffer) are used instead.
 * - `bytes`: the body already read (a content-type parser that kept the raw Buffer).
 * - `read`: reads them on demand (a Web `Request`), refusing more than `limit` bytes or a wait past
 *   `timeoutMs` with the core's errors.
 */
export type BodySource =
  | { readonly stream: IncomingMessage }
  | { readonly bytes: Uint8Array }
  | { readonly read: (limit: number, timeoutMs: number) => Promise<Uint8Array> };

/** A request as the core sees it. */
export interface CoreRequest {
  /** Upper-case method. */
  method: string;
  /** The request target as on the wire, mount included: what the marketplace signed (`/v1/resources/x?y`). */
  url: string;
  /** The path relative to where the provider is mounted, without the query: what the routes match. */
  path: string;
  /** The raw query string after `?` (empty when none). */
  query: string;
  headers: CoreHeaders;
  /** True when no header name came twice (node: `rawHeaders` has two entries per header). */
  onceEach: boolean;
  body: BodySource;
  /** The host app's id for the request (pino-http's `req.id`), for the log line and handlers. */
  reqId?: string | undefined;
}

/** An answer as the core makes it; an adapter writes it out as is. */
export interface CoreAnswer {
  status: number;
  /** A JSON value, rendered with `application/json; charset=utf-8` and its length. */
  json?: unknown;
  /** A body already as text (the SSO pages), with `type` its Content-Type. */
  text?: string;
  type?: string;
  /** Extra headers (Allow, Location, Set-Cookie, Cache-Control …). */
  headers?: Readonly<Record<string, string | readonly string[]>>;
  /** The error code, for the log line and the metrics (never sent). */
  code?: string | undefined;
}
