import type { Request, RequestHandler, Response } from 'express';
import { ConnectorError, InvalidOptionsError, isMarketplaceError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import type { AccessToken, ConnectorClient, ConnectorResource } from '../connector/client.js';
import { asOptionsObject, optionalFunction, optionalLogger, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import { destroyQuietly, regenerate, save, SESSION_HOWTO, sessionOf, type LiveSession } from './session.js';
import { answerFailure, type SsoFailure, type SsoFailureHook } from './page.js';
import { ID_PATTERN } from '../domain/schemas.js';

/** Options of {@link ssoHandler}. */
export interface SsoHandlerOptions {
  /** The connector client (only `exchangeCode` and `getResource` are used). */
  connector: Pick<ConnectorClient, 'exchangeCode' | 'getResource'>;
  /** Where a signed-in user goes. Default `/dashboard/<resource id, URL-encoded>`. */
  dashboardUrl?: (resourceId: string) => string;
  /** Longest a login lasts, in ms; the token's own expiry applies when sooner. Default and maximum 24 h. */
  tokenTtlMs?: number;
  /** A pino logger, or `false` for none. */
  logger?: Logger | false;
  /** Clock in ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /**
   * Answers a failed sign-in yourself, e.g. a redirect to your own page (passport's
   * `failureRedirect` convention). Default: an HTML page for browsers, JSON `{message}` otherwise.
   */
  onError?: SsoFailureHook;
}

/** Section 8: the connector's SSO access tokens last 24 hours; a login never outlives that. */
export const MAX_SSO_SESSION_MS = 24 * 60 * 60 * 1000;

const CODE_PATTERN = /^[A-Za-z0-9._~+/=-]{1,512}$/;
// The provider routes' id pattern: `.` and `..` would reach the connector as another path.
const RESOURCE_ID_PATTERN = new RegExp(ID_PATTERN);

const MESSAGES = {
  notConfigured: 'Single sign-on is not available: the provider has not configured sessions',
  badCode: 'Missing or malformed "code": open the dashboard from the marketplace again',
  badResource: 'Missing or malformed "resource_id": open the dashboard from the marketplace again',
  invalidGrant: 'This sign-in link is invalid, expired or already used: open the dashboard from the marketplace again',
  noAccess: 'You do not have access to this resource',
  connectorDown: 'The marketplace could not confirm your sign-in right now; try again in a moment',
  internal: 'Sign-in failed because of an error on our side; try again in a moment',
} as const;

/**
 * The provider's `GET /v1/sso` (sections 4.3 and 4.5): the user's browser arrives, unsigned, with a
 * single-use `code` and a `resource_id`. The handler exchanges the code once (never retried), reads
 * the resource at the connector with the new token and requires it to be the requested one; only then
 * it regenerates the host app's express-session (no fixation), stores the resource the session is
 * restricted to, the token (server-side only) and its expiry, and answers 303 to the dashboard.
 *
 * Failures leave the session as it was and answer a small HTML page to browsers (`Accept:
 * text/html`), JSON `{message}` otherwise, or whatever `onError` does: 400 malformed query, 401 when
 * the code exchange fails (bad, expired or reused code, the connector refusing the provider's
 * client credentials, the connector unreachable; the log says which), 403 a resource the user
 * cannot access (or a tampered `resource_id`), 502 when the resource check at the connector fails,
 * 500 when express-session is not mounted before it (with a log line saying how to mount it), 405
 * for any method but GET (a HEAD must not use up the code).
 *
 * @example
 * ```ts
 * app.use(session({ secret: process.env.SESSION_SECRET!, store, resave: false, saveUninitialized: false }));
 * app.get('/v1/sso', ssoHandler({ connector: createConnectorClient({ connectorUrl, clientId, clientSecret }) }));
 * app.get('/dashboard/:id', requireMarketplaceSession(), (req, res) => res.send(`Resource ${res.locals.marketplace?.resourceId}`));
 * ```
 */
export function ssoHandler(options: SsoHandlerOptions): RequestHandler {
  const factory = 'ssoHandler';
  const raw = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, raw, ['connector', 'dashboardUrl', 'tokenTtlMs', 'logger', 'now', 'onError']);
  const connector = raw.connector as Partial<SsoHandlerOptions['connector']> | undefined;
  if (typeof connector?.exchangeCode !== 'function' || typeof connector.getResource !== 'function') {
    throw new InvalidOptionsError(`${factory}: option "connector" is required: pass createConnectorClient({ connectorUrl, clientId, clientSecret })`);
  }
  const exchangeCode = connector.exchangeCode.bind(connector);
  const getResource = connector.getResource.bind(connector);
  const dashboardUrl = optionalFunction<(resourceId: string) => string>(factory, raw, 'dashboardUrl')
    ?? ((id: string) => `/dashboard/${encodeURIComponent(id)}`);
  const tokenTtlMs = optionalPositiveNumber(factory, raw, 'tokenTtlMs') ?? MAX_SSO_SESSION_MS;
  if (tokenTtlMs > MAX_SSO_SESSION_MS) {
    throw new InvalidOptionsError(`${factory}: option "tokenTtlMs" must be at most ${MAX_SSO_SESSION_MS} (24 h, the lifetime of the connector's SSO tokens)`);
  }
  const now = optionalFunction<() => number>(factory, raw, 'now') ?? Date.now;
  const logger = createLogger(optionalLogger<Logger>(factory, raw), { component: 'sso' });
  const onError = optionalFunction<SsoFailureHook>(factory, raw, 'onError');

  /** Maps a connector failure to the user's answer; the log line names the cause, never the code or token. */
  function connectorFailure(answer: (status: number, reason: SsoFailure['reason'], message: string) => void, err: unknown, step: 'exchange' | 'resource check', resourceId: string): void {
    if (err instanceof ConnectorError) {
      const context = { resourceId, step, code: err.code, upstreamStatus: err.upstreamStatus };
      if (err.code === 'ERR_CONNECTOR_INVALID_GRANT') {
        logger.info(context, 'single sign-on refused: invalid, expired or reused code');
        answer(401, 'invalid-code', MESSAGES.invalidGrant);
        return;
      }
      if (err.code === 'ERR_CONNECTOR_AUTH' && step === 'exchange') {
        logger.error(context, 'single sign-on failed: the connector refused the provider\'s client credentials; check connector.clientId and connector.clientSecret (CONNECTOR_CLIENT_ID, CONNECTOR_CLIENT_SECRET)');
      } else {
        logger.warn(context, `single sign-on failed at the ${step}: ${err.message}`);
      }
      // An exchange that failed is a sign-in that failed (401, as Manifold's acceptance tool expects);
      // a failed resource check after a good exchange is the connector's fault (502).
      if (step === 'exchange') answer(401, 'connector', MESSAGES.connectorDown);
      else answer(502, 'connector', MESSAGES.connectorDown);
      return;
    }
    logger.error({ resourceId, step, err: safeErr(err) }, 'single sign-on failed: unexpected error from the connector client');
    answer(500, 'internal', MESSAGES.internal);
  }

  return async function marketplaceSso(req: Request, res: Response): Promise<void> {
    const answer = (status: number, reason: SsoFailure['reason'], message: string): void => answerFailure(req, res, { status, reason, message }, onError);
    // The URL carries a single-use code: keep it out of caches and out of Referer headers.
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');

    // Express routes HEAD to GET handlers; a link checker's HEAD must not burn the single-use code.
    if (req.method !== 'GET') {
      res.setHeader('Allow', 'GET');
      res.status(405).json({ message: 'Single sign-on only answers GET' });
      return;
    }
    const session = sessionOf(req);
    if (session === undefined) {
      logger.error({ code: 'ERR_SSO_SESSION_MISSING' }, `single sign-on: ${SESSION_HOWTO}`);
      answer(500, 'not-configured', MESSAGES.notConfigured);
      return;
    }
    const query = req.query as Record<string, unknown>;
    const code = query.code;
    const resourceId = query.resource_id;
    if (typeof resourceId !== 'string' || !RESOURCE_ID_PATTERN.test(resourceId)) {
      answer(400, 'bad-request', MESSAGES.badResource);
      return;
    }
    if (typeof code !== 'string' || !CODE_PATTERN.test(code)) {
      answer(400, 'bad-request', MESSAGES.badCode);
      return;
    }

    let token: AccessToken;
    try {
      token = await exchangeCode(code);
    } catch (err) {
      connectorFailure(answer, err, 'exchange', resourceId);
      return;
    }

    let resource: ConnectorResource | undefined;
    try {
      resource = await getResource(resourceId, token.accessToken);
    } catch (err) {
      connectorFailure(answer, err, 'resource check', resourceId);
      return;
    }
    if (resource === undefined) {
      logger.warn({ resourceId }, 'single sign-on refused: the connector says the user has no access to this resource');
      answer(403, 'no-access', MESSAGES.noAccess);
      return;
    }
    if (resource.id !== resourceId) {
      logger.warn({ resourceId, returnedId: resource.id }, 'single sign-on refused: the connector returned another resource than requested');
      answer(403, 'no-access', MESSAGES.noAccess);
      return;
    }

    let target: string;
    try {
      target = dashboardUrl(resourceId);
      if (typeof target !== 'string' || target.length === 0) throw new TypeError('dashboardUrl must return a non-empty string');
    } catch (err) {
      logger.error({ resourceId, err: safeErr(err) }, 'single sign-on failed: the dashboardUrl option threw or returned no URL');
      answer(500, 'internal', MESSAGES.internal);
      return;
    }

    let fresh: LiveSession;
    try {
      // A new session id on login: an id planted in the browser beforehand (fixation) is worthless.
      fresh = await regenerate(req, session);
    } catch (err) {
      logger.error({ resourceId, err: safeErr(err) }, 'single sign-on failed: could not regenerate the session (is the session store up?)');
      answer(500, 'internal', MESSAGES.internal);
      return;
    }
    fresh.marketplace = {
      resourceId,
      accessToken: token.accessToken,
      expiresAt: Math.min(token.expiresAt, now() + tokenTtlMs),
    };
    try {
      await save(fresh);
    } catch (err) {
      // Destroying (not just clearing) stops express-session from saving the half-made login at the end.
      delete fresh.marketplace;
      await destroyQuietly(fresh);
      logger.error({ resourceId, err: safeErr(err) }, 'single sign-on failed: could not save the session (is the session store up?)');
      answer(500, 'internal', MESSAGES.internal);
      return;
    }
    logger.info({ resourceId }, 'single sign-on succeeded');
    res.redirect(303, target);
  };
}

/** Error details for a log line without `cause` chains or extra properties that might carry secrets. */
function safeErr(err: unknown): { type: string; message: string; code?: string } {
  if (isMarketplaceError(err)) return { type: err.name, message: err.message, code: err.code };
  if (err instanceof Error) return { type: err.name, message: err.message };
  return { type: typeof err, message: 'non-error thrown' };
}
