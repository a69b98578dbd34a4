/**
 * `GET /v1/sso` on the core: the sign-in steps (sso/exchange.ts), then the login kept in the
 * package's sealed cookie or handed to the host's session hooks, and a 303 to the dashboard.
 * Failures answer a small HTML page to browsers, JSON `{message}` otherwise, or the `onError` hook's
 * Response. The code, the token and the cookie never reach a log line.
 */
import type { IncomingMessage } from 'node:http';
import { InvalidOptionsError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, optionalFunction, rejectUnknownKeys } from '../lib/options.js';
import type { ConnectorClient } from '../connector/client.js';
import { defaultDashboardUrl, MAX_SSO_SESSION_MS, safeErr, signInSteps, SSO_MESSAGES, type MarketplaceSessionData } from '../sso/exchange.js';
import { errorPage, prefersHtml, type SsoFailure } from '../sso/failure.js';
import { methodNotAllowed } from './answer.js';
import { parseQuery } from './routes.js';
import { sealedSession, type SealedSession } from './session.js';
import type { CoreAnswer, CoreHeaders, MarketplaceLogin, ProviderSsoOptions, SessionHeaders, SessionHooks } from './types.js';

/** The SSO request as the core needs it. */
export interface SsoRequest {
  method: string;
  query: string;
  headers: CoreHeaders;
  /** Whether the request came over https (the cookie's Secure flag). */
  secure: boolean;
  /** The request as a Web `Request`, for the hooks (built on demand on the node path). */
  webRequest: () => Request;
}

/** The answer of `/v1/sso`: the core's, or the Response of a hook. */
export type SsoAnswer = CoreAnswer | Response;

export interface SsoCore {
  answer(request: SsoRequest): Promise<SsoAnswer>;
  session(request: Request | Pick<IncomingMessage, 'headers'>, toWeb: (request: Pick<IncomingMessage, 'headers'>) => Request): Promise<MarketplaceLogin | undefined>;
}

// The URL carries a single-use code: keep it out of caches and out of Referer headers.
const NO_STORE = { 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' } as const;
const HTML_TYPE = 'text/html; charset=utf-8';

/**
 * Reads the `sso` option of `createProvider`, throwing at construction with a hint (before anything
 * is started); the answer builds the SSO core once the connector and the logger exist.
 */
export function ssoCore(factory: string, value: ProviderSsoOptions, hasConnector: boolean, now: () => number): (connector: ConnectorClient, parentLogger: Logger) => SsoCore {
  const name = `${factory}: option "sso"`;
  const raw = asOptionsObject(name, value);
  rejectUnknownKeys(name, raw, ['dashboardUrl', 'session', 'onError']);
  if (!hasConnector) throw new InvalidOptionsError(`${factory}: option "sso" needs option "connector" (the connector exchanges the code and checks the resource)`);
  const dashboardUrl = optionalFunction<(resourceId: string) => string>(name, raw, 'dashboardUrl') ?? defaultDashboardUrl;
  const onError = optionalFunction<NonNullable<ProviderSsoOptions['onError']>>(name, raw, 'onError');
  const store = readSession(factory, raw.session, now);
  return (connector, parentLogger) => buildSso(connector, createLogger(parentLogger, { component: 'sso' }), store, dashboardUrl, onError, now);
}

function buildSso(connector: ConnectorClient, logger: Logger, store: SessionStore, dashboardUrl: (resourceId: string) => string, onError: ProviderSsoOptions['onError'], now: () => number): SsoCore {
  const signIn = signInSteps({ connector, dashboardUrl, tokenTtlMs: MAX_SSO_SESSION_MS, now, logger });

  async function failed(request: SsoRequest, failure: SsoFailure): Promise<SsoAnswer> {
    if (onError !== undefined) {
      try {
        return withHeaders(await onError(failure, request.webRequest()), NO_STORE);
      } catch (err) {
        logger.error({ err: safeErr(err) }, 'single sign-on: the onError hook threw; answering the default page');
      }
    }
    const headers = NO_STORE;
    return prefersHtml(single(request.headers.accept))
      ? { status: failure.status, text: errorPage(failure), type: HTML_TYPE, headers }
      : { status: failure.status, json: { message: failure.message }, headers };
  }

  async function answer(request: SsoRequest): Promise<SsoAnswer> {
    // A link checker's HEAD must not burn the single-use code.
    if (request.method !== 'GET') {
      const refusal = methodNotAllowed('/v1/sso', 'Single sign-on only answers GET');
      return { ...refusal, headers: { ...refusal.headers, ...NO_STORE } };
    }
    const query = parseQuery(request.query);
    const result = await signIn(query.code, query.resource_id);
    if (!result.ok) return failed(request, result.failure);
    const { login, location } = result;
    let cookie: Record<string, string | readonly string[]>;
    try {
      cookie = store.type === 'sealed'
        ? { 'Set-Cookie': store.sealed.cookie(login, request.secure) }
        : headerRecord(await store.hooks.set(request.webRequest(), login));
    } catch (err) {
      logger.error({ resourceId: login.resourceId, err: safeErr(err) }, 'single sign-on failed: the session hook could not keep the login (sso.session.set threw)');
      return failed(request, { status: 500, reason: 'internal', message: SSO_MESSAGES.internal });
    }
    logger.info({ resourceId: login.resourceId }, 'single sign-on succeeded');
    return { status: 303, headers: { ...cookie, ...NO_STORE, Location: location } };
  }

  async function session(request: Request | Pick<IncomingMessage, 'headers'>, toWeb: (request: Pick<IncomingMessage, 'headers'>) => Request): Promise<MarketplaceLogin | undefined> {
    const web = isWebRequest(request);
    if (store.type === 'sealed') return store.sealed.open(web ? request.headers.get('cookie') : single(request.headers.cookie));
    const found = await store.hooks.get(web ? request : toWeb(request));
    if (typeof found !== 'object' || found === null) return undefined;
    const { resourceId, expiresAt } = found as Partial<MarketplaceLogin>;
    if (typeof resourceId !== 'string' || typeof expiresAt !== 'number' || !(now() < expiresAt)) return undefined;
    return { resourceId, expiresAt };
  }

  return { answer, session };
}

type SessionStore = { type: 'sealed'; sealed: SealedSession } | { type: 'hooks'; hooks: SessionHooks };

function readSession(factory: string, value: unknown, now: () => number): SessionStore {
  const hint = `${factory}: option "sso.session" is required: { secret } for the package's sealed cookie (SSO_SESSION_SECRET, 32+ random characters), or { get, set } for your own session (docs/core.md)`;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionsError(hint);
  const hooks = value as Partial<SessionHooks>;
  if (typeof hooks.get === 'function' || typeof hooks.set === 'function') {
    if (typeof hooks.get !== 'function' || typeof hooks.set !== 'function') throw new InvalidOptionsError(`${factory}: option "sso.session" needs both get(request) and set(request, login)`);
    return { type: 'hooks', hooks: hooks as SessionHooks };
  }
  if (!('secret' in value)) throw new InvalidOptionsError(hint);
  return { type: 'sealed', sealed: sealedSession(factory, value as never, now) };
}

function isWebRequest(request: Request | Pick<IncomingMessage, 'headers'>): request is Request {
  return typeof (request.headers as { get?: unknown }).get === 'function';
}

function single(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}

/** A hook's headers as a record (Set-Cookie kept as a list). */
function headerRecord(headers: SessionHeaders | undefined | void): Record<string, string | readonly string[]> {
  const out: Record<string, string[]> = {};
  if (headers === undefined) return out;
  const add = (name: string, value: string): void => void (out[name] ??= []).push(value);
  if (headers instanceof Headers) {
    for (const cookie of headers.getSetCookie()) add('Set-Cookie', cookie);
    for (const [name, value] of headers) if (name !== 'set-cookie') add(name, value);
  } else if (Array.isArray(headers)) {
    for (const [name, value] of headers as readonly (readonly [string, string])[]) add(name, value);
  } else {
    for (const [name, value] of Object.entries(headers as Record<string, string | readonly string[]>)) {
      if (typeof value === 'string') add(name, value);
      else for (const one of value) add(name, one);
    }
  }
  return out;
}

/** A hook's Response with our headers added (a Response.redirect's headers are immutable: copy). */
function withHeaders(response: Response, extra: Readonly<Record<string, string>>): Response {
  if (!(response instanceof Response)) throw new TypeError('sso.onError must return a Response');
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(extra)) if (!headers.has(name)) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

export type { MarketplaceSessionData };
