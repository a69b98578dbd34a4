import { InvalidOptionsError } from '../errors.js';
import { asOptionsObject, rejectUnknownKeys } from '../lib/options.js';

/**
 * X-Callback-URL arrives signed, but it is still an address an attacker may have influenced (a
 * compromised signing key, a misrouted request): the provider would PUT a bearer token and, for
 * credential provisioning, secrets to it. So only the connector's own origin is trusted by default.
 */

/** Longest callback URL accepted; real ones are the connector origin plus `/v1/callbacks/<29 chars>`. */
export const MAX_CALLBACK_URL_LENGTH = 2048;

/** Options of {@link callbackUrlPolicy}. */
export interface CallbackUrlPolicyOptions {
  /** The marketplace connector's base URL; its origin (scheme, host and port) is always allowed. */
  connectorUrl: string;
  /** More origins callbacks may go to (e.g. `https://connector.eu.example.com`); plain http is allowed for these. */
  allowedOrigins?: readonly string[];
  /** Accept a plain-http connector URL on a non-loopback host (a private network behind TLS termination). */
  allowInsecureHttp?: boolean;
  /**
   * The path of the connector's callback route before the callback id. Default `/v1/callbacks/`:
   * a callback for X-Callback-ID `abc` may only go to `<allowed origin>/v1/callbacks/abc`.
   */
  callbackPathPrefix?: string;
}

/** The connector's callback route (interface: `PUT {connector_url}/v1/callbacks/{callback_id}`). */
export const DEFAULT_CALLBACK_PATH_PREFIX = '/v1/callbacks/';
// One path segment, never a dot-segment or a percent-escape (the router itself allows only [A-Za-z0-9]).
const CALLBACK_ID = /^[A-Za-z0-9][A-Za-z0-9_~-]{0,127}$/;
const PATH_PREFIX = /^\/(?:(?!\.\.?\/)[A-Za-z0-9._~-]+\/)*$/;

/** The answer of {@link CallbackUrlPolicy.check}: the parsed URL, or a reason safe to send in a 400 message. */
export type CallbackUrlVerdict = { allowed: true; url: URL } | { allowed: false; reason: string };

/** Decides whether an X-Callback-URL may receive a callback. */
export interface CallbackUrlPolicy {
  /**
   * Parses and checks `url`; the reason never echoes the URL. With `callbackId` the path must be
   * exactly the callback route for that id; without, the callback route for some valid id.
   */
  check(url: unknown, callbackId?: string): CallbackUrlVerdict;
  /** Shorthand for `check(url, callbackId).allowed`. */
  isAllowed(url: unknown, callbackId?: string): boolean;
  /** The allowed origins, normalized (`https://host[:port]`). */
  readonly origins: readonly string[];
}

/**
 * Builds the callback URL policy: by default a callback may only go to the configured connector's
 * origin (exact scheme, host and port), over https unless the host is loopback or the origin is
 * listed in `allowedOrigins`; URLs with userinfo (`https://user:pass@host`) are always refused. The
 * path must be the callback route, `/v1/callbacks/<X-Callback-ID>` (no query, no fragment): a
 * signed request cannot send the bearer token and credentials to another connector endpoint.
 *
 * @example
 * ```ts
 * const policy = callbackUrlPolicy({ connectorUrl: 'https://connector.example.com' });
 * policy.isAllowed('https://connector.example.com/v1/callbacks/abc'); // true
 * policy.isAllowed('https://evil.example.net/v1/callbacks/abc');      // false
 * ```
 */
export function callbackUrlPolicy(options: CallbackUrlPolicyOptions): CallbackUrlPolicy {
  const factory = 'callbackUrlPolicy';
  const raw = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, raw, ['connectorUrl', 'allowedOrigins', 'allowInsecureHttp', 'callbackPathPrefix']);
  const allowInsecureHttp = parseBooleanOption(factory, raw, 'allowInsecureHttp');
  const connector = parseConnectorUrl(factory, raw.connectorUrl, allowInsecureHttp);
  const prefix = parseCallbackPathPrefix(factory, 'callbackPathPrefix', raw.callbackPathPrefix);
  return buildCallbackUrlPolicy(connector, parseAllowedOrigins(factory, 'allowedOrigins', raw.allowedOrigins), allowInsecureHttp, prefix);
}

/** Checks the callback route prefix option (`/v1/callbacks/`, starting and ending with `/`). */
export function parseCallbackPathPrefix(factory: string, optionName: string, value: unknown): string {
  if (value === undefined) return DEFAULT_CALLBACK_PATH_PREFIX;
  if (typeof value !== 'string' || !PATH_PREFIX.test(value)) {
    throw new InvalidOptionsError(`${factory}: option "${optionName}" must be a path starting and ending with "/", like "${DEFAULT_CALLBACK_PATH_PREFIX}"`);
  }
  return value;
}

/** The policy from already-checked parts; shared with the connector client so its option names show in errors. */
export function buildCallbackUrlPolicy(connector: URL, extra: readonly string[], allowInsecureHttp: boolean, pathPrefix = DEFAULT_CALLBACK_PATH_PREFIX): CallbackUrlPolicy {
  const origins = [connector.origin, ...extra.filter((o) => o !== connector.origin)];
  const explicitlyAllowed = new Set(extra);

  function check(url: unknown, callbackId?: string): CallbackUrlVerdict {
    if (typeof url !== 'string' || url.length === 0) return refuse('X-Callback-URL is missing');
    if (url.length > MAX_CALLBACK_URL_LENGTH) return refuse('X-Callback-URL is too long');
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return refuse('X-Callback-URL is not an absolute URL');
    }
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return refuse('X-Callback-URL must use https');
    if (parsed.username !== '' || parsed.password !== '') return refuse('X-Callback-URL must not carry user information');
    if (!origins.includes(parsed.origin)) return refuse('X-Callback-URL must point to the marketplace connector');
    const secure = parsed.protocol === 'https:' || isLoopbackHost(parsed.hostname)
      || explicitlyAllowed.has(parsed.origin) || allowInsecureHttp;
    if (!secure) return refuse('X-Callback-URL must use https');
    // The raw text, not parsed.pathname: URL() resolves `..` and percent-escapes, which would let
    // `/v1/callbacks/../oauth/tokens` pass as the callback route.
    const authority = url.indexOf('//') + 2;
    const slash = url.indexOf('/', authority);
    const path = slash === -1 ? '' : url.slice(slash);
    const id = path.startsWith(pathPrefix) ? path.slice(pathPrefix.length) : undefined;
    if (id === undefined || !CALLBACK_ID.test(id) || (callbackId !== undefined && id !== callbackId)) {
      return refuse(`X-Callback-URL must be the connector's callback route ${pathPrefix}<X-Callback-ID>`);
    }
    return { allowed: true, url: parsed };
  }

  return {
    check,
    isAllowed: (url, callbackId) => check(url, callbackId).allowed,
    origins: Object.freeze(origins),
  };
}

function refuse(reason: string): CallbackUrlVerdict {
  return { allowed: false, reason };
}

/** Loopback hosts may use plain http: tests and a connector on the same machine. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (host === '[::1]') return true;
  return /^127(?:\.\d{1,3}){3}$/.test(host);
}

/** Checks and parses a connector base URL given as an option; the error never echoes the value. */
/**
 * How a factory's errors name the connector options: `createConnectorClient` shows its own option
 * names; `marketplaceRouter` shows them as the user wrote them there (`connector.url`).
 */
export interface OptionNaming {
  name(key: 'connectorUrl' | 'clientId' | 'clientSecret' | 'timeoutMs' | 'allowedCallbackOrigins' | 'callbackPathPrefix'): string;
  /** Whether the caller can pass `allowInsecureHttp` (the router cannot), so errors may suggest it. */
  offersInsecureHttp: boolean;
}

export const PLAIN_NAMES: OptionNaming = { name: (key) => key, offersInsecureHttp: true };

export function parseConnectorUrl(factory: string, value: unknown, allowInsecureHttp: boolean, naming: OptionNaming = PLAIN_NAMES): URL {
  const option = `option "${naming.name('connectorUrl')}"`;
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidOptionsError(`${factory}: ${option} is required (e.g. "https://connector.example.com")`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidOptionsError(`${factory}: ${option} must be an absolute http(s) URL (e.g. "https://connector.example.com")`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new InvalidOptionsError(`${factory}: ${option} must use https`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new InvalidOptionsError(`${factory}: ${option} must not carry user information; pass ${naming.name('clientId')} and ${naming.name('clientSecret')} instead`);
  }
  if (url.search !== '' || url.hash !== '') {
    throw new InvalidOptionsError(`${factory}: ${option} must not carry a query or fragment`);
  }
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && !allowInsecureHttp) {
    const escape = naming.offersInsecureHttp ? ', or with allowInsecureHttp: true' : '';
    throw new InvalidOptionsError(`${factory}: ${option} must use https (plain http is accepted for loopback hosts${escape})`);
  }
  return url;
}

/** Joins a connector base URL (which may carry a path prefix) with an API path. */
export function connectorEndpoint(base: URL, path: string): string {
  const prefix = base.pathname.endsWith('/') ? base.pathname.slice(0, -1) : base.pathname;
  return `${base.origin}${prefix}${path}`;
}

export function parseBooleanOption(factory: string, options: Record<string, unknown>, key: string): boolean {
  const value = options[key];
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new InvalidOptionsError(`${factory}: option "${key}" must be a boolean`);
  return value;
}

/** Checks a list of extra callback origins given as an option; returns them normalized. */
export function parseAllowedOrigins(factory: string, optionName: string, value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    throw new InvalidOptionsError(`${factory}: option "${optionName}" must be an array of origins like "https://connector.example.com"`);
  }
  return value.map((entry: unknown) => {
    let url: URL | undefined;
    try {
      url = typeof entry === 'string' ? new URL(entry) : undefined;
    } catch {
      url = undefined;
    }
    const ok = url !== undefined && (url.protocol === 'https:' || url.protocol === 'http:')
      && url.username === '' && url.password === '' && url.pathname === '/' && url.search === '' && url.hash === '';
    if (!ok || url === undefined) {
      throw new InvalidOptionsError(`${factory}: every entry of "${optionName}" must be an origin like "https://connector.example.com" (scheme, host, optional port; no path)`);
    }
    return url.origin;
  });
}
