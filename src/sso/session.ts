import type { Request } from 'express';
import type { Session, SessionData } from 'express-session';
import { InvalidOptionsError } from '../errors.js';
import type { MarketplaceSessionData } from './exchange.js';

export type { MarketplaceSessionData } from './exchange.js';

/** What {@link requireMarketplaceSession} exposes as `res.locals.marketplace` (no token). */
export interface MarketplaceLocals {
  resourceId: string;
  expiresAt: number;
}

declare module 'express-session' {
  interface SessionData {
    /** Set by the marketplace SSO route; see `MarketplaceSessionData`. */
    marketplace?: MarketplaceSessionData;
  }
}

declare global {
  // Declaration merging into Express's own namespace is the only way to type res.locals.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Locals {
      /** Set by `requireMarketplaceSession()` for the request it let through. */
      marketplace?: MarketplaceLocals;
    }
  }
}

/** How to fix a missing session layer; shown in logs and start-up errors. */
export const SESSION_HOWTO =
  'req.session is missing: mount express-session before the marketplace routes, e.g. '
  + 'app.use(session({ secret, store, resave: false, saveUninitialized: false })); app.use(marketplaceRouter({ ... }))';

export type LiveSession = Session & Partial<SessionData>;

/** The request's express-session, or undefined when no session middleware ran before us. */
export function sessionOf(req: Request): LiveSession | undefined {
  const session = (req as { session?: unknown }).session;
  if (typeof session !== 'object' || session === null) return undefined;
  const s = session as Partial<Record<'regenerate' | 'save' | 'destroy', unknown>>;
  return typeof s.regenerate === 'function' && typeof s.save === 'function' && typeof s.destroy === 'function'
    ? session as LiveSession
    : undefined;
}

/** The stored marketplace login when it is well-formed; a malformed one counts as none. */
export function readMarketplaceData(session: LiveSession | undefined): MarketplaceSessionData | undefined {
  const data = session?.marketplace as unknown;
  if (typeof data !== 'object' || data === null) return undefined;
  const d = data as Record<string, unknown>;
  if (typeof d.resourceId !== 'string' || typeof d.accessToken !== 'string' || typeof d.expiresAt !== 'number') return undefined;
  return { resourceId: d.resourceId, accessToken: d.accessToken, expiresAt: d.expiresAt };
}

/**
 * The marketplace login of this request, when there is one and it has not expired. For the
 * provider's own server-side code (e.g. calling the connector on the user's behalf).
 *
 * @example
 * ```ts
 * app.get('/dashboard/:id/usage', requireMarketplaceSession(), (req, res) => {
 *   const login = getMarketplaceSession(req); // { resourceId, accessToken, expiresAt }
 * });
 * ```
 */
export function getMarketplaceSession(req: Request, now: () => number = Date.now): MarketplaceSessionData | undefined {
  const data = readMarketplaceData(sessionOf(req));
  return data !== undefined && now() < data.expiresAt ? data : undefined;
}

/**
 * Start-up check that express-session is mounted on `app` (looks for its middleware, a function
 * named `session`, at the top level of the app's stack). Call it after mounting your middleware; it
 * throws an {@link InvalidOptionsError} that says how to fix it. A heuristic: with another session
 * implementation, rely on the first-request check of `ssoHandler` instead.
 *
 * @example
 * ```ts
 * app.use(session({ secret, store, resave: false, saveUninitialized: false }));
 * app.use(marketplaceRouter({ ... }));
 * assertSessionMiddleware(app);
 * ```
 */
export function assertSessionMiddleware(app: { router?: unknown; _router?: unknown }): void {
  const router = (app.router ?? app._router) as { stack?: { name?: unknown }[] } | undefined;
  const stack = Array.isArray(router?.stack) ? router.stack : [];
  if (!stack.some((layer) => layer.name === 'session')) throw new InvalidOptionsError(`marketplace single sign-on: ${SESSION_HOWTO}`);
}

/** Promisified `session.regenerate`: resolves with the new session. */
export function regenerate(req: Request, session: LiveSession): Promise<LiveSession> {
  return new Promise((resolve, reject) => {
    session.regenerate((err: unknown) => {
      const fresh = sessionOf(req);
      if (err !== undefined && err !== null) reject(err instanceof Error ? err : new Error('session regenerate failed'));
      else if (fresh === undefined) reject(new Error('session regenerate left no session'));
      else resolve(fresh);
    });
  });
}

/** Promisified `session.save`. */
export function save(session: LiveSession): Promise<void> {
  return new Promise((resolve, reject) => {
    session.save((err: unknown) => {
      if (err !== undefined && err !== null) reject(err instanceof Error ? err : new Error('session save failed'));
      else resolve();
    });
  });
}

/** Promisified `session.destroy`, never rejecting: used on the failure path only. */
export function destroyQuietly(session: LiveSession): Promise<void> {
  return new Promise((resolve) => {
    try {
      session.destroy(() => resolve());
    } catch {
      resolve();
    }
  });
}
