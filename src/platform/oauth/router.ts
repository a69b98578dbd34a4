import { Router, type Request, type RequestHandler, type Response } from 'express';
import { InvalidOptionsError, isMarketplaceError } from '../../errors.js';
import { createLogger, type Logger } from '../../lib/logger.js';
import { bodyAlreadyConsumed, readRawBody } from '../../signature/raw-body.js';
import { bearerToken, searchParams, sendJson } from '../http.js';
import { decodeBasicAuth } from '../../lib/basic-auth.js';
import { integerOption, optionalFunction } from '../../lib/options.js';
import { checkOptionKeys, loggerOption, pathOption, requireFunction, stringList, instrumentationOption } from '../options.js';
import { createHash, createHmac } from 'node:crypto';
import { matchesAnyDigest, randomSecret, secretKey, sha256 } from '../../lib/secrets.js';
import type { MetricsOptions } from '../../observability/index.js';
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
  /**
   * The user as they are now, by `sub`, or `null` when deleted or suspended: consulted at every
   * refresh and UserInfo request, so a removed user's grants stop working (and are revoked) and
   * UserInfo answers current details. Without it the user as at authorization is used.
   */
  getUserById?: (sub: string) => MaybePromise<OAuthUser | null | undefined>;
  /**
   * The scopes granted (default `['id', 'email', 'name']`: the user id, email and name the interface,
   * section 5.1, requires). A request may ask for a subset; other scopes are refused with `invalid_scope`.
   */
  scopes?: readonly string[];
  /**
   * The authorization server's issuer identifier for the metadata document (RFC 8414), such as
   * `https://platform.example`. Default: the address the metadata request came to.
   */
  issuer?: string;
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
  /** Where codes and tokens are kept, hashed. Default: in memory, this process only (see `postgresOAuthStore` for several instances). */
  store?: OAuthStore;
  /** Outstanding (unredeemed) codes one user may hold (default 10); beyond it authorization answers `temporarily_unavailable`. */
  maxCodesPerUser?: number;
  /** Outstanding codes in total (default 10 000); beyond it authorization answers `temporarily_unavailable`. */
  maxCodes?: number;
  /**
   * A refresh token presented again by the same client within this many seconds (default 30) answers
   * the tokens its first use issued: the retry of a refresh whose answer was lost. After it, reuse
   * revokes the whole grant. 0 turns the grace off.
   */
  refreshRetryGraceSeconds?: number;
  /** Largest token request body (default 16 KiB). */
  maxBodyBytes?: number;
  /** A pino logger, or `false` for none. */
  logger?: Logger | false;
  /** `{ registry }` (a prom-client Registry): counts token answers by grant and outcome. */
  metrics?: MetricsOptions;
  /** Clock in epoch milliseconds, for tests. */
  now?: () => number;
}

/**
 * The router of {@link deprecatedOAuthRouter}, with what the platform calls on its own.
 * @deprecated Part of the deprecated authorization-code flow.
 */
export interface DeprecatedOAuthRouter extends Router {
  /** Revokes every grant (codes, access and refresh tokens) of the user `sub`; answers how many grants. */
  revokeSubject(sub: string): Promise<number>;
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
  'getUserById',
  'scopes',
  'issuer',
  'maxCodesPerUser',
  'maxCodes',
  'refreshRetryGraceSeconds',
  'metrics',
  'instrumentation',
] as const;
const DEFAULT_SCOPES = ['id', 'email', 'name'] as const;
// RFC 7636 §4.1: 43 to 128 unreserved characters, for the verifier and (S256 aside) the challenge.
const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/;
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
const METADATA_PATH = '/.well-known/oauth-authorization-server';
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

/** An authorization error once client and redirect URI are known good: sent back to the client (RFC 6749 §4.1.2.1). */
class RedirectedError extends OAuthError {
  constructor(
    readonly redirectUri: string,
    readonly state: string | undefined,
    error: string,
    description: string,
  ) {
    super(302, error, description);
  }
}

/**
 * The deprecated authorization-code flow of interface section 4.2: an authorization endpoint
 * (default `/oauth/login`), a token endpoint (`/oauth/token`) and a UserInfo endpoint
 * (`/oauth/userinfo`).
 *
 * - Authorization: takes the signed-in user from `getUser(req)` without any prompt, checks
 *   `client_id`, the exact registered `redirect_uri`, `response_type=code`, `scope` and PKCE
 *   (`code_challenge`, S256 or plain), and redirects to the registered address with a random
 *   single-use `code` (valid `codeTtlSeconds`) and the echoed `state`. A bad client or redirect URI
 *   is answered 400 JSON (never redirected anywhere); any other error is redirected there with
 *   `error`, `error_description` and `state` (RFC 6749 §4.1.2.1). Empty parameters count as omitted.
 * - Token: form body; client authentication by HTTP Basic or body fields (constant time); grants
 *   `authorization_code` (the `redirect_uri` must repeat the one of the authorization; the
 *   `code_verifier` must match a challenge, and is refused without one) and `refresh_token` (the
 *   refresh token rotates; the same one retried within `refreshRetryGraceSeconds` answers the same
 *   new tokens). A replayed code or refresh token revokes every token of that authorization, tokens
 *   still being saved included. A code presented by another client is refused and stays usable.
 * - UserInfo: bearer access token → `{sub, name, email}` (current, with `getUserById`); 401 with
 *   `WWW-Authenticate: Bearer error="invalid_token"` otherwise.
 * - Metadata (RFC 8414) at `/.well-known/oauth-authorization-server`.
 * - `router.revokeSubject(sub)` revokes every grant of a user.
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
export function deprecatedOAuthRouter(options: DeprecatedOAuthOptions): DeprecatedOAuthRouter {
  const record = checkOptionKeys(FACTORY, options, OPTION_KEYS);
  const clients = checkClients(record.clients);
  const getUser = requireFunction<DeprecatedOAuthOptions['getUser']>(FACTORY, 'getUser', record.getUser);
  const getUserById = optionalFunction<NonNullable<DeprecatedOAuthOptions['getUserById']>>(FACTORY, record, 'getUserById');
  const onSignInRequired = optionalFunction<NonNullable<DeprecatedOAuthOptions['onSignInRequired']>>(FACTORY, record, 'onSignInRequired');
  const authorizePath = pathOption(FACTORY, 'authorizePath', record.authorizePath, '/oauth/login');
  const tokenPath = pathOption(FACTORY, 'tokenPath', record.tokenPath, '/oauth/token');
  const userInfoPath = pathOption(FACTORY, 'userInfoPath', record.userInfoPath, '/oauth/userinfo');
  const codeTtlMs = integerOption(FACTORY, 'codeTtlSeconds', record.codeTtlSeconds, 60, 30, 60) * 1000;
  const accessTtlSeconds = integerOption(FACTORY, 'accessTokenTtlSeconds', record.accessTokenTtlSeconds, 7200, 60, 7 * 24 * 3600);
  const refreshTtlMs = integerOption(FACTORY, 'refreshTokenTtlSeconds', record.refreshTokenTtlSeconds, 30 * 24 * 3600, 60, 365 * 24 * 3600) * 1000;
  const maxBodyBytes = integerOption(FACTORY, 'maxBodyBytes', record.maxBodyBytes, 16 * 1024, 256, 1024 * 1024);
  const codeLimits = {
    perUser: integerOption(FACTORY, 'maxCodesPerUser', record.maxCodesPerUser, 10, 1, 10_000),
    total: integerOption(FACTORY, 'maxCodes', record.maxCodes, 10_000, 1, 10_000_000),
  };
  const graceMs = integerOption(FACTORY, 'refreshRetryGraceSeconds', record.refreshRetryGraceSeconds, 30, 0, 300) * 1000;
  const scopes = record.scopes === undefined ? [...DEFAULT_SCOPES] : checkScopes(record.scopes);
  const issuer = record.issuer === undefined ? undefined : checkIssuer(record.issuer);
  const now = optionalFunction<() => number>(FACTORY, record, 'now') ?? Date.now;
  const store = record.store === undefined ? new MemoryOAuthStore({ now }) : checkStore(record.store);
  const log = createLogger(loggerOption(FACTORY, record), { component: 'platform-oauth' });
  const instrumentation = instrumentationOption(FACTORY, record);
  // Compared against when the client is unknown, so that an unknown id costs the same as a wrong secret.
  const decoyDigests = [sha256(randomSecret())];
  // A revoked grant is remembered as long as anything descending from it could still be presented.
  const revocationUntil = (): number => now() + refreshTtlMs + accessTtlSeconds * 1000;
  let lastSweep = now();

  log.warn(
    { authorizePath, tokenPath, userInfoPath },
    'the authorization-code flow is deprecated: serve GET /v1/profiles/:id (platformRouter) and ask the marketplace to switch over',
  );

  const router = Router() as DeprecatedOAuthRouter;
  router.revokeSubject = async (sub: string): Promise<number> => {
    if (typeof sub !== 'string' || sub === '') throw new TypeError(`${FACTORY}: revokeSubject(sub) needs the user's sub`);
    const count = await store.revokeSubject(sub, revocationUntil());
    log.info({ sub, grants: count }, 'every grant of a user revoked');
    return count;
  };

  router.get(METADATA_PATH, (req, res) => {
    const base = issuer ?? `${req.protocol}://${req.get('host') ?? 'localhost'}${req.baseUrl}`;
    const at = (path: string): string => `${issuer === undefined ? base : issuer.replace(/\/$/, '')}${path}`;
    void sendJson(req, res, 200, {
      issuer: base,
      authorization_endpoint: at(authorizePath),
      token_endpoint: at(tokenPath),
      userinfo_endpoint: at(userInfoPath),
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256', 'plain'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      scopes_supported: scopes,
    // Derived from the Host header, the document must not be cached for other hosts' requests.
    }, { headers: { 'Cache-Control': issuer === undefined ? 'no-store' : 'public, max-age=3600', Vary: 'Host' } });
  });

  router.get(authorizePath, guard('authorize', async (req, res) => {
    const params = searchParams(req);
    const single = (name: string): string | undefined => {
      const values = params.getAll(name).filter((value) => value !== '');
      if (values.length > 1) throw refusal('invalid_request', `${name} must be given once`);
      return values[0];
    };
    const clientId = single('client_id');
    const client = clientId === undefined ? undefined : clients.get(clientId);
    if (client === undefined) throw refusal('invalid_request', 'Unknown or missing client_id');
    if (single('redirect_uri') !== client.redirectUri) throw refusal('invalid_request', 'redirect_uri is missing or is not the registered one');
    // From here the client and its address are known good: errors go back to it, with the state.
    let state: string | undefined;
    try {
      state = single('state');
    } catch (error) {
      throw redirected(client, undefined, error as OAuthError);
    }
    if (state !== undefined && state.length > MAX_STATE_LENGTH) throw new RedirectedError(client.redirectUri, undefined, 'invalid_request', `state is longer than ${MAX_STATE_LENGTH} characters`);
    let scope: string;
    let challenge: { codeChallenge: string; codeChallengeMethod: 'S256' | 'plain' } | undefined;
    try {
      const responseType = single('response_type');
      if (responseType === undefined) throw refusal('invalid_request', 'response_type is required (code)');
      if (responseType !== 'code') throw refusal('unsupported_response_type', 'response_type must be code');
      scope = grantedScope(single('scope'), scopes, 'invalid_scope');
      challenge = pkceChallenge(single('code_challenge'), single('code_challenge_method'));
    } catch (error) {
      throw redirected(client, state, error as OAuthError);
    }

    const user = checkUser(await getUser(req));
    if (user === undefined) {
      if (onSignInRequired !== undefined) await onSignInRequired(req, res);
      else await sendJson(req, res, 401, { message: 'Sign in to the platform first, then retry' }, { headers: NO_STORE });
      return;
    }

    const code = randomSecret();
    const saved = await store.saveCode(secretKey(code), {
      grantId: randomSecret(16),
      clientId: client.clientId,
      user,
      expiresAt: now() + codeTtlMs,
      scope,
      redirectUri: client.redirectUri,
      ...challenge,
    }, codeLimits, now());
    if (saved !== 'saved') {
      const which = saved === 'user-limit' ? `this user already holds ${codeLimits.perUser}` : `the server holds ${codeLimits.total}`;
      log.warn({ client_id: client.clientId, sub: user.sub, limit: saved }, `authorization refused: ${which} unredeemed codes (maxCodesPerUser / maxCodes)`);
      throw new RedirectedError(client.redirectUri, state, 'temporarily_unavailable', 'Too many authorizations in progress; retry in a minute');
    }
    sweepNow();
    log.info({ client_id: client.clientId, sub: user.sub }, 'authorization code issued');
    res.set({ ...NO_STORE, 'Referrer-Policy': 'no-referrer' });
    res.redirect(302, withQuery(client.redirectUri, { code, state }));
  }));

  router.post(tokenPath, guard('token', async (req, res) => {
    let grantType: string | undefined;
    try {
      const params = await readForm(req);
      grantType = field(params, 'grant_type');
      const client = authenticateClient(req, params);
      let issued: Issued;
      if (grantType === undefined) throw oauthError(400, 'invalid_request', 'grant_type is required');
      else if (grantType === 'authorization_code') issued = await redeemCode(client, params);
      else if (grantType === 'refresh_token') issued = await redeemRefreshToken(client, params);
      else throw oauthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
      log.info({ client_id: client.clientId, sub: issued.sub, grant_type: grantType, retry: issued.retry }, issued.retry ? 'refresh retried within the grace period: the same tokens answered' : 'tokens issued');
      instrumentation.oauthToken({ grant: grantType, outcome: 'issued' });
      await sendJson(
        req,
        res,
        200,
        { access_token: issued.accessToken, expires_in: issued.expiresIn, refresh_token: issued.refreshToken, token_type: 'Bearer', scope: issued.scope },
        { contentType: OAUTH_JSON, headers: NO_STORE },
      );
    } catch (error) {
      const grant = grantType === 'authorization_code' || grantType === 'refresh_token' ? grantType : 'other';
      instrumentation.oauthToken({ grant, outcome: 'refused' });
      throw error;
    }
  }));

  router.all(tokenPath, guard('token', async () => {
    throw oauthError(405, 'invalid_request', 'The token endpoint accepts POST only', { Allow: 'POST' });
  }));

  const userInfo = guard('userinfo', async (req, res) => {
    const token = bearerToken(req);
    if (typeof token !== 'string') throw invalidToken('An access token is required in the Authorization header');
    const found = await store.find('access', secretKey(token), now());
    if (found === undefined) throw invalidToken('The access token is unknown, expired or revoked');
    const current = await currentUser(found);
    if (current === undefined) throw invalidToken('The user of this access token no longer exists or is suspended');
    const { sub, name, email } = current;
    await sendJson(req, res, 200, { sub, name, email }, { headers: NO_STORE });
  });
  router.get(userInfoPath, userInfo);
  router.post(userInfoPath, userInfo);

  return router;

  interface Issued {
    accessToken: string;
    refreshToken: string;
    expiresIn: number;
    scope: string;
    sub: string;
    retry: boolean;
  }

  /** The user as they are now (`getUserById`), or `undefined` after revoking the grant when they are gone. */
  async function currentUser(found: OAuthRecord): Promise<OAuthUser | undefined> {
    if (getUserById === undefined) return found.user;
    const user = checkUser(await getUserById(found.user.sub));
    if (user !== undefined && user.sub === found.user.sub) return user;
    await store.revokeGrant(found.grantId, revocationUntil());
    log.warn({ sub: found.user.sub }, 'the user of a grant no longer exists or is suspended: the grant is revoked');
    return undefined;
  }

  /**
   * Saves the access and refresh tokens of `grant` issued at `issuedAt`, derived from `seedSource`
   * when given (refresh: the same request retried answers the same tokens) or random (code exchange).
   */
  async function issueTokens(base: OAuthRecord, issuedAt: number, accessScope: string, derived?: { seed: string; from: string }): Promise<Issued> {
    const make = (label: string): string => (derived === undefined ? randomSecret() : deriveSecret(derived.seed, label, derived.from));
    const accessToken = make('access');
    const refreshToken = make('refresh');
    const common = { grantId: base.grantId, clientId: base.clientId, user: base.user };
    const accessExpiresAt = issuedAt + accessTtlSeconds * 1000;
    const savedAccess = await store.saveToken('access', secretKey(accessToken), { ...common, scope: accessScope, expiresAt: accessExpiresAt }, now());
    const savedRefresh = await store.saveToken('refresh', secretKey(refreshToken), { ...common, scope: base.scope, expiresAt: issuedAt + refreshTtlMs, rotationSeed: randomSecret() }, now());
    // The grant was revoked (a replay elsewhere) while this redemption ran: nothing it saved is usable.
    if (savedAccess === 'revoked' || savedRefresh === 'revoked') throw invalidGrant('The authorization was revoked');
    sweepNow();
    return { accessToken, refreshToken, expiresIn: Math.max(1, Math.round((accessExpiresAt - now()) / 1000)), scope: accessScope, sub: base.user.sub, retry: false };
  }

  async function redeemCode(client: RegisteredClient, params: URLSearchParams): Promise<Issued> {
    const code = field(params, 'code');
    const redirectUri = field(params, 'redirect_uri');
    const verifier = field(params, 'code_verifier');
    if (code === undefined) throw oauthError(400, 'invalid_request', 'code is required');
    if (redirectUri === undefined) throw oauthError(400, 'invalid_request', 'redirect_uri is required');
    if (verifier !== undefined && !PKCE_VALUE.test(verifier)) throw oauthError(400, 'invalid_request', 'code_verifier must be 43 to 128 unreserved characters');
    const redeemed = await store.redeem('code', secretKey(code), { clientId: client.clientId, now: now() });
    if (redeemed.outcome === 'wrong-client') {
      log.warn({ client_id: client.clientId }, 'authorization code presented by another client: refused, left usable for its own client');
      throw invalidGrant('The authorization code is invalid, expired or already used');
    }
    if (redeemed.outcome === 'invalid') throw invalidGrant('The authorization code is invalid, expired or already used');
    const found = redeemed.record;
    if (redeemed.outcome === 'replayed') {
      // RFC 6749 §4.1.2: a code presented twice may be stolen; what it produced, now or later, is revoked.
      await store.revokeGrant(found.grantId, revocationUntil());
      log.warn({ client_id: client.clientId, sub: found.user.sub }, 'authorization code replayed: every token of that authorization is revoked');
      throw invalidGrant('The authorization code is invalid, expired or already used');
    }
    if (found.redirectUri !== redirectUri) throw invalidGrant('redirect_uri does not match the authorization request');
    checkVerifier(found, verifier);
    return issueTokens(found, now(), found.scope);
  }

  async function redeemRefreshToken(client: RegisteredClient, params: URLSearchParams): Promise<Issued> {
    const refreshToken = field(params, 'refresh_token');
    if (refreshToken === undefined) throw oauthError(400, 'invalid_request', 'refresh_token is required');
    const requestedScope = field(params, 'scope');
    const redeemed = await store.redeem('refresh', secretKey(refreshToken), { clientId: client.clientId, now: now() });
    if (redeemed.outcome === 'wrong-client' || redeemed.outcome === 'invalid') throw invalidGrant('The refresh token is invalid, expired or already used');
    const found = redeemed.record;
    const scope = grantedScope(requestedScope, found.scope.split(' '), 'invalid_scope');
    if (redeemed.outcome === 'replayed') {
      // A retry of a refresh whose answer was lost: the same client, soon after. Answer what the first use issued.
      if (found.rotationSeed !== undefined && now() - redeemed.usedAt <= graceMs) {
        const user = await currentUser(found);
        if (user === undefined) throw invalidGrant('The user of this authorization no longer exists or is suspended');
        const issued = await issueTokens({ ...found, user }, redeemed.usedAt, scope, { seed: found.rotationSeed, from: refreshToken });
        // ... unless the client already moved on and used the new refresh token: then it is a replay after all.
        if ((await store.find('refresh', secretKey(issued.refreshToken), now())) !== undefined) return { ...issued, retry: true };
      }
      // A rotated-out refresh token coming back means two parties hold it: end the authorization.
      await store.revokeGrant(found.grantId, revocationUntil());
      log.warn({ client_id: client.clientId, sub: found.user.sub }, 'refresh token replayed: every token of that authorization is revoked');
      throw invalidGrant('The refresh token is invalid, expired or already used');
    }
    const user = await currentUser(found);
    if (user === undefined) throw invalidGrant('The user of this authorization no longer exists or is suspended');
    const derived = found.rotationSeed === undefined ? undefined : { seed: found.rotationSeed, from: refreshToken };
    return issueTokens({ ...found, user }, now(), scope, derived);
  }

  /** RFC 7636 §4.6; and RFC 9700 §2.1.1: a verifier for a code issued without a challenge is refused. */
  function checkVerifier(found: OAuthRecord, verifier: string | undefined): void {
    if (found.codeChallenge === undefined) {
      if (verifier !== undefined) throw invalidGrant('code_verifier was sent, but the authorization request had no code_challenge');
      return;
    }
    if (verifier === undefined) throw invalidGrant('code_verifier is required: the authorization request had a code_challenge');
    const computed = found.codeChallengeMethod === 'S256' ? createHash('sha256').update(verifier, 'ascii').digest('base64url') : verifier;
    if (!matchesAnyDigest(computed, [sha256(found.codeChallenge)])) throw invalidGrant('code_verifier does not match the code_challenge');
  }

  /** Expired records go at most once a minute, after a write, without holding up the answer. */
  function sweepNow(): void {
    const at = now();
    if (at - lastSweep < 60_000) return;
    lastSweep = at;
    store.sweep(at).catch((error: unknown) => log.warn({ err: error }, 'sweeping expired codes and tokens failed; retried later'));
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
        if (error instanceof RedirectedError) {
          log.info({ endpoint, error: error.error }, `oauth ${endpoint}: ${error.description}; sent back to the client`);
          res.set({ ...NO_STORE, 'Referrer-Policy': 'no-referrer' });
          res.redirect(302, withQuery(error.redirectUri, { error: error.error, error_description: error.description, state: error.state }));
          return;
        }
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
        } else if (isMarketplaceError(error) && error.status === 503) {
          // The store is unreachable: nothing was decided, a retry may succeed.
          log.warn({ endpoint, err: error }, `oauth ${endpoint}: storage unavailable; answering 503`);
          status = 503;
          body = endpoint === 'authorize' ? { message: error.message } : { error: 'temporarily_unavailable', error_description: error.message };
          headers['Retry-After'] = '1';
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

/** A form field, `undefined` when absent or empty (RFC 6749 §3.1: empty parameters count as omitted). */
function field(params: URLSearchParams, name: string): string | undefined {
  const value = params.get(name);
  return value === null || value === '' ? undefined : value;
}

/** `requested` when every scope in it is offered, all of `offered` when omitted; `error` otherwise. */
function grantedScope(requested: string | undefined, offered: readonly string[], error: string): string {
  if (requested === undefined) return offered.join(' ');
  const asked = requested.split(' ').filter((token) => token !== '');
  const unknown = asked.filter((token) => !offered.includes(token));
  if (asked.length === 0) return offered.join(' ');
  if (unknown.length > 0) throw oauthError(400, error, `scope may only include: ${offered.join(' ')}`);
  return [...new Set(asked)].join(' ');
}

function pkceChallenge(challenge: string | undefined, method: string | undefined): { codeChallenge: string; codeChallengeMethod: 'S256' | 'plain' } | undefined {
  if (challenge === undefined) {
    if (method !== undefined) throw refusal('invalid_request', 'code_challenge_method was sent without a code_challenge');
    return undefined;
  }
  if (!PKCE_VALUE.test(challenge)) throw refusal('invalid_request', 'code_challenge must be 43 to 128 unreserved characters');
  const codeChallengeMethod = method ?? 'plain';
  if (codeChallengeMethod !== 'S256' && codeChallengeMethod !== 'plain') throw refusal('invalid_request', 'code_challenge_method must be S256 or plain');
  return { codeChallenge: challenge, codeChallengeMethod };
}

/** A token derived from a refresh token and its record's seed: the same inputs always give the same token. */
function deriveSecret(seed: string, label: string, from: string): string {
  return createHmac('sha256', seed).update(`${label}\n${from}`).digest('base64url');
}

/** The registered address with parameters appended as registered, rather than re-serialized through URL. */
function withQuery(redirectUri: string, values: Record<string, string | undefined>): string {
  let location = redirectUri;
  let separator = redirectUri.includes('?') ? '&' : '?';
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined) continue;
    location += `${separator}${name}=${encodeURIComponent(value)}`;
    separator = '&';
  }
  return location;
}

function redirected(client: RegisteredClient, state: string | undefined, error: OAuthError): OAuthError {
  if (!(error instanceof OAuthError)) return error;
  return new RedirectedError(client.redirectUri, state, error.error, error.description);
}

function invalidGrant(description: string): OAuthError {
  return new OAuthError(400, 'invalid_grant', description);
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

function checkScopes(value: unknown): string[] {
  const list = stringList(FACTORY, 'scopes', value);
  if (!list.every((scope) => SCOPE_TOKEN.test(scope))) throw new InvalidOptionsError(`${FACTORY}: option "scopes" must be scope tokens without spaces or quotes, such as ["id", "email", "name"]`);
  return list;
}

function checkIssuer(value: unknown): string {
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (url === undefined || !['https:', 'http:'].includes(url.protocol) || url.search !== '' || url.hash !== '') {
    throw new InvalidOptionsError(`${FACTORY}: option "issuer" must be the server's absolute https address without query or fragment, such as "https://platform.example"`);
  }
  return value as string;
}

function checkStore(value: unknown): OAuthStore {
  const store = value as Partial<OAuthStore> | null;
  const methods = ['saveCode', 'saveToken', 'find', 'redeem', 'revokeGrant', 'revokeSubject', 'sweep'] as const;
  if (typeof store !== 'object' || store === null || !methods.every((method) => typeof store[method] === 'function')) {
    throw new InvalidOptionsError(`${FACTORY}: option "store" must implement ${methods.join(', ')} (see OAuthStore)`);
  }
  return store as OAuthStore;
}
