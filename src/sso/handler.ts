import type { Request, RequestHandler, Response } from 'express';
import { InvalidOptionsError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import type { ConnectorClient } from '../connector/client.js';
import { asOptionsObject, optionalFunction, optionalLogger, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import { destroyQuietly, regenerate, save, SESSION_HOWTO, sessionOf, type LiveSession } from './session.js';
import { answerFailure, type SsoFailure, type SsoFailureHook } from './page.js';
import { defaultDashboardUrl, MAX_SSO_SESSION_MS, safeErr, signInSteps, SSO_MESSAGES } from './exchange.js';

export { MAX_SSO_SESSION_MS } from './exchange.js';

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
  const dashboardUrl = optionalFunction<(resourceId: string) => string>(factory, raw, 'dashboardUrl') ?? defaultDashboardUrl;
  const tokenTtlMs = optionalPositiveNumber(factory, raw, 'tokenTtlMs') ?? MAX_SSO_SESSION_MS;
  if (tokenTtlMs > MAX_SSO_SESSION_MS) {
    throw new InvalidOptionsError(`${factory}: option "tokenTtlMs" must be at most ${MAX_SSO_SESSION_MS} (24 h, the lifetime of the connector's SSO tokens)`);
  }
  const now = optionalFunction<() => number>(factory, raw, 'now') ?? Date.now;
  const logger = createLogger(optionalLogger<Logger>(factory, raw), { component: 'sso' });
  const onError = optionalFunction<SsoFailureHook>(factory, raw, 'onError');

  const signIn = signInSteps({ connector: connector as SsoHandlerOptions['connector'], dashboardUrl, tokenTtlMs, now, logger });

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
      answer(500, 'not-configured', SSO_MESSAGES.notConfigured);
      return;
    }
    const query = req.query as Record<string, unknown>;
    const result = await signIn(query.code, query.resource_id);
    if (!result.ok) {
      answer(result.failure.status, result.failure.reason, result.failure.message);
      return;
    }
    const { login, location: target } = result;
    const resourceId = login.resourceId;

    let fresh: LiveSession;
    try {
      // A new session id on login: an id planted in the browser beforehand (fixation) is worthless.
      fresh = await regenerate(req, session);
    } catch (err) {
      logger.error({ resourceId, err: safeErr(err) }, 'single sign-on failed: could not regenerate the session (is the session store up?)');
      answer(500, 'internal', SSO_MESSAGES.internal);
      return;
    }
    fresh.marketplace = login;
    try {
      await save(fresh);
    } catch (err) {
      // Destroying (not just clearing) stops express-session from saving the half-made login at the end.
      delete fresh.marketplace;
      await destroyQuietly(fresh);
      logger.error({ resourceId, err: safeErr(err) }, 'single sign-on failed: could not save the session (is the session store up?)');
      answer(500, 'internal', SSO_MESSAGES.internal);
      return;
    }
    logger.info({ resourceId }, 'single sign-on succeeded');
    res.redirect(303, target);
  };
}
