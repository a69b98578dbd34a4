import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { InvalidOptionsError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, optionalFunction, optionalLogger, rejectUnknownKeys } from '../lib/options.js';
import { readMarketplaceData, SESSION_HOWTO, sessionOf } from './session.js';
import { answerFailure, type SsoFailure, type SsoFailureHook } from './page.js';

/** Options of {@link requireMarketplaceSession}. */
export interface RequireMarketplaceSessionOptions {
  /**
   * The route parameter that holds the resource id (default `'id'`, as in `/dashboard/:id`). The
   * request passes only when it equals the session's resource. `false` skips the comparison (for
   * routes without a resource id, e.g. `/dashboard` showing "your" resource).
   */
  resourceParam?: string | false;
  /** Clock in ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /** A pino logger, or `false` for none. */
  logger?: Logger | false;
  /**
   * Answers a refused visit yourself (no login, expired login, another resource), e.g. a redirect to
   * your own sign-in page (passport's `failureRedirect` convention). Default: an HTML page for
   * browsers, JSON `{message}` otherwise.
   */
  onMissing?: SsoFailureHook;
}

/**
 * Guards the provider's dashboard routes with the login made by {@link ssoHandler}: 401 without a
 * marketplace login, 403 when the route's resource is not the session's, 403 when the login expired
 * (its data is then removed from the session; the user repeats SSO from the marketplace). When it
 * passes, `res.locals.marketplace` is `{ resourceId, expiresAt }`. Refusals answer a small HTML
 * page to browsers (`Accept: text/html`) and JSON `{message}` otherwise, or whatever `onMissing` does.
 *
 * @example
 * ```ts
 * app.get('/dashboard/:id', requireMarketplaceSession(), (req, res) => {
 *   res.send(`Dashboard of ${res.locals.marketplace?.resourceId}`);
 * });
 * ```
 */
export function requireMarketplaceSession(options: RequireMarketplaceSessionOptions = {}): RequestHandler {
  const factory = 'requireMarketplaceSession';
  const raw = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, raw, ['resourceParam', 'now', 'logger', 'onMissing']);
  const resourceParam = raw.resourceParam ?? 'id';
  if (resourceParam !== false && (typeof resourceParam !== 'string' || resourceParam.length === 0)) {
    throw new InvalidOptionsError(`${factory}: option "resourceParam" must be a route parameter name (e.g. "id") or false`);
  }
  const now = optionalFunction<() => number>(factory, raw, 'now') ?? Date.now;
  const logger = createLogger(optionalLogger<Logger>(factory, raw), { component: 'sso' });
  const onMissing = optionalFunction<SsoFailureHook>(factory, raw, 'onMissing');

  return function marketplaceSessionGuard(req: Request, res: Response, next: NextFunction): void {
    const refuse = (status: number, reason: SsoFailure['reason'], message: string): void =>
      answerFailure(req, res, { status, reason, message }, status < 500 ? onMissing : undefined);
    const session = sessionOf(req);
    if (session === undefined) {
      logger.error({ code: 'ERR_SSO_SESSION_MISSING' }, `requireMarketplaceSession: ${SESSION_HOWTO}`);
      refuse(500, 'not-configured', 'Sessions are not configured on this provider');
      return;
    }
    const login = readMarketplaceData(session);
    if (login === undefined) {
      refuse(401, 'no-login', 'Sign in through the marketplace to open this dashboard');
      return;
    }
    if (now() >= login.expiresAt) {
      // Drop the expired token rather than keep a dead secret in the store.
      delete session.marketplace;
      refuse(403, 'expired', 'Your marketplace sign-in has expired: open the dashboard from the marketplace again');
      return;
    }
    if (resourceParam !== false) {
      const requested = (req.params as Record<string, string | undefined>)[resourceParam];
      if (requested === undefined) {
        logger.error({ resourceParam }, `requireMarketplaceSession: the route has no :${resourceParam} parameter; set the resourceParam option (or false)`);
        refuse(500, 'internal', 'This dashboard route is misconfigured');
        return;
      }
      if (requested !== login.resourceId) {
        refuse(403, 'other-resource', 'This sign-in is for another resource: open its dashboard from the marketplace');
        return;
      }
    }
    res.locals.marketplace = { resourceId: login.resourceId, expiresAt: login.expiresAt };
    next();
  };
}
