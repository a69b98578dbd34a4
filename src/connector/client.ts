import { ConnectorError, isMarketplaceError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import {
  buildCallbackUrlPolicy,
  parseCallbackPathPrefix,
  connectorEndpoint,
  parseAllowedOrigins,
  parseBooleanOption,
  parseConnectorUrl,
  PLAIN_NAMES,
  type OptionNaming,
  type CallbackUrlVerdict,
} from './callback-url.js';
import {
  asOptionsObject,
  optionalFunction,
  optionalLogger,
  optionalPositiveNumber,
  rejectUnknownKeys,
  requireNonEmptyString,
} from '../lib/options.js';
import { parseRetryAfter } from './retry-after.js';
import type { CallbackPayload } from '../store/types.js';

/** An access token granted by the connector's token endpoint. Secret: keep it server-side. */
export interface AccessToken {
  accessToken: string;
  /** Always `'bearer'` (the only type the connector issues). */
  tokenType: 'bearer';
  /** When the token expires, in milliseconds since the epoch (from `expires_in`). */
  expiresAt: number;
}

/**
 * A resource as the connector's resource check returns it. Only `id` is guaranteed; the other
 * fields are copied when present with the expected type.
 */
export interface ConnectorResource {
  id: string;
  product?: string;
  plan?: string;
  region?: string;
  features?: Record<string, string | number | boolean>;
  label?: string;
  created_at?: string;
  updated_at?: string;
}

/**
 * The body of a callback (gaps.md "Callbacks"): `{state: 'done' | 'error', message, credentials?}`.
 * The same type the store keeps in its outbox, re-exported here for the connector's callers.
 */
export type { CallbackPayload };

/**
 * What one callback attempt came to. {@link ConnectorClient.sendCallback} never loops and never
 * throws; the caller (the outbox) decides what to do next from this:
 *
 * - `delivered`: the connector accepted it (2xx; 204 normally, also for an identical repeat). Done.
 * - `rejected`: final, do not retry. A 4xx other than 401/408/429 (409 = a different payload was
 *   delivered before), or — without `status` — refused before sending (URL policy, invalid payload).
 * - `retry`: try again later: network error, timeout, 401 (the cached token was dropped; the next
 *   attempt fetches a new one), 408, 429, 3xx (redirects are never followed), 5xx, or the token
 *   request failed. `retryAfterMs` comes from a Retry-After header when there was one.
 */
export type CallbackResult =
  | { outcome: 'delivered'; status: number }
  | { outcome: 'rejected'; status?: number; reason: string }
  | { outcome: 'retry'; status?: number; retryAfterMs?: number; reason: string };

/** Options of {@link createConnectorClient}. */
export interface ConnectorClientOptions {
  /** The marketplace connector's base URL (`{connector_url}`), e.g. `https://connector.example.com`. */
  connectorUrl: string;
  /** The provider's OAuth client id at the connector. */
  clientId: string;
  /** The provider's OAuth client secret. Never logged. */
  clientSecret: string;
  /** Per request (headers and body), in ms. Default 10 000. */
  timeoutMs?: number;
  /** A cached client_credentials token is renewed this long before it expires, in ms. Default 60 000. */
  tokenRefreshSkewMs?: number;
  /** Origins besides the connector's that callbacks may go to (see `callbackUrlPolicy`). */
  allowedCallbackOrigins?: readonly string[];
  /** Accept a plain-http connector URL on a non-loopback host. Default false. */
  allowInsecureHttp?: boolean;
  /** The callback route before the callback id. Default `/v1/callbacks/` (see `callbackUrlPolicy`). */
  callbackPathPrefix?: string;
  /** The fetch implementation. Default: the runtime's global `fetch`. */
  fetch?: typeof globalThis.fetch;
  /** Clock in ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /** A pino logger, or `false` for none. Default: JSON lines with redaction. */
  logger?: Logger | false;
}

/** The marketplace connector as the provider uses it: tokens, the resource check and callbacks. */
export interface ConnectorClient {
  /** The connector's base URL as configured. */
  readonly connectorUrl: string;
  /**
   * Exchanges a single-use SSO code (authorization_code grant). Never retried: a second attempt
   * with the same code would fail anyway and could mask the first outcome.
   * @throws {ConnectorError} `ERR_CONNECTOR_INVALID_GRANT` (bad, expired or reused code),
   *   `ERR_CONNECTOR_AUTH` (the client credentials were refused), `ERR_CONNECTOR_UNREACHABLE`
   *   (network error or timeout), `ERR_CONNECTOR_RESPONSE` (any other answer).
   */
  exchangeCode(code: string): Promise<AccessToken>;
  /**
   * A client_credentials access token, cached until shortly before it expires. Concurrent callers
   * share one token request; a failed request is not cached.
   * @throws {ConnectorError} as {@link ConnectorClient.exchangeCode}, without INVALID_GRANT.
   */
  clientCredentialsToken(): Promise<string>;
  /**
   * Reads a resource with the user's access token. `undefined` when the token's user has no access
   * to it (the connector answers 404, or 403).
   * @throws {ConnectorError} `ERR_CONNECTOR_AUTH` (401: token missing, invalid or expired),
   *   `ERR_CONNECTOR_UNREACHABLE`, `ERR_CONNECTOR_RESPONSE`.
   */
  getResource(id: string, accessToken: string): Promise<ConnectorResource | undefined>;
  /** One attempt to deliver a callback; see {@link CallbackResult}. Never throws. */
  sendCallback(callbackUrl: string, payload: CallbackPayload, options?: { signal?: AbortSignal }): Promise<CallbackResult>;
  /**
   * Checks an X-Callback-URL against the callback URL policy (with `callbackId`, it must be the
   * callback route of that id); the reason is safe for a 400 message.
   */
  checkCallbackUrl(url: unknown, callbackId?: string): CallbackUrlVerdict;
  /** Shorthand for `checkCallbackUrl(url, callbackId).allowed`. */
  isAllowedCallbackUrl(url: unknown, callbackId?: string): boolean;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_SKEW_MS = 60_000;
/** Used when the token endpoint omits `expires_in` (OAuth only recommends it). */
export const DEFAULT_TOKEN_LIFETIME_S = 3600;
const MAX_BODY_BYTES = 64 * 1024;
const MAX_CODE_LENGTH = 4096;
const CREDENTIAL_KEY = /^[A-Z][A-Z0-9_]{0,127}$/;
const OPTION_KEYS = [
  'connectorUrl', 'clientId', 'clientSecret', 'timeoutMs', 'tokenRefreshSkewMs', 'allowedCallbackOrigins',
  'allowInsecureHttp', 'callbackPathPrefix', 'fetch', 'now', 'logger',
] as const;

/**
 * Creates the client of the marketplace connector (gaps.md "Connector"): the token endpoint with
 * both grants (client authentication by HTTP Basic), the resource check and callbacks. It uses the
 * runtime's `fetch` with a timeout on every request, throws typed {@link ConnectorError}s, and puts
 * no secret (client secret, code, token, credential value) in any error message or log line.
 *
 * @example
 * ```ts
 * const connector = createConnectorClient({
 *   connectorUrl: process.env.CONNECTOR_URL!,
 *   clientId: process.env.CONNECTOR_CLIENT_ID!,
 *   clientSecret: process.env.CONNECTOR_CLIENT_SECRET!,
 * });
 * const token = await connector.exchangeCode(code);
 * const resource = await connector.getResource(resourceId, token.accessToken);
 * ```
 */
export function createConnectorClient(options: ConnectorClientOptions): ConnectorClient {
  return buildConnectorClient(options, 'createConnectorClient', PLAIN_NAMES);
}

/**
 * {@link createConnectorClient} for a factory that takes the connector options under its own
 * names (the router's `connector: { url, ... }`), so that its errors name what the user wrote.
 * @internal
 */
export function buildConnectorClient(options: ConnectorClientOptions, factory: string, naming: OptionNaming): ConnectorClient {
  const raw = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, raw, OPTION_KEYS);
  // The option helpers print the key they read: read them under the caller's names.
  const named = (key: Parameters<OptionNaming['name']>[0]) => ({ [naming.name(key)]: raw[key] });
  const allowInsecureHttp = parseBooleanOption(factory, raw, 'allowInsecureHttp');
  const base = parseConnectorUrl(factory, raw.connectorUrl, allowInsecureHttp, naming);
  const clientId = requireNonEmptyString(factory, named('clientId'), naming.name('clientId'));
  const clientSecret = requireNonEmptyString(factory, named('clientSecret'), naming.name('clientSecret'));
  const timeoutMs = optionalPositiveNumber(factory, named('timeoutMs'), naming.name('timeoutMs')) ?? DEFAULT_TIMEOUT_MS;
  const skewMs = optionalPositiveNumber(factory, raw, 'tokenRefreshSkewMs', { allowZero: true }) ?? DEFAULT_SKEW_MS;
  const fetchImpl = optionalFunction<typeof globalThis.fetch>(factory, raw, 'fetch') ?? globalThis.fetch;
  const now = optionalFunction<() => number>(factory, raw, 'now') ?? Date.now;
  const logger = createLogger(optionalLogger<Logger>(factory, raw, 'logger'), { component: 'connector' });
  const policy = buildCallbackUrlPolicy(base, parseAllowedOrigins(factory, naming.name('allowedCallbackOrigins'), raw.allowedCallbackOrigins), allowInsecureHttp,
    parseCallbackPathPrefix(factory, naming.name('callbackPathPrefix'), raw.callbackPathPrefix));
  if (typeof fetchImpl !== 'function') {
    throw new TypeError(`${factory}: no global fetch in this runtime; pass the "fetch" option (Node 20 has one)`);
  }

  const tokenUrl = connectorEndpoint(base, '/v1/oauth/tokens');
  const basicAuth = `Basic ${Buffer.from(`${formEncode(clientId)}:${formEncode(clientSecret)}`, 'utf8').toString('base64')}`;

  let cached: { token: string; refreshAt: number } | undefined;
  let inflight: Promise<string> | undefined;

  /** One HTTP exchange with a timeout covering headers and body; transport failures become ConnectorErrors. */
  async function request(url: string, init: RequestInit, what: string, readBody: boolean, outer?: AbortSignal): Promise<{ status: number; headers: Headers; body: string }> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    // The caller's signal (the outbox giving up on an attempt) ends the exchange as surely as our timeout.
    const signal = outer === undefined ? controller.signal : AbortSignal.any([controller.signal, outer]);
    try {
      const response = await fetchImpl(url, { ...init, signal });
      const body = readBody ? await readLimited(response) : (await discard(response), '');
      return { status: response.status, headers: response.headers, body };
    } catch (err) {
      if (isMarketplaceError(err)) throw err;
      const timedOut = signal.aborted;
      const detail = timedOut ? `timed out after ${timeoutMs} ms` : `network error${networkCode(err)}`;
      throw new ConnectorError('ERR_CONNECTOR_UNREACHABLE', `Marketplace connector unreachable (${what}): ${detail}`, undefined, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  async function requestToken(grant: 'authorization_code' | 'client_credentials', code?: string): Promise<AccessToken> {
    const form = new URLSearchParams({ grant_type: grant });
    if (code !== undefined) form.set('code', code);
    const what = `token request, ${grant}`;
    const started = now();
    let answer: { status: number; body: string };
    try {
      answer = await request(tokenUrl, {
        method: 'POST',
        headers: { authorization: basicAuth, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form.toString(),
        redirect: 'manual',
      }, what, true);
    } catch (err) {
      logFailure(err, { endpoint: 'tokens', grant });
      throw err;
    }
    if (answer.status === 200 || answer.status === 201) {
      const token = parseTokenResponse(answer.body, started);
      if (token === undefined) {
        const err = new ConnectorError('ERR_CONNECTOR_RESPONSE', `Marketplace connector sent an unreadable token response (${grant})`, answer.status);
        logFailure(err, { endpoint: 'tokens', grant });
        throw err;
      }
      logger.debug({ endpoint: 'tokens', grant, expiresInMs: token.expiresAt - started }, 'connector granted an access token');
      return token;
    }
    const oauthError = parseOAuthError(answer.body);
    let err: ConnectorError;
    if (answer.status === 401 || oauthError === 'invalid_client') {
      err = new ConnectorError('ERR_CONNECTOR_AUTH', `Marketplace connector refused the client credentials (${grant}): check clientId and clientSecret`, answer.status);
    } else if (answer.status === 400 && oauthError === 'invalid_grant' && grant === 'authorization_code') {
      err = new ConnectorError('ERR_CONNECTOR_INVALID_GRANT', 'The single sign-on code is invalid, expired or already used', answer.status);
    } else {
      const suffix = oauthError === undefined ? '' : ` ${oauthError}`;
      err = new ConnectorError('ERR_CONNECTOR_RESPONSE', `Marketplace connector answered the token request (${grant}) with ${answer.status}${suffix}`, answer.status);
    }
    logFailure(err, { endpoint: 'tokens', grant });
    throw err;
  }

  function logFailure(err: unknown, context: Record<string, unknown>): void {
    if (isMarketplaceError(err)) {
      const upstreamStatus = err instanceof ConnectorError ? err.upstreamStatus : undefined;
      logger.warn({ ...context, code: err.code, upstreamStatus }, err.message);
    } else {
      logger.error({ ...context, err }, 'unexpected failure calling the marketplace connector');
    }
  }

  function dropCachedToken(token: string): void {
    // Only the token that was refused: a concurrent caller may already hold a fresh one.
    if (cached?.token === token) cached = undefined;
  }

  const client: ConnectorClient = {
    connectorUrl: base.href,

    async exchangeCode(code) {
      if (typeof code !== 'string' || code.length === 0 || code.length > MAX_CODE_LENGTH) {
        throw new ConnectorError('ERR_CONNECTOR_INVALID_GRANT', 'The single sign-on code is invalid, expired or already used');
      }
      return requestToken('authorization_code', code);
    },

    clientCredentialsToken() {
      if (cached !== undefined && now() < cached.refreshAt) return Promise.resolve(cached.token);
      inflight ??= requestToken('client_credentials')
        .then((token) => {
          const lifetime = Math.max(0, token.expiresAt - now());
          // A skew longer than the token lives would refetch on every call; cap it at half the lifetime.
          cached = { token: token.accessToken, refreshAt: token.expiresAt - Math.min(skewMs, lifetime / 2) };
          return token.accessToken;
        })
        .finally(() => {
          inflight = undefined;
        });
      return inflight;
    },

    async getResource(id, accessToken) {
      if (typeof id !== 'string' || id.length === 0) return undefined;
      const answer = await request(connectorEndpoint(base, `/v1/resources/${encodeURIComponent(id)}`), {
        method: 'GET',
        headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' },
        redirect: 'manual',
      }, 'resource check', true).catch((err: unknown) => {
        logFailure(err, { endpoint: 'resources', resourceId: id });
        throw err;
      });
      if (answer.status === 404 || answer.status === 403) return undefined;
      let err: ConnectorError;
      if (answer.status === 200) {
        const resource = parseResource(answer.body);
        if (resource !== undefined) return resource;
        err = new ConnectorError('ERR_CONNECTOR_RESPONSE', 'Marketplace connector sent an unreadable resource', answer.status);
      } else if (answer.status === 401) {
        err = new ConnectorError('ERR_CONNECTOR_AUTH', 'Marketplace connector refused the access token at the resource check', answer.status);
      } else {
        err = new ConnectorError('ERR_CONNECTOR_RESPONSE', `Marketplace connector answered the resource check with ${answer.status}`, answer.status);
      }
      logFailure(err, { endpoint: 'resources', resourceId: id });
      throw err;
    },

    async sendCallback(callbackUrl, payload, options) {
      const result = await attemptCallback(callbackUrl, payload, options?.signal);
      // debug only: the caller (the outbox) owns the operator-facing log line, with its own context.
      logger.debug({ callback: describeUrl(callbackUrl), ...result }, 'callback attempt');
      return result;
    },

    checkCallbackUrl: (url, callbackId) => policy.check(url, callbackId),
    isAllowedCallbackUrl: (url, callbackId) => policy.isAllowed(url, callbackId),
  };

  async function attemptCallback(callbackUrl: string, payload: CallbackPayload, signal: AbortSignal | undefined): Promise<CallbackResult> {
    const verdict = policy.check(callbackUrl);
    if (!verdict.allowed) return { outcome: 'rejected', reason: verdict.reason };
    const problem = callbackPayloadProblem(payload);
    if (problem !== undefined) return { outcome: 'rejected', reason: `invalid callback payload: ${problem}` };

    let token: string;
    try {
      token = await client.clientCredentialsToken();
    } catch (err) {
      const code = isMarketplaceError(err) ? err.code : 'unexpected error';
      return { outcome: 'retry', reason: `could not obtain a client_credentials token (${code})` };
    }

    const body: CallbackPayload = { state: payload.state, message: payload.message };
    if (payload.credentials !== undefined) body.credentials = payload.credentials;
    let answer: { status: number; headers: Headers };
    try {
      answer = await request(verdict.url.href, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        redirect: 'manual',
      }, 'callback', false, signal);
    } catch (err) {
      const reason = err instanceof Error ? err.message : 'network error';
      return { outcome: 'retry', reason };
    }

    const { status } = answer;
    if (status >= 200 && status < 300) return { outcome: 'delivered', status };
    const retryAfterMs = parseRetryAfter(answer.headers.get('retry-after'), now());
    const retry = (reason: string): CallbackResult => (retryAfterMs === undefined ? { outcome: 'retry', status, reason } : { outcome: 'retry', status, retryAfterMs, reason });
    if (status === 401) {
      dropCachedToken(token);
      return retry('connector refused the bearer token (401); a new token will be requested');
    }
    if (status === 408 || status === 429) return retry(`connector answered ${status}`);
    if (status >= 300 && status < 400) return retry(`connector answered a redirect (${status}); redirects are not followed`);
    if (status >= 500) return retry(`connector answered ${status}`);
    if (status === 409) return { outcome: 'rejected', status, reason: 'connector answered 409: a different payload was already delivered for this callback' };
    if (status >= 400) return { outcome: 'rejected', status, reason: `connector answered ${status}` };
    return retry(`unexpected status ${status}`);
  }

  return client;
}

/** RFC 6749 §2.3.1: id and secret are form-urlencoded before they go into the Basic credentials. */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** Why a callback payload is invalid (never quoting a credential value), or undefined when valid. */
export function callbackPayloadProblem(payload: unknown): string | undefined {
  if (typeof payload !== 'object' || payload === null) return 'expected an object';
  const p = payload as Record<string, unknown>;
  if (p.state !== 'done' && p.state !== 'error') return 'state must be "done" or "error"';
  if (typeof p.message !== 'string' || p.message.length < 3 || p.message.length > 256) return 'message must be 3 to 256 characters';
  if (p.credentials === undefined) return undefined;
  if (p.state !== 'done') return 'credentials are only sent with state "done"';
  if (typeof p.credentials !== 'object' || p.credentials === null || Array.isArray(p.credentials)) return 'credentials must be an object';
  for (const [key, value] of Object.entries(p.credentials)) {
    if (!CREDENTIAL_KEY.test(key)) return 'credential keys must look like environment-variable names';
    if (typeof value !== 'string') return 'credential values must be strings';
  }
  return undefined;
}

function parseTokenResponse(body: string, issuedAt: number): AccessToken | undefined {
  const json = parseJsonObject(body);
  if (json === undefined) return undefined;
  const accessToken = json.access_token;
  if (typeof accessToken !== 'string' || accessToken.length === 0) return undefined;
  const tokenType = json.token_type;
  if (tokenType !== undefined && (typeof tokenType !== 'string' || tokenType.toLowerCase() !== 'bearer')) return undefined;
  let expiresIn = DEFAULT_TOKEN_LIFETIME_S;
  if (json.expires_in !== undefined) {
    const value = typeof json.expires_in === 'string' ? Number(json.expires_in) : json.expires_in;
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return undefined;
    expiresIn = value;
  }
  return { accessToken, tokenType: 'bearer', expiresAt: issuedAt + expiresIn * 1000 };
}

function parseOAuthError(body: string): string | undefined {
  const error = parseJsonObject(body)?.error;
  // Only a well-formed OAuth error code goes into messages; descriptions are free text and stay out.
  return typeof error === 'string' && /^[a-z_]{1,64}$/.test(error) ? error : undefined;
}

function parseResource(body: string): ConnectorResource | undefined {
  const json = parseJsonObject(body);
  if (json === undefined || typeof json.id !== 'string') return undefined;
  const resource: ConnectorResource = { id: json.id };
  for (const key of ['product', 'plan', 'region', 'label', 'created_at', 'updated_at'] as const) {
    const value = json[key];
    if (typeof value === 'string') resource[key] = value;
  }
  if (typeof json.features === 'object' && json.features !== null && !Array.isArray(json.features)) {
    const features: Record<string, string | number | boolean> = {};
    for (const [name, value] of Object.entries(json.features as Record<string, unknown>)) {
      if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') features[name] = value;
    }
    resource.features = features;
  }
  return resource;
}

function parseJsonObject(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

async function readLimited(response: Response): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_BODY_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw new ConnectorError('ERR_CONNECTOR_RESPONSE', `Marketplace connector answer exceeds ${MAX_BODY_BYTES} bytes`, response.status);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}

function networkCode(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown } } | undefined)?.cause;
  const code = cause?.code ?? (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,40}$/.test(code) ? ` (${code})` : '';
}

/** Origin and path only: enough to find the callback in logs. */
function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
