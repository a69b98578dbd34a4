/**
 * The provider's paths, matched as Express matches its routes (case-insensitive, an optional
 * trailing slash, the id percent-decoded), so that every host routes them alike: the core for
 * `fetch` and `node`, and the route labels of the log line and the metrics for every adapter.
 */
import { MarketplaceError } from '../errors.js';
import type { OperationKind } from '../domain/records.js';

/** The route patterns, as Express routes and metric labels name them. */
export type RoutePattern = '/v1/resources/:id' | '/v1/resources/:id/measures' | '/v1/credentials/:id' | '/v1/sso';

/** What a path relative to the mount is, for the provider. */
export type PathMatch =
  /** One of the signed routes; `rawId` as in the path (still percent-encoded). */
  | { readonly type: 'route'; readonly route: Exclude<RoutePattern, '/v1/sso'>; readonly rawId: string }
  /** Under `/v1/resources` or `/v1/credentials` but none of the routes: verified, then not ours. */
  | { readonly type: 'signed' }
  | { readonly type: 'sso' }
  /** Not ours at all. */
  | undefined;

const SIGNED_PREFIX = /^\/v1\/(?:resources|credentials)(?:\/|$)/i;
const SIGNED_ROUTE = /^\/v1\/(resources|credentials)\/([^/]+?)(\/measures)?\/?$/i;
const SSO_ROUTE = /^\/v1\/sso\/?$/i;
const CREDENTIALS = 'credentials';
const SIGNED: PathMatch = Object.freeze({ type: 'signed' });
const SSO: PathMatch = Object.freeze({ type: 'sso' });

/** Classifies a path (relative to where the provider is mounted, no query). */
export function matchPath(path: string): PathMatch {
  if (SIGNED_PREFIX.test(path)) {
    const match = SIGNED_ROUTE.exec(path);
    if (match === null) return SIGNED;
    // 'resources' or 'credentials' in any case: the lengths tell them apart without lowercasing.
    const credentials = match[1]!.length === CREDENTIALS.length;
    const measures = match[3] !== undefined;
    if (credentials && measures) return SIGNED;
    return { type: 'route', route: credentials ? '/v1/credentials/:id' : measures ? '/v1/resources/:id/measures' : '/v1/resources/:id', rawId: match[2]! };
  }
  return SSO_ROUTE.test(path) ? SSO : undefined;
}

/** True for the paths that are verified before anything else (an unsigned one gets 401 whatever follows). */
export function isSignedPath(path: string): boolean {
  return SIGNED_PREFIX.test(path);
}

/** What a route does for a method: an operation, the measures, or nothing (405). HEAD is served as GET. */
export type RouteAction = OperationKind | 'measures';

const RESOURCE_METHODS: Readonly<Record<string, OperationKind>> = Object.assign(Object.create(null) as Record<string, OperationKind>, { PUT: 'provision', PATCH: 'changePlan', DELETE: 'deprovision' });
const CREDENTIAL_METHODS: Readonly<Record<string, OperationKind>> = Object.assign(Object.create(null) as Record<string, OperationKind>, { PUT: 'provisionCredentials', DELETE: 'deprovisionCredentials' });

export function actionOf(route: Exclude<RoutePattern, '/v1/sso'>, method: string): RouteAction | undefined {
  switch (route) {
    case '/v1/resources/:id':
      return RESOURCE_METHODS[method];
    case '/v1/credentials/:id':
      return CREDENTIAL_METHODS[method];
    default:
      return method === 'GET' || method === 'HEAD' ? 'measures' : undefined;
  }
}

/** The Allow header of a route's 405. */
export const ALLOW: Readonly<Record<RoutePattern, string>> = Object.freeze({
  '/v1/resources/:id': 'PUT, PATCH, DELETE',
  '/v1/resources/:id/measures': 'GET',
  '/v1/credentials/:id': 'PUT, DELETE',
  '/v1/sso': 'GET',
});

/**
 * The route label of a path for the log line and the metrics: the pattern of the route it matches,
 * or the prefix it falls under (`/v1/resources/*`), built from fixed strings only so that a hostile
 * path never becomes a label. Undefined for a path that is not ours.
 */
export function routeLabel(path: string): { route: string; rawId: string | undefined } | undefined {
  const match = matchPath(path);
  if (match === undefined) return undefined;
  if (match.type === 'route') return { route: match.route, rawId: match.rawId };
  if (match.type === 'sso') return { route: '/v1/sso', rawId: undefined };
  return { route: /^\/v1\/credentials/i.test(path) ? '/v1/credentials/*' : '/v1/resources/*', rawId: undefined };
}

const NOT_PERCENT_ENCODING = 'Request path is not valid percent-encoding';

/**
 * A path id decoded as Express decodes route parameters; a malformed percent-encoding is the
 * caller's mistake (400), never a 500 that the marketplace would retry.
 */
export function decodePathId(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch (error) {
    throw new MarketplaceError(400, 'ERR_BAD_REQUEST', NOT_PERCENT_ENCODING, { cause: error });
  }
}

/**
 * Express's own 4xx errors, raised before any handler runs (a path segment that is not valid
 * percent-encoding, `/v1/resources/%E0`), are the caller's mistake: a 500 would make the
 * marketplace retry a request that can never succeed.
 */
export function clientError(error: unknown): MarketplaceError | undefined {
  const status = typeof error === 'object' && error !== null ? (error as { status?: unknown }).status : undefined;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status > 499) return undefined;
  return new MarketplaceError(status, 'ERR_BAD_REQUEST', error instanceof URIError ? NOT_PERCENT_ENCODING : 'Malformed request', { cause: error });
}

/** Splits a request target into its path and its raw query (without `?`). */
export function splitTarget(url: string): { path: string; query: string } {
  const mark = url.indexOf('?');
  return mark === -1 ? { path: url, query: '' } : { path: url.slice(0, mark), query: url.slice(mark + 1) };
}

/**
 * The query as the routes read it: a name sent once is its string, a name sent more than once an
 * array (refused by the checks that want one value), never a nested object; no prototype.
 */
export function parseQuery(query: string): Record<string, string | string[]> {
  const out = Object.create(null) as Record<string, string | string[]>;
  if (query.length === 0) return out;
  for (const [name, value] of new URLSearchParams(query)) {
    const seen = out[name];
    if (seen === undefined) out[name] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else out[name] = [seen, value];
  }
  return out;
}
