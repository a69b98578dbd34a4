import { Router, type Request, type RequestHandler, type Response } from 'express';
import { InvalidOptionsError, isMarketplaceError } from '../../errors.js';
import { createLogger, type Logger } from '../../lib/logger.js';
import { bodyAlreadyConsumed, readRawBody } from '../../signature/raw-body.js';
import { bearerToken, searchParams, sendJson } from '../http.js';
import { decodeBasicAuth } from '../../lib/basic-auth.js';
import { integerOption, optionalFunction } from '../../lib/options.js';
import { checkOptionKeys, loggerOption, pathOption, requireFunction, stringList } from '../options.js';
import { matchesAnyDigest, randomSecret, secretKey, sha256 } from '../../lib/secrets.js';
import { MemoryOAuthStore, type OAuthRecord, type OAuthStore, type OAuthUser } from './store.js';

/**
 * The marketplace as an OAuth client of the platform.
 * @deprecated Part of the deprecated authorization-code flow; see {@link deprecatedOAuthRouter}.
 */
export interface OAuthClient {
  /** Public, unguessable, unique (for example 32 hex characters). */
  clientId: string;
  /** The shared secret (for example 256 bits in hex). A list accepts each of them, to rotate. */
  clientSecret: string | readonly string[];
  /** The one registered redirect_uri ({marketplace_callback_url}); compared as an exact string. */
  redirectUri: string;
}

type MaybePromise<T> = T | Promise<T>;

/**
 * Options of {@link deprecatedOAuthRouter}.
 * @deprecated Part of the deprecated authorization-code flow.
 */
export interface DeprecatedOAuthOptions {
  /** The registered clients (normally one: the marketplace). */
  clients: readonly OAuthClient[];
  /** The platform user signed in on this browser request, or `null` when nobody is. No prompt is shown. */
  getUser(req: Request): MaybePromise<OAuthUser | null | undefined>;
  /** Answers when nobody is signed in (for example a redirect to the login page). Default: 401 JSON. */
  onSignInRequired?: (req: Request, res: Response) => MaybePromise<void>;
  /** Default `/oauth/login`. */
  authorizePath?: string;
  /** Default `/oauth/token`. */
  tokenPath?: string;
  /** Default `/oauth/userinfo`. */
  userInfoPath?: string;
  /** Authorization code lifetime, 30 to 60 seconds as the interface demands (default 60). */
  codeTtlSeconds?: number;
  /** Access token lifetime (default 7200, the interface's sample value). */
  accessTokenTtlSeconds?: number;
  /** Refresh token lifetime (default 30 days); each refresh issues a new one and retires the old. */
  refreshTokenTtlSeconds?: number;
  /** Where codes and tokens are kept, hashed. Default: in memory, this process only. */
  store?: OAuthStore;
  /** Largest token request body (default 16 KiB). */
  maxBodyBytes?: number;
  /** A pino logger, or `false` for none. */
  logger?: Logger | false;
  /** Clock in epoch milliseconds, for tests. */
  now?: () => number;
}

const FACTORY = 'deprecatedOAuthRouter';
const OPTION_KEYS = [
  'clients',
  'getUser',
  'onSignInRequired',
  'authorizePath',
  'tokenPath',
  'userInfoPath',
  'codeTtlSeconds',
  'accessTokenTtlSeconds',
  'refreshTokenTtlSeconds',
  'store',
  'maxBodyBytes',
  'logger',
  'now',
] as const;
const CLIENT_KEYS = ['clientId', 'clientSecret', 'redirectUri'] as const;
const OAUTH_JSON = 'application/json;charset=UTF-8';
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
const MAX_STATE_LENGTH = 2048;

interface RegisteredClient {
  clientId: string;
  secretDigests: Buffer[];
  redirectUri: string;
}

/** An OAuth error answer (RFC 6749 §5.2) on its way out of a handler. */
class OAuthError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
  }
}

/**
 * The deprecated authorization-code flow of interface section 4.2: an authorization endpoint
 * (default `/oauth/login`), a token endpoint (`/oauth/token`) and a UserInfo endpoint
 * (`/oauth/userinfo`).
 *
 * - Authorization: takes the signed-in user from `getUser(req)` without any prompt, checks
 *   `client_id`, the exact registered `redirect_uri` and `response_type=code`, and redirects to the
 *   registered address with a random single-use `code` (valid `codeTtlSeconds`) and the echoed
 *   `state`. Any invalid request is answered 400 JSON: it is never redirected anywhere.
 * - Token: form body; client authentication by HTTP Basic or body fields (constant time); grants
 *   `authorization_code` (the `redirect_uri` must repeat the one of the authorization) and
 *   `refresh_token` (the refresh token rotates: the old one stops working). A replayed code or refresh
 *   token revokes every token of that authorization.
 * - UserInfo: bearer access token → `{sub, name, email}`; 401 with
 *   `WWW-Authenticate: Bearer error="invalid_token"` otherwise.
 *
 * Codes and tokens are stored as SHA-256 digests only.
 *
 * @deprecated The marketplace replaced this flow with `GET /v1/profiles/:id`: serve
 * {@link platformRouter}, ask the marketplace to switch your platform over, then remove this router.
 *
 * @example
 * ```ts
 * app.use(deprecatedOAuthRouter({
 *   clients: [{ clientId: env.OAUTH_CLIENT_ID, clientSecret: env.OAUTH_CLIENT_SECRET, redirectUri: env.MARKETPLACE_CALLBACK_URL }],
 *   getUser: (req) => req.session.user ?? null, // { sub, name, email }
 * }));
 * ```
 */
export function deprecatedOAuthRouter(options: DeprecatedOAuthOptions): Router {
  const record = checkOptionKeys(FACTORY, options, OPTION_KEYS);
  const clients = checkClients(record.clients);
  const getUser = requireFunction<DeprecatedOAuthOptions['getUser']>(FACTORY, 'getUser', record.getUser);
  const onSignInRequired = optionalFunction<NonNullable<DeprecatedOAuthOptions['onSignInRequired']>>(FACTORY, record, 'onSignInRequired');
  const authorizePath = pathOption(FACTORY, 'authorizePath', record.authorizePath, '/oauth/login');
  const tokenPath = pathOption(FACTORY, 'tokenPath', record.tokenPath, '/oauth/token');
  const userInfoPath = pathOption(FACTORY, 'userInfoPath', record.userInfoPath, '/oauth/userinfo');
  const codeTtlMs = integerOption(FACTORY, 'codeTtlSeconds', record.codeTtlSeconds, 60, 30, 60) * 1000;
  const accessTtlSeconds = integerOption(FACTORY, 'accessTokenTtlSeconds', record.accessTokenTtlSeconds, 7200, 60, 7 * 24 * 3600);
  const refreshTtlMs = integerOption(FACTORY, 'refreshTokenTtlSeconds', record.refreshTokenTtlSeconds, 30 * 24 * 3600, 60, 365 * 24 * 3600) * 1000;
  const maxBodyBytes = integerOption(FACTORY, 'maxBodyBytes', record.maxBodyBytes, 16 * 1024, 256, 1024 * 1024);
  const now = optionalFunction<() => number>(FACTORY, record, 'now') ?? Date.now;
  const store = record.store === undefined ? new MemoryOAuthStore({ now }) : checkStore(record.store);
  const log = createLogger(loggerOption(FACTORY, record), { component: 'platform-oauth' });
  // Compared against when the client is unknown, so that an unknown id costs the same as a wrong secret.
  const decoyDigests = [sha256(randomSecret())];

  log.warn(
    { authorizePath, tokenPath, userInfoPath },
    'the authorization-code flow is deprecated: serve GET /v1/profiles/:id (platformRouter) and ask the marketplace to switch over',
  );

  const router = Router();

  router.get(authorizePath, guard('authorize', async (req, res) => {
    const params = searchParams(req);
    const single = (name: string): string | undefined => {
      const values = params.getAll(name);
      if (values.length > 1) throw refusal('invalid_request', `${name} must be given once`);
      return values[0];
    };
    const clientId = single('client_id');
    const client = clientId === undefined ? undefined : clients.get(clientId);
    if (client === undefined) throw refusal('invalid_request', 'Unknown or missing client_id');
    if (single('redirect_uri') !== client.redirectUri) throw refusal('invalid_request', 'redirect_uri is missing or is not the registered one');
    const responseType = single('response_type');
    if (responseType === undefined) throw refusal('invalid_request', 'response_type is required (code)');
    if (responseType !== 'code') throw refusal('unsupported_response_type', 'response_type must be code');
    const state = single('state');
    if (state !== undefined && state.length > MAX_STATE_LENGTH) throw refusal('invalid_request', `state is longer than ${MAX_STATE_LENGTH} characters`);

    const user = checkUser(await getUser(req));
    if (user === undefined) {
      if (onSignInRequired !== undefined) await onSignInRequired(req, res);
      else await sendJson(req, res, 401, { message: 'Sign in to the platform first, then retry' }, { headers: NO_STORE });
      return;
    }

    const code = randomSecret();
    await store.save('code', secretKey(code), {
      grantId: randomSecret(16),
      clientId: client.clientId,
      user,
      expiresAt: now() + codeTtlMs,
      redirectUri: client.redirectUri,
    });
    log.info({ client_id: client.clientId, sub: user.sub }, 'authorization code issued');
    // Appended to the registered address as registered, rather than re-serialized through URL.
    let location = `${client.redirectUri}${client.redirectUri.includes('?') ? '&' : '?'}code=${encodeURIComponent(code)}`;
    if (state !== undefined) location += `&state=${encodeURIComponent(state)}`;
    res.set({ ...NO_STORE, 'Referrer-Policy': 'no-referrer' });
    res.redirect(302, location);
  }));

  router.post(tokenPath, guard('token', async (req, res) => {
    const params = await readForm(req);
    const client = authenticateClient(req, params);
    const grantType = params.get('grant_type');
    let issued: OAuthRecord;
    if (grantType === null || grantType.length === 0) throw oauthError(400, 'invalid_request', 'grant_type is required');
    else if (grantType === 'authorization_code') issued = await redeemCode(client, params);
    else if (grantType === 'refresh_token') issued = await redeemRefreshToken(client, params);
    else throw oauthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');

    const accessToken = randomSecret();
    const refreshToken = randomSecret();
    const base = { grantId: issued.grantId, clientId: client.clientId, user: issued.user };
    await store.save('access', secretKey(accessToken), { ...base, expiresAt: now() + accessTtlSeconds * 1000 });
    await store.save('refresh', secretKey(refreshToken), { ...base, expiresAt: now() + refreshTtlMs });
    log.info({ client_id: client.clientId, sub: issued.user.sub, grant_type: grantType }, 'tokens issued');
    await sendJson(
      req,
      res,
      200,
      { access_token: accessToken, expires_in: accessTtlSeconds, refresh_token: refreshToken, token_type: 'Bearer' },
      { contentType: OAUTH_JSON, headers: NO_STORE },
    );
  }));

  router.all(tokenPath, guard('token', async () => {
    throw oauthError(405, 'invalid_request', 'The token endpoint accepts POST only', { Allow: 'POST' });
  }));

  const userInfo = guard('userinfo', async (req, res) => {
    const token = bearerToken(req);
    if (typeof token !== 'string') throw invalidToken('An access token is required in the Authorization header');
    const found = await store.find('access', secretKey(token));
    if (found === undefined) throw invalidToken('The access token is unknown or was revoked');
    if (found.expiresAt <= now()) throw invalidToken('The access token expired');
    const { sub, name, email } = found.user;
    await sendJson(req, res, 200, { sub, name, email }, { headers: NO_STORE });
  });
  router.get(userInfoPath, userInfo);
  router.post(userInfoPath, userInfo);

  return router;

  async function redeemCode(client: RegisteredClient, params: URLSearchParams): Promise<OAuthRecord> {
    const code = params.get('code');
    const redirectUri = params.get('redirect_uri');
    if (code === null || code.length === 0) throw oauthError(400, 'invalid_request', 'code is required');
    if (redirectUri === null) throw oauthError(400, 'invalid_request', 'redirect_uri is required');
    const consumed = await store.consume('code', secretKey(code));
    if (consumed === undefined) throw oauthError(400, 'invalid_grant', 'The authorization code is invalid, expired or already used');
    const { record: found, alreadyUsed } = consumed;
    if (alreadyUsed) {
      // RFC 6749 §4.1.2: a code presented twice may be stolen; what it already produced is revoked.
      await store.revokeGrant(found.grantId);
      log.warn({ client_id: client.clientId, sub: found.user.sub }, 'authorization code replayed: every token of that authorization is revoked');
      throw oauthError(400, 'invalid_grant', 'The authorization code is invalid, expired or already used');
    }
    if (found.expiresAt <= now()) throw oauthError(400, 'invalid_grant', 'The authorization code is invalid, expired or already used');
    if (found.clientId !== client.clientId) throw oauthError(400, 'invalid_grant', 'The authorization code was issued to another client');
    if (found.redirectUri !== redirectUri) throw oauthError(400, 'invalid_grant', 'redirect_uri does not match the authorization request');
    return found;
  }

  async function redeemRefreshToken(client: RegisteredClient, params: URLSearchParams): Promise<OAuthRecord> {
    const refreshToken = params.get('refresh_token');
    if (refreshToken === null || refreshToken.length === 0) throw oauthError(400, 'invalid_request', 'refresh_token is required');
    const consumed = await store.consume('refresh', secretKey(refreshToken));
    if (consumed === undefined) throw oauthError(400, 'invalid_grant', 'The refresh token is invalid, expired or already used');
    const { record: found, alreadyUsed } = consumed;
    if (alreadyUsed) {
      // A rotated-out refresh token coming back means two parties hold it: end the authorization.
      await store.revokeGrant(found.grantId);
      log.warn({ client_id: client.clientId, sub: found.user.sub }, 'refresh token replayed: every token of that authorization is revoked');
      throw oauthError(400, 'invalid_grant', 'The refresh token is invalid, expired or already used');
    }
    if (found.expiresAt <= now()) throw oauthError(400, 'invalid_grant', 'The refresh token is invalid, expired or already used');
    if (found.clientId !== client.clientId) throw oauthError(400, 'invalid_grant', 'The refresh token was issued to another client');
    return found;
  }

  /** RFC 6749 §2.3.1: HTTP Basic (preferred) or client_id and client_secret in the body, never both. */
  function authenticateClient(req: Request, params: URLSearchParams): RegisteredClient {
    const basic = parseBasic(req.headers.authorization);
    const bodyId = params.get('client_id');
    const bodySecret = params.get('client_secret');
    let clientId: string | null;
    let secrets: string[];
    if (basic !== undefined) {
      if (basic === null) throw invalidClient('The Authorization header is not valid HTTP Basic client authentication');
      if (bodySecret !== null) throw oauthError(400, 'invalid_request', 'Use one client authentication method, not both');
      if (bodyId !== null && !basic.ids.includes(bodyId)) throw oauthError(400, 'invalid_request', 'client_id differs from the authenticated client');
      clientId = basic.ids.find((id) => clients.has(id)) ?? basic.ids[0] ?? null;
      secrets = basic.secrets;
    } else {
      clientId = bodyId;
      secrets = bodySecret === null ? [] : [bodySecret];
    }
    if (clientId === null || secrets.length === 0) throw invalidClient('Client authentication is required');
    const client = clients.get(clientId);
    let authenticated = false;
    for (const secret of secrets) {
      if (matchesAnyDigest(secret, client?.secretDigests ?? decoyDigests)) authenticated = true;
    }
    if (client === undefined || !authenticated) {
      log.warn({ client_id: client === undefined ? '(unknown)' : client.clientId }, 'token request refused: client authentication failed');
      throw invalidClient('Client authentication failed');
    }
    return client;
  }

  async function readForm(req: Request): Promise<URLSearchParams> {
    let params: URLSearchParams;
    if (bodyAlreadyConsumed(req)) {
      // A form parser mounted earlier (express.urlencoded) left an object: rebuild the pairs from it.
      params = new URLSearchParams();
      const body: unknown = req.body;
      if (Buffer.isBuffer(body)) params = new URLSearchParams(body.toString('utf8'));
      else if (typeof body === 'object' && body !== null) {
        for (const [name, value] of Object.entries(body)) {
          if (Array.isArray(value)) for (const item of value) params.append(name, String(item));
          else if (typeof value === 'string') params.append(name, value);
          else throw oauthError(400, 'invalid_request', 'The body must be a flat application/x-www-form-urlencoded form');
        }
      }
    } else {
      const contentType = req.headers['content-type'] ?? '';
      if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType)) {
        throw oauthError(400, 'invalid_request', 'The body must be application/x-www-form-urlencoded');
      }
      const raw = await readRawBody(req, maxBodyBytes);
      params = new URLSearchParams(raw.toString('utf8'));
    }
    const seen = new Set<string>();
    for (const name of params.keys()) {
      if (seen.has(name)) throw oauthError(400, 'invalid_request', `${name} must be given once`);
      seen.add(name);
    }
    return params;
  }

  /** Runs an endpoint and answers whatever it throws in the shape its endpoint calls for. */
  function guard(endpoint: 'authorize' | 'token' | 'userinfo', handler: (req: Request, res: Response) => Promise<void>): RequestHandler {
    return (req, res) => {
      handler(req, res).catch(async (error: unknown) => {
        if (res.headersSent) return;
        let status: number;
        let body: Record<string, string>;
        let headers: Record<string, string> = { ...NO_STORE };
        if (error instanceof OAuthError) {
          status = error.status;
          body = { error: error.error, error_description: error.description };
          // The authorization endpoint is seen by browsers and people: the usual {message} too.
          if (endpoint === 'authorize') body = { message: error.description, ...body };
          headers = { ...headers, ...error.headers };
          log.info({ endpoint, status, error: error.error }, `oauth ${endpoint}: ${error.description}`);
        } else if (isMarketplaceError(error) && error.status === 413) {
          status = 413;
          body = { error: 'invalid_request', error_description: error.message };
          headers.Connection = 'close';
        } else {
          log.error({ endpoint, err: error }, `oauth ${endpoint}: failed; answering 500`);
          status = 500;
          body = endpoint === 'authorize' ? { message: 'Internal error' } : { error: 'server_error', error_description: 'Internal error' };
        }
        const contentType = endpoint === 'token' ? OAUTH_JSON : undefined;
        await sendJson(req, res, status, body, { contentType, headers }).catch(() => undefined);
      });
    };
  }

  function checkUser(value: unknown): OAuthUser | undefined {
    if (value === null || value === undefined) return undefined;
    const user = value as Partial<OAuthUser>;
    for (const field of ['sub', 'name', 'email'] as const) {
      if (typeof user[field] !== 'string' || (field === 'sub' && user.sub === '')) {
        log.error({ field }, `getUser returned an invalid user: "${field}" must be a string (sub non-empty); answering 500`);
        throw new Error(`getUser returned an invalid user: ${field}`);
      }
    }
    return { sub: user.sub!, name: user.name!, email: user.email! };
  }
}

function refusal(error: string, description: string): OAuthError {
  return new OAuthError(400, error, description);
}

function oauthError(status: number, error: string, description: string, headers?: Record<string, string>): OAuthError {
  return new OAuthError(status, error, description, headers);
}

function invalidClient(description: string): OAuthError {
  return new OAuthError(401, 'invalid_client', description, { 'WWW-Authenticate': 'Basic realm="oauth", charset="UTF-8"' });
}

function invalidToken(description: string): OAuthError {
  return new OAuthError(401, 'invalid_token', description, {
    'WWW-Authenticate': `Bearer realm="userinfo", error="invalid_token", error_description="${description}"`,
  });
}

/**
 * Credentials of an `Authorization: Basic` header: `undefined` without one, `null` when malformed.
 * RFC 6749 §2.3.1 form-encodes id and secret before Basic, but many clients do not; both readings
 * are tried (each in constant time), so either kind of client authenticates.
 */
function parseBasic(header: string | undefined): { ids: string[]; secrets: string[] } | null | undefined {
  const basic = decodeBasicAuth(header);
  if (basic === undefined || basic === null) return basic;
  const readings = (raw: string): string[] => {
    let formDecoded: string | undefined;
    try {
      formDecoded = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      formDecoded = undefined;
    }
    return formDecoded === undefined || formDecoded === raw ? [raw] : [raw, formDecoded];
  };
  return { ids: readings(basic.user), secrets: readings(basic.password) };
}

function checkClients(value: unknown): Map<string, RegisteredClient> {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionsError(`${FACTORY}: option "clients" is required: [{ clientId, clientSecret, redirectUri }] for the marketplace`);
  }
  const clients = new Map<string, RegisteredClient>();
  for (const [index, entry] of value.entries()) {
    const where = `clients[${index}]`;
    const client = checkOptionKeys(`${FACTORY}: ${where}`, entry, CLIENT_KEYS);
    if (typeof client.clientId !== 'string' || client.clientId.length === 0) {
      throw new InvalidOptionsError(`${FACTORY}: ${where}.clientId must be a non-empty string`);
    }
    if (clients.has(client.clientId)) throw new InvalidOptionsError(`${FACTORY}: ${where}.clientId is registered twice`);
    const secrets = stringList(FACTORY, `${where}.clientSecret`, client.clientSecret);
    const redirectUri = client.redirectUri;
    let parsed: URL | undefined;
    try {
      parsed = typeof redirectUri === 'string' ? new URL(redirectUri) : undefined;
    } catch {
      parsed = undefined;
    }
    if (typeof redirectUri !== 'string' || parsed === undefined || !['https:', 'http:'].includes(parsed.protocol) || redirectUri.includes('#')) {
      throw new InvalidOptionsError(
        `${FACTORY}: ${where}.redirectUri must be the absolute http(s) address of the marketplace callback, without a #fragment`,
      );
    }
    clients.set(client.clientId, { clientId: client.clientId, secretDigests: secrets.map((secret) => sha256(secret)), redirectUri });
  }
  return clients;
}

function checkStore(value: unknown): OAuthStore {
  const store = value as Partial<OAuthStore> | null;
  const methods = ['save', 'find', 'consume', 'revokeGrant'] as const;
  if (typeof store !== 'object' || store === null || !methods.every((method) => typeof store[method] === 'function')) {
    throw new InvalidOptionsError(`${FACTORY}: option "store" must implement ${methods.join(', ')} (see OAuthStore)`);
  }
  return store as OAuthStore;
}
