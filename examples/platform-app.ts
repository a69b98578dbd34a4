/**
 * The example platform: two users and a team, a small authorization policy, the three endpoints the
 * marketplace calls, the webhook receiver and the deprecated authorization-code flow.
 * `examples/platform.ts` starts it from the environment; tests build it in-process with
 * `createPlatformApp(env)`.
 *
 * Sign-in is a demonstration only: `GET /login?as=u-alice` signs anyone in as anyone.
 */
import { randomBytes } from 'node:crypto';
import express from 'express';
import session from 'express-session';
import { Registry } from 'prom-client';
import { mountObservability } from '../src/observability/mount.js';
import { NotFoundError } from '../src/errors.js';
import { createLogger, type Logger } from '../src/lib/logger.js';
import {
  deprecatedOAuthRouter,
  eventSecretHeader,
  eventSecretPath,
  marketplaceEvents,
  MemorySeenEventStore,
  platformRouter,
  type AuthorizationQuery,
  type OAuthStore,
  type OAuthUser,
  type SeenEventStore,
  type ProfileInput,
  type UserEntry,
  type Verb,
} from '../src/platform/index.js';

/** The environment the example reads (the names are part of its contract). */
export interface PlatformEnv {
  PORT?: string;
  /** Required: the bearer token the marketplace sends. */
  PLATFORM_ACCESS_TOKEN?: string;
  /** The deprecated flow is served only when these three are set. */
  OAUTH_CLIENT_ID?: string;
  OAUTH_CLIENT_SECRET?: string;
  /** The one registered redirect_uri of the deprecated flow. */
  MARKETPLACE_CALLBACK_URL?: string;
  /** Signs the example's session cookie; random per start when absent (with a warning: sessions end at every restart). */
  SESSION_SECRET?: string;
  /**
   * Authenticates webhook deliveries: the marketplace sends it in `X-Marketplace-Secret` to
   * `POST /v1/events`, or in the address `POST /v1/events/<EVENTS_SECRET>`. Without it the
   * receiver is not served.
   */
  EVENTS_SECRET?: string;
  /** `postgres://…`: codes, tokens and seen events in PostgreSQL, shared by every instance. Default: in memory. */
  DATABASE_URL?: string;
  /** Schema of those tables (default `embedded_marketplace`). */
  DATABASE_SCHEMA?: string;
  /** Test knob: every event handler waits this many milliseconds after logging (so that copies overlap). */
  EXAMPLE_EVENT_DELAY_MS?: string;
  LOG_LEVEL?: string;
}

/** The configuration is unusable: the start script prints the message and exits non-zero. */
export class PlatformConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PlatformConfigError';
  }
}

/** The platform's users, as their profiles (section 2.1). */
export const USERS: Readonly<Record<string, ProfileInput & { name: string; email: string }>> = {
  'u-alice': {
    id: 'u-alice',
    name: 'Alice',
    email: 'alice@example.com',
    state: 'active',
    standing: 'good',
    is_email_verified: true,
    has_payment_method: true,
  },
  'u-bob': {
    id: 'u-bob',
    name: 'Bob',
    email: 'bob@example.com',
    state: 'active',
    has_payment_method: false,
  },
};

export type Role = 'owner' | 'member';

/** The platform's teams: an owner and the members' roles. */
export const TEAMS: Readonly<Record<string, { name: string; owner: string; members: Readonly<Record<string, Role>> }>> = {
  't-acme': { name: 'Acme', owner: 'u-alice', members: { 'u-alice': 'owner', 'u-bob': 'member' } },
};

/** What a member may do; an owner may use every verb. */
export const MEMBER_VERBS: readonly Verb[] = ['READ', 'SSO', 'READ_CREDENTIALS'];

/** `record[key]` when `key` is the record's own property: ids such as `constructor` or `__proto__` find nothing. */
function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/**
 * A profile by id. A team answers with its own id and name and, as section 2.1 asks, its owner's
 * verification, standing and billing facts.
 */
export function profileOf(id: string): ProfileInput | undefined {
  const user = own(USERS, id);
  if (user !== undefined) return user;
  const team = own(TEAMS, id);
  const owner = team === undefined ? undefined : own(USERS, team.owner);
  if (team === undefined || owner === undefined) return undefined;
  return { ...owner, id, name: team.name };
}

/** The actor's role on what `ownerId` owns: a user owns their own things; a team's members have roles. */
export function roleOf(actorId: string, ownerId: string): Role | undefined {
  if (own(USERS, ownerId) !== undefined) return actorId === ownerId ? 'owner' : undefined;
  const team = own(TEAMS, ownerId);
  return team === undefined ? undefined : own(team.members, actorId);
}

/** The users with access to what `ownerId` owns, or `undefined` for an unknown owner. */
export function usersOf(ownerId: string): UserEntry[] | undefined {
  const entry = (id: string, role: Role): UserEntry => {
    const user = USERS[id]!;
    return { id, role, name: user.name, email: user.email };
  };
  if (own(USERS, ownerId) !== undefined) return [entry(ownerId, 'owner')];
  const team = own(TEAMS, ownerId);
  return team === undefined ? undefined : Object.entries(team.members).map(([id, role]) => entry(id, role));
}

/**
 * The policy: an owner may use every verb, a member READ, SSO and READ_CREDENTIALS only, and a
 * priced action needs the actor's own payment method. Unknown or inactive actors may do nothing.
 */
export function isAllowed(query: Pick<AuthorizationQuery, 'actor_id' | 'owner_id' | 'verb' | 'priced'>): boolean {
  const actor = own(USERS, query.actor_id);
  if (actor === undefined || actor.state !== 'active') return false;
  const role = roleOf(query.actor_id, query.owner_id);
  if (role === undefined) return false;
  if (role === 'member' && !MEMBER_VERBS.includes(query.verb)) return false;
  if (query.priced && actor.has_payment_method !== true) return false;
  return true;
}

interface ExampleSession {
  userId?: string;
}

function sessionOf(req: express.Request): ExampleSession {
  return req.session as unknown as ExampleSession;
}

/** A relative path on this server, so that `return_to` cannot send the browser elsewhere. */
function isLocalPath(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith('/') && !value.startsWith('//') && !value.includes('\\');
}

/** Options for building the app in-process (tests). */
export interface PlatformAppOptions {
  logger?: Logger | false;
  /** Shared stores (examples/platform.ts builds them from DATABASE_URL); default in memory. */
  stores?: { oauth?: OAuthStore; seen?: SeenEventStore };
  /** Where the platform's metrics go (served at `/metrics`). Default: a fresh prom-client Registry. */
  registry?: Registry;
}

const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
const SESSION_LIMIT = 10_000;

/**
 * A bounded, expiring in-memory express-session store. Full, it refuses new sessions rather than
 * signing the oldest users out (a flood of sign-ins cannot end anyone else's session).
 */
export function boundedSessionStore(options: { maxSessions: number; ttlMs: number; now?: () => number }): session.Store & { readonly size: number } {
  const now = options.now ?? Date.now;
  const sessions = new Map<string, { data: string; expiresAt: number }>();
  const expiryOf = (data: session.SessionData): number => (data.cookie.expires ? new Date(data.cookie.expires).getTime() : now() + options.ttlMs);
  const sweep = (): void => {
    const at = now();
    for (const [sid, entry] of sessions) if (entry.expiresAt <= at) sessions.delete(sid);
  };
  class BoundedSessionStore extends session.Store {
    get size(): number {
      return sessions.size;
    }
    override get(sid: string, callback: (err: unknown, data?: session.SessionData | null) => void): void {
      const entry = sessions.get(sid);
      if (entry === undefined || entry.expiresAt <= now()) {
        sessions.delete(sid);
        callback(null, null);
        return;
      }
      callback(null, JSON.parse(entry.data) as session.SessionData);
    }
    override set(sid: string, data: session.SessionData, callback?: (err?: unknown) => void): void {
      if (!sessions.has(sid) && sessions.size >= options.maxSessions) sweep();
      if (!sessions.has(sid) && sessions.size >= options.maxSessions) {
        callback?.(new Error('Too many sessions: try again later'));
        return;
      }
      sessions.set(sid, { data: JSON.stringify(data), expiresAt: expiryOf(data) });
      callback?.();
    }
    override destroy(sid: string, callback?: (err?: unknown) => void): void {
      sessions.delete(sid);
      callback?.();
    }
    override touch(sid: string, data: session.SessionData, callback?: () => void): void {
      const entry = sessions.get(sid);
      if (entry !== undefined) entry.expiresAt = expiryOf(data);
      callback?.();
    }
  }
  return new BoundedSessionStore();
}

/**
 * Builds the example platform. Throws {@link PlatformConfigError} when PLATFORM_ACCESS_TOKEN is missing
 * or the deprecated flow is only partly configured.
 *
 * @example
 * ```ts
 * const app = createPlatformApp({ PLATFORM_ACCESS_TOKEN: 'dev-token' });
 * app.listen(4568, '127.0.0.1');
 * ```
 */
export function createPlatformApp(env: PlatformEnv = process.env, options: PlatformAppOptions = {}): express.Express {
  const stores = options.stores;
  const token = env.PLATFORM_ACCESS_TOKEN;
  if (token === undefined || token.trim() === '') {
    throw new PlatformConfigError('PLATFORM_ACCESS_TOKEN is required: the bearer token the marketplace sends to this platform');
  }
  const oauthVars = ['OAUTH_CLIENT_ID', 'OAUTH_CLIENT_SECRET', 'MARKETPLACE_CALLBACK_URL'] as const;
  const missingOAuth = oauthVars.filter((name) => (env[name] ?? '') === '');
  if (missingOAuth.length > 0 && missingOAuth.length < oauthVars.length) {
    throw new PlatformConfigError(`The deprecated OAuth flow needs ${oauthVars.join(', ')} together; missing: ${missingOAuth.join(', ')}`);
  }
  const logger = options.logger ?? createLogger(undefined, { app: 'example-platform' });
  const log = logger === false ? createLogger(false) : logger;

  const app = express();
  app.disable('x-powered-by');
  const registry = options.registry ?? new Registry();
  const metrics = { registry };
  // Operator endpoints first, outside the session layer: a scrape must not create sessions.
  mountObservability(app, { registry });
  let sessionSecret = env.SESSION_SECRET ?? '';
  if (sessionSecret === '') {
    sessionSecret = randomBytes(32).toString('hex');
    log.warn('SESSION_SECRET is not set: a random one is used, so every restart signs everyone out and instances do not share sessions');
  }
  app.use(
    session({
      name: 'platform.sid',
      secret: sessionSecret,
      // Bounded and expiring, unlike express-session's MemoryStore; several instances need a shared store (connect-pg-simple).
      store: boundedSessionStore({ maxSessions: SESSION_LIMIT, ttlMs: SESSION_TTL_MS }),
      resave: false,
      saveUninitialized: false,
      cookie: { httpOnly: true, sameSite: 'lax', path: '/', maxAge: SESSION_TTL_MS },
    }),
  );

  app.get('/', (_req, res) => {
    res.json({
      message: 'Example platform for the embedded marketplace',
      endpoints: ['GET /v1/profiles/:id', 'GET /v1/users', 'GET /v1/resources/authorized', 'POST /v1/events', 'GET /login?as=u-alice'],
    });
  });

  app.get('/login', (req, res, next) => {
    const as = req.query.as;
    if (typeof as !== 'string' || as === '') {
      res.status(400).json({ message: 'Say who to sign in as: /login?as=u-alice' });
      return;
    }
    const user = own(USERS, as);
    if (user === undefined) {
      res.status(404).json({ message: 'Unknown user: sign in as u-alice or u-bob' });
      return;
    }
    const returnTo = req.query.return_to;
    // A fresh session id on sign-in, so an id planted before it is worthless afterwards.
    req.session.regenerate((error: unknown) => {
      if (error !== undefined && error !== null) {
        next(error);
        return;
      }
      sessionOf(req).userId = user.id;
      req.session.save((saveError: unknown) => {
        if (saveError !== undefined && saveError !== null) {
          next(saveError);
          return;
        }
        if (isLocalPath(returnTo)) res.redirect(303, returnTo);
        else res.json({ message: `Signed in as ${user.name} (${user.id})`, user: { id: user.id, name: user.name, email: user.email } });
      });
    });
  });

  app.get('/logout', (req, res, next) => {
    req.session.destroy((error: unknown) => {
      if (error !== undefined && error !== null) next(error);
      else res.json({ message: 'Signed out' });
    });
  });

  app.use(
    platformRouter({
      accessTokens: token,
      getProfile: (id) => profileOf(id),
      listUsers: ({ owner_id }) => {
        const users = usersOf(owner_id);
        if (users === undefined) throw new NotFoundError('Unknown owner');
        return users;
      },
      // The policy does not depend on the resource, so one answer covers every requested id.
      authorize: (query) => isAllowed(query),
      logger,
      metrics,
    }),
  );

  /** Marketplace resources by id, with the subject that owns them, as the events told us. */
  const resources = new Map<string, string>();
  app.locals.resources = resources;
  const eventsSecret = env.EVENTS_SECRET ?? '';
  if (eventsSecret !== '') {
    const delayMs = Number(env.EXAMPLE_EVENT_DELAY_MS ?? 0);
    const pause = (): Promise<void> => (Number.isFinite(delayMs) && delayMs > 0 ? new Promise((resolve) => setTimeout(resolve, delayMs)) : Promise.resolve());
    const handlers = {
      'resource:provisioned': async ({ resource_id, subject }: { resource_id: string; subject: string }) => {
        resources.set(resource_id, subject);
        log.info({ event: 'resource:provisioned', resource_id, subject }, 'a resource was provisioned');
        await pause();
      },
      'resource:deprovisioned': async ({ resource_id, subject }: { resource_id: string; subject: string }) => {
        resources.delete(resource_id);
        log.info({ event: 'resource:deprovisioned', resource_id, subject }, 'a resource was deprovisioned');
        await pause();
      },
    };
    // One seen store for both addresses: a delivery is handled once whichever way it came.
    const seenStore = stores?.seen ?? new MemorySeenEventStore();
    app.post('/v1/events', marketplaceEvents({ handlers, seenStore, logger, metrics, verify: eventSecretHeader({ header: 'x-marketplace-secret', secret: eventsSecret }) }));
    app.post('/v1/events/:secret', marketplaceEvents({ handlers, seenStore, logger, metrics, verify: eventSecretPath({ secret: eventsSecret }) }));
  } else {
    log.warn('EVENTS_SECRET is not set: the webhook receiver (POST /v1/events) is off, as it could not tell real deliveries from forged ones');
  }

  if (missingOAuth.length === 0) {
    app.use(
      deprecatedOAuthRouter({
        clients: [{ clientId: env.OAUTH_CLIENT_ID!, clientSecret: env.OAUTH_CLIENT_SECRET!, redirectUri: env.MARKETPLACE_CALLBACK_URL! }],
        getUser: (req): OAuthUser | null => {
          const user = own(USERS, sessionOf(req).userId ?? '');
          return user === undefined ? null : { sub: user.id, name: user.name, email: user.email };
        },
        ...(stores?.oauth === undefined ? {} : { store: stores.oauth }),
        onSignInRequired: (_req, res) => {
          res.status(401).json({ message: 'Not signed in to the platform: GET /login?as=<user id>&return_to=<this path>, then retry' });
        },
        logger,
        metrics,
      }),
    );
  } else {
    log.info('OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET and MARKETPLACE_CALLBACK_URL are not set: the deprecated OAuth flow is off');
  }

  app.use((_req, res) => {
    res.status(404).json({ message: 'Not found' });
  });
  app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    log.error({ err: error }, 'example platform: unexpected error');
    if (!res.headersSent) res.status(500).json({ message: 'Internal error' });
  });
  return app;
}

/** PORT as a TCP port (default 4568; 0 lets the OS choose). */
export function parsePort(value: string | undefined): number {
  if (value === undefined || value === '') return 4568;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new PlatformConfigError(`PORT must be an integer from 0 to 65535, got ${JSON.stringify(value.slice(0, 20))}`);
  return port;
}
