import { Router, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { BadRequestError, InternalError, isMarketplaceError, NotFoundError, type MarketplaceError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import type { MetricsOptions } from '../observability/index.js';
import { bearerToken, searchParams, sendJson } from './http.js';
import { integerOption } from '../lib/options.js';
import { checkOptionKeys, loggerOption, requireFunction, stringList, instrumentationOption } from './options.js';
import {
  checkProfile,
  checkUsers,
  VERBS,
  type AuthorizationEntry,
  type Checked,
  type ProfileInput,
  type UserEntry,
  type Verb,
} from './schemas.js';
import { matchesAnyDigest, sha256 } from '../lib/secrets.js';

/** What every platform handler receives besides its parsed input. */
export interface PlatformHandlerContext {
  /** The marketplace's request, for request-scoped data of the host app (never for re-parsing input). */
  req: Request;
}

/** Parsed query of `GET /v1/users`. */
export interface UsersQuery {
  resource_id: string;
  owner_id: string;
  /** The pipe-delimited `annotations`, split; empty when absent. */
  annotations: string[];
}

/** Parsed query of `GET /v1/resources/authorized`. */
export interface AuthorizationQuery {
  actor_id: string;
  owner_id: string;
  verb: Verb;
  priced: boolean;
  /** The pipe-delimited `resource_ids`, split and de-duplicated in request order; empty when absent. */
  resource_ids: string[];
  /** The pipe-delimited `annotations`, split; empty when absent. */
  annotations: string[];
}

/**
 * A platform's authorization answer: one boolean for every requested resource, or a decision per
 * resource id (a record, a map, or a list of section 2.3 entries). A requested id the answer leaves
 * out is denied; an id that was not requested is dropped.
 */
export type AuthorizationDecision =
  | boolean
  | Readonly<Record<string, boolean>>
  | ReadonlyMap<string, boolean>
  | readonly AuthorizationEntry[];

type MaybePromise<T> = T | Promise<T>;

/** Bounds on the query parameters; the defaults fit the marketplace's 29-character ids comfortably. */
export interface PlatformRouterLimits {
  /** Most resource ids in one `resource_ids` (default 100). */
  maxResourceIds?: number;
  /** Most entries in one `annotations` (default 50). */
  maxAnnotations?: number;
  /** Longest single id, annotation or path parameter, in characters (default 256). */
  maxValueLength?: number;
}

/** Options of {@link platformRouter}. */
export interface PlatformRouterOptions {
  /**
   * The PLATFORM_ACCESS_TOKEN the marketplace sends as a bearer token. Give a list to rotate: accept
   * the old and the new token, switch the marketplace over, then drop the old one.
   */
  accessTokens: string | readonly string[];
  /** Looks up a profile (user, team, ...) by the platform's id; `null`/`undefined` answers 404. */
  getProfile(id: string, context: PlatformHandlerContext): MaybePromise<ProfileInput | null | undefined>;
  /** Lists the users with access to a resource of `owner_id`. */
  listUsers(query: UsersQuery, context: PlatformHandlerContext): MaybePromise<readonly UserEntry[]>;
  /** Decides whether `actor_id` may perform `verb` on resources of `owner_id`. */
  authorize(query: AuthorizationQuery, context: PlatformHandlerContext): MaybePromise<AuthorizationDecision>;
  limits?: PlatformRouterLimits;
  /** A pino logger, or `false` for none. Default: JSON lines on stdout with secrets redacted. */
  logger?: Logger | false;
  /** `{ registry }` (a prom-client Registry): counts answered requests by route and status. */
  metrics?: MetricsOptions;
}

const FACTORY = 'platformRouter';
const OPTION_KEYS = ['accessTokens', 'getProfile', 'listUsers', 'authorize', 'limits', 'logger', 'metrics', 'instrumentation'] as const;
const LIMIT_KEYS = ['maxResourceIds', 'maxAnnotations', 'maxValueLength'] as const;

interface ResolvedLimits {
  maxResourceIds: number;
  maxAnnotations: number;
  maxValueLength: number;
}

/**
 * The three endpoints a platform exposes to the marketplace (interface section 4.1):
 * `GET /v1/profiles/:id`, `GET /v1/users` and `GET /v1/resources/authorized`.
 *
 * Each call must carry one of `accessTokens` as a bearer token (compared in constant time). Query
 * parameters are validated before a handler runs (400 otherwise) and the handler's answer is checked
 * against interface section 2 before it is sent: an invalid answer is the platform's bug, so it
 * becomes a 500 and a log line naming the field, never a malformed answer to the marketplace.
 * Answers are gzip-compressed when the request accepts it. A handler may throw a 4xx
 * {@link MarketplaceError} (such as `NotFoundError`) to answer with it; anything else it throws
 * answers 500 `{"message":"Internal error"}` and is logged.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { platformRouter } from 'embedded-marketplace/platform';
 *
 * const app = express();
 * app.use(platformRouter({
 *   accessTokens: [process.env.PLATFORM_ACCESS_TOKEN!],
 *   getProfile: async (id) => db.profiles.find(id),          // null → 404
 *   listUsers: async ({ owner_id }) => db.members(owner_id),  // [{ id, role, name, email }]
 *   authorize: async ({ actor_id, owner_id, verb, priced }) => policy(actor_id, owner_id, verb, priced),
 * }));
 * ```
 */
export function platformRouter(options: PlatformRouterOptions): Router {
  const record = checkOptionKeys(FACTORY, options, OPTION_KEYS);
  const tokenDigests = stringList(FACTORY, 'accessTokens', record.accessTokens).map((token) => sha256(token));
  const getProfile = requireFunction<PlatformRouterOptions['getProfile']>(FACTORY, 'getProfile', record.getProfile);
  const listUsers = requireFunction<PlatformRouterOptions['listUsers']>(FACTORY, 'listUsers', record.listUsers);
  const authorize = requireFunction<PlatformRouterOptions['authorize']>(FACTORY, 'authorize', record.authorize);
  const limits = resolveLimits(record.limits);
  const log = createLogger(loggerOption(FACTORY, record), { component: 'platform' });
  const instrumentation = instrumentationOption(FACTORY, record);
  /** Counts the answer of a route (by its pattern, never the ids in the path) once it is sent. */
  const observe = (pattern: string): RequestHandler => (_req, res, next) => {
    res.once('finish', () => instrumentation.platformRequest({ route: pattern, status: res.statusCode }));
    next();
  };

  const requireToken: RequestHandler = (req, res, next) => {
    const token = bearerToken(req);
    if (typeof token === 'string' && matchesAnyDigest(token, tokenDigests)) {
      next();
      return;
    }
    log.warn({ route: req.path, reason: token === undefined ? 'missing' : 'invalid' }, 'platform call refused: missing or unknown bearer token');
    void sendJson(req, res, 401, { message: 'Missing or invalid bearer token' }, { headers: { 'WWW-Authenticate': 'Bearer realm="platform"' } });
  };

  const router = Router();

  router.get('/v1/profiles/:id', observe('/v1/profiles/:id'), requireToken, route(log, 'GET /v1/profiles/:id', async (req, res) => {
    const id = String(req.params.id);
    if (id.length > limits.maxValueLength) throw new BadRequestError(`Profile id is longer than ${limits.maxValueLength} characters`, 'ERR_VALIDATION');
    const found = await getProfile(id, { req });
    if (found === null || found === undefined) throw new NotFoundError('Profile not found');
    const profile = expectValid(checkProfile(found), 'getProfile', 'profile');
    await sendJson(req, res, 200, profile);
  }));

  router.get('/v1/users', observe('/v1/users'), requireToken, route(log, 'GET /v1/users', async (req, res) => {
    const params = new QueryReader(searchParams(req), limits);
    const query: UsersQuery = {
      resource_id: params.required('resource_id'),
      owner_id: params.required('owner_id'),
      annotations: params.list('annotations', limits.maxAnnotations),
    };
    const users = expectValid(checkUsers(await listUsers(query, { req })), 'listUsers', 'user list');
    await sendJson(req, res, 200, { users });
  }));

  router.get('/v1/resources/authorized', observe('/v1/resources/authorized'), requireToken, route(log, 'GET /v1/resources/authorized', async (req, res) => {
    const params = new QueryReader(searchParams(req), limits);
    const query: AuthorizationQuery = {
      actor_id: params.required('actor_id'),
      owner_id: params.required('owner_id'),
      verb: params.verb('verb'),
      priced: params.boolean('priced'),
      resource_ids: [...new Set(params.list('resource_ids', limits.maxResourceIds))],
      annotations: params.list('annotations', limits.maxAnnotations),
    };
    // With no resource named there is nothing to answer per resource, so the platform is not asked.
    if (query.resource_ids.length === 0) {
      await sendJson(req, res, 200, { resources: [] });
      return;
    }
    const decision = await authorize(query, { req });
    const resources = expectValid(decide(decision, query.resource_ids, log), 'authorize', 'authorization decision');
    await sendJson(req, res, 200, { resources });
  }));

  // Express refuses a path parameter that is not valid percent-encoding (`/v1/profiles/%E0`) with a
  // 400 before any handler of ours runs; answer it as JSON, not as the host app's HTML error page.
  router.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    const status = typeof error === 'object' && error !== null ? (error as { status?: unknown }).status : undefined;
    if (res.headersSent || typeof status !== 'number' || status < 400 || status > 499) {
      next(error);
      return;
    }
    void sendJson(req, res, 400, { message: 'Malformed request path' }).catch(next);
  });

  return router;
}

/** A handler answered outside interface section 2: the platform's bug, so a 500 naming the field. */
class InvalidHandlerOutputError extends InternalError {
  constructor(
    readonly handler: string,
    readonly what: string,
    readonly field: string,
    readonly problem: string,
  ) {
    super({ cause: new Error(`${handler} returned an invalid ${what}: ${field} ${problem}`) });
  }
}

function expectValid<T>(checked: Checked<T>, handler: string, what: string): T {
  if (checked.ok) return checked.value;
  throw new InvalidHandlerOutputError(handler, what, checked.field, checked.problem);
}

type AsyncRoute = (req: Request, res: Response) => Promise<void>;

/** Runs a route and turns whatever it throws into the JSON answer the marketplace expects. */
function route(log: Logger, name: string, handler: AsyncRoute): RequestHandler {
  return (req: Request, res: Response, _next: NextFunction) => {
    handler(req, res).catch(async (error: unknown) => {
      let answer: MarketplaceError;
      if (error instanceof InvalidHandlerOutputError) {
        // The field name and the rule, never the value: values may be personal data.
        log.error(
          { route: name, handler: error.handler, field: error.field },
          `${error.handler} returned an invalid ${error.what}: "${error.field}" ${error.problem}; answering 500`,
        );
        answer = error;
      } else if (isMarketplaceError(error) && error.status < 500) {
        log.info({ route: name, status: error.status, code: error.code }, `${name}: ${error.message}`);
        answer = error;
      } else {
        log.error({ route: name, err: error }, `${name}: the platform handler failed; answering 500`);
        answer = new InternalError({ cause: error });
      }
      if (res.headersSent) return;
      await sendJson(req, res, answer.status, answer.toJSON()).catch((sendError: unknown) => {
        log.error({ route: name, err: sendError }, `${name}: could not send the error answer`);
      });
    });
  };
}

/** Reads and validates query parameters, throwing a 400 that names the parameter at fault. */
class QueryReader {
  constructor(
    private readonly params: URLSearchParams,
    private readonly limits: ResolvedLimits,
  ) {}

  private single(name: string): string | undefined {
    const values = this.params.getAll(name);
    if (values.length > 1) throw invalid(`Query parameter ${name} must be given once`);
    return values[0];
  }

  required(name: string): string {
    const value = this.single(name);
    if (value === undefined || value.length === 0) throw invalid(`Query parameter ${name} is required`);
    if (value.length > this.limits.maxValueLength) throw invalid(`Query parameter ${name} is longer than ${this.limits.maxValueLength} characters`);
    return value;
  }

  verb(name: string): Verb {
    const value = this.required(name);
    if (!(VERBS as readonly string[]).includes(value)) throw invalid(`Query parameter ${name} must be one of ${VERBS.join(', ')}`);
    return value as Verb;
  }

  boolean(name: string): boolean {
    const value = this.required(name);
    if (value === 'true') return true;
    if (value === 'false') return false;
    throw invalid(`Query parameter ${name} must be true or false`);
  }

  /** A pipe-delimited list: absent or empty means none; an empty entry (`a||b`, `a|`) is refused. */
  list(name: string, maxEntries: number): string[] {
    const value = this.single(name);
    if (value === undefined || value.length === 0) return [];
    const entries = value.split('|');
    if (entries.length > maxEntries) throw invalid(`Query parameter ${name} has more than ${maxEntries} entries`);
    for (const entry of entries) {
      if (entry.length === 0) throw invalid(`Query parameter ${name} has an empty entry between pipes`);
      if (entry.length > this.limits.maxValueLength) throw invalid(`An entry of query parameter ${name} is longer than ${this.limits.maxValueLength} characters`);
    }
    return entries;
  }
}

function invalid(message: string): MarketplaceError {
  return new BadRequestError(message, 'ERR_VALIDATION');
}

/** Builds exactly one entry per requested resource id, in request order, from the platform's decision. */
function decide(decision: unknown, resourceIds: readonly string[], log: Logger): Checked<AuthorizationEntry[]> {
  if (typeof decision === 'boolean') return { ok: true, value: resourceIds.map((resource_id) => ({ resource_id, authorized: decision })) };
  let lookup: (id: string) => unknown;
  let answered: Iterable<string>;
  if (decision instanceof Map) {
    lookup = (id) => decision.get(id);
    answered = decision.keys();
  } else if (Array.isArray(decision)) {
    const byId = new Map<string, unknown>();
    for (const [index, entry] of decision.entries()) {
      if (typeof entry !== 'object' || entry === null || typeof (entry as AuthorizationEntry).resource_id !== 'string') {
        return { ok: false, field: `[${index}].resource_id`, problem: 'must be a string' };
      }
      const { resource_id, authorized } = entry as AuthorizationEntry;
      if (byId.has(resource_id) && byId.get(resource_id) !== authorized) {
        return { ok: false, field: `[${index}]`, problem: 'contradicts an earlier entry for the same resource' };
      }
      byId.set(resource_id, authorized);
    }
    lookup = (id) => byId.get(id);
    answered = byId.keys();
  } else if (typeof decision === 'object' && decision !== null) {
    const record = decision as Record<string, unknown>;
    // Own properties only: a resource id such as "constructor" must not find Object.prototype's.
    lookup = (id) => (Object.hasOwn(record, id) ? record[id] : undefined);
    answered = Object.keys(record);
  } else {
    return { ok: false, field: '(decision)', problem: 'must be a boolean, a record, a Map or an array of {resource_id, authorized}' };
  }
  const requested = new Set(resourceIds);
  const extra = [...answered].filter((id) => !requested.has(id)).length;
  if (extra > 0) log.warn({ handler: 'authorize', extra }, 'authorize answered for resource ids that were not requested; they are left out');
  const entries: AuthorizationEntry[] = [];
  let missing = 0;
  for (const resource_id of resourceIds) {
    const authorized = lookup(resource_id);
    if (authorized === undefined) {
      missing += 1;
      entries.push({ resource_id, authorized: false });
      continue;
    }
    if (typeof authorized !== 'boolean') return { ok: false, field: 'authorized', problem: 'must be a boolean for every resource id' };
    entries.push({ resource_id, authorized });
  }
  if (missing > 0) log.warn({ handler: 'authorize', missing }, 'authorize gave no answer for some requested resource ids; they are denied');
  return { ok: true, value: entries };
}

function resolveLimits(value: unknown): ResolvedLimits {
  if (value === undefined) return { maxResourceIds: 100, maxAnnotations: 50, maxValueLength: 256 };
  const record = checkOptionKeys(`${FACTORY}: limits`, value, LIMIT_KEYS);
  return {
    maxResourceIds: integerOption(FACTORY, 'limits.maxResourceIds', record.maxResourceIds, 100, 1, 10_000),
    maxAnnotations: integerOption(FACTORY, 'limits.maxAnnotations', record.maxAnnotations, 50, 1, 10_000),
    maxValueLength: integerOption(FACTORY, 'limits.maxValueLength', record.maxValueLength, 256, 1, 65_536),
  };
}
