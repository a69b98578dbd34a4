import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { InvalidOptionsError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, optionalFunction, optionalLogger, rejectUnknownKeys } from '../lib/options.js';
import { readMarketplaceData, SESSION_HOWTO, sessionOf } from './session.js';

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
}

/**
 * Guards the provider's dashboard routes with the login made by {@link ssoHandler}: 401 without a
 * marketplace login, 403 when the route's resource is not the session's, 403 when the login expired
 * (its data is then removed from the session; the user repeats SSO from the marketplace). When it
 * passes, `res.locals.marketplace` is `{ resourceId, expiresAt }`.
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
  rejectUnknownKeys(factory, raw, ['resourceParam', 'now', 'logger']);
  const resourceParam = raw.resourceParam ?? 'id';
  if (resourceParam !== false && (typeof resourceParam !== 'string' || resourceParam.length === 0)) {
    throw new InvalidOptionsError(`${factory}: option "resourceParam" must be a route parameter name (e.g. "id") or false`);
  }
  const now = optionalFunction<() => number>(factory, raw, 'now') ?? Date.now;
  const logger = createLogger(optionalLogger<Logger>(factory, raw), { component: 'sso' });

  return function marketplaceSessionGuard(req: Request, res: Response, next: NextFunction): void {
    const session = sessionOf(req);
    if (session === undefined) {
      logger.error({ code: 'ERR_SSO_SESSION_MISSING' }, `requireMarketplaceSession: ${SESSION_HOWTO}`);
      res.status(500).json({ message: 'Sessions are not configured on this provider' });
      return;
    }
    const login = readMarketplaceData(session);
    if (login === undefined) {
      res.status(401).json({ message: 'Sign in through the marketplace to open this dashboard' });
      return;
    }
    if (now() >= login.expiresAt) {
      // Drop the expired token rather than keep a dead secret in the store.
      delete session.marketplace;
      res.status(403).json({ message: 'Your marketplace sign-in has expired: open the dashboard from the marketplace again' });
      return;
    }
    if (resourceParam !== false) {
      const requested = (req.params as Record<string, string | undefined>)[resourceParam];
      if (requested === undefined) {
        logger.error({ resourceParam }, `requireMarketplaceSession: the route has no :${resourceParam} parameter; set the resourceParam option (or false)`);
        res.status(500).json({ message: 'This dashboard route is misconfigured' });
        return;
      }
      if (requested !== login.resourceId) {
        res.status(403).json({ message: 'This sign-in is for another resource: open its dashboard from the marketplace' });
        return;
      }
    }
    res.locals.marketplace = { resourceId: login.resourceId, expiresAt: login.expiresAt };
    next();
  };
}
