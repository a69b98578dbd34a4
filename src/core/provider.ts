import type { IncomingMessage, ServerResponse } from 'node:http';
import { BadRequestError, InvalidOptionsError } from '../errors.js';
import type { OperationCall } from '../idempotency/operations.js';
import { truncateForLog } from '../lib/logger.js';
import { asOptionsObject } from '../lib/options.js';
import { parseJsonBody, sentOnceEach, type Accepted, type SignedInput } from '../signature/check.js';
import type { VerifiedRequest } from '../signature/verifier.js';
import { validatePathId } from '../domain/schemas.js';
import type { Completion } from '../domain/handlers.js';
import { errorAnswer, fromEngine, methodNotAllowed, toResponse, writeAnswer } from './answer.js';
import { composeProvider, type ProviderParts } from './compose.js';
import { answerMeasures } from './measures.js';
import { RequestLog } from './observe.js';
import { actionOf, decodePathId, matchPath, parseQuery, type PathMatch, type RouteAction, type RoutePattern } from './routes.js';
import { ssoCore, type SsoAnswer, type SsoCore } from './sso.js';
import { readWebBody } from './web-body.js';
import type { CompletionTarget, CoreAnswer, CoreHeaders, MarketplaceLogin, Provider, ProviderOptions } from './types.js';

const FACTORY = 'createProvider';
const NOT_FOUND: CoreAnswer = Object.freeze({ status: 404, json: Object.freeze({ message: 'Not found' }), code: 'ERR_NOT_FOUND' });
const SSO_OFF = 'Single sign-on is not configured on this provider (options "sso" and "connector")';

/**
 * The core behind every adapter: the composed parts, and the steps an adapter strings together
 * (verify, serve a route, answer SSO, record the request). `fetch` and `node` string all of them;
 * the Express adapter lets Express route and calls the steps from its route handlers.
 */
export class ProviderCore {
  readonly parts: ProviderParts;
  readonly log: RequestLog;
  readonly sso: SsoCore | undefined;
  /** The message of `/v1/sso` when it is not configured. */
  readonly ssoOff: string;
  readonly #basePath: string;

  constructor(parts: ProviderParts, options: { sso?: SsoCore | undefined; basePath?: string; ssoOff?: string } = {}) {
    this.parts = parts;
    this.log = new RequestLog(parts.logger, parts.instrumentation);
    this.sso = options.sso;
    this.ssoOff = options.ssoOff ?? SSO_OFF;
    this.#basePath = options.basePath ?? '';
  }

  /** The path relative to the base path, or undefined when the request is outside it. */
  relative(path: string): string | undefined {
    const base = this.#basePath;
    if (base.length === 0) return path;
    if (path.length < base.length || path.slice(0, base.length).toLowerCase() !== base.toLowerCase()) return undefined;
    const rest = path.slice(base.length);
    return rest.length === 0 ? '/' : rest.charCodeAt(0) === 0x2f ? rest : undefined;
  }

  /**
   * A verified request's route, as plain data: 405 for a method the route does not serve, the
   * measures, or the operation through the engine. Never rejects: errors are answers.
   */
  async serve(route: Exclude<RoutePattern, '/v1/sso'>, action: RouteAction | undefined, id: string, query: string, headers: CoreHeaders, body: unknown, verified: VerifiedRequest | undefined, reqId: string | undefined): Promise<CoreAnswer> {
    const { store, handlers, logger, engine } = this.parts;
    try {
      if (action === undefined) return methodNotAllowed(route);
      if (action === 'measures') return fromEngine(await answerMeasures({ store, handlers, logger }, validatePathId(id), parseQuery(query)));
      const call: OperationCall = {
        kind: action,
        id: validatePathId(id),
        body,
        callbackId: singleHeader(headers, 'x-callback-id'),
        callbackUrl: singleHeader(headers, 'x-callback-url'),
        signedHeaders: verified?.signedHeaders ?? [],
        requestId: requestSignature(headers),
        reqId,
      };
      return fromEngine(await engine.handle(call));
    } catch (error) {
      return errorAnswer(error, logger);
    }
  }

  /** A matched route's answer once its request verified (the id still percent-encoded). */
  serveMatched(match: Extract<PathMatch, { type: 'route' }>, method: string, query: string, headers: CoreHeaders, body: unknown, verified: VerifiedRequest, reqId: string | undefined): Promise<CoreAnswer> | CoreAnswer {
    let id: string;
    try {
      id = decodePathId(match.rawId);
    } catch (error) {
      return errorAnswer(error, this.parts.logger);
    }
    return this.serve(match.route, actionOf(match.route, method), id, query, headers, body, verified, reqId);
  }

  /** `/v1/sso`: the sign-in, or a JSON 404 when single sign-on is not configured. */
  answerSso(request: Parameters<SsoCore['answer']>[0]): Promise<SsoAnswer> | CoreAnswer {
    if (this.sso === undefined) return { status: 404, json: { message: this.ssoOff }, code: 'ERR_NOT_FOUND' };
    return this.sso.answer(request).catch((error: unknown) => errorAnswer(error, this.parts.logger));
  }

  /**
   * The signature check and the JSON body in one promise, for adapters that are not in a hurry for
   * callbacks: what was verified and the parsed body, or the answer of the refusal.
   */
  verifyRequest(input: SignedInput): Promise<{ accepted: Accepted; body: unknown } | CoreAnswer> {
    return new Promise((resolve) => {
      this.parts.signature.check(input, (failure, accepted) => {
        if (accepted === undefined) {
          resolve(errorAnswer(failure, this.parts.logger));
          return;
        }
        try {
          resolve({ accepted, body: this.parseBody(input.headers, accepted) });
        } catch (error) {
          resolve(errorAnswer(error, this.parts.logger));
        }
      });
    });
  }

  /** The verified body as JSON (undefined when empty). @throws MarketplaceError 400/415. */
  parseBody(headers: CoreHeaders, accepted: Accepted): unknown {
    return accepted.raw.length === 0 ? undefined : parseJsonBody(single(headers['content-type']), single(headers['content-encoding']), accepted.raw);
  }

  // -------------------------------------------------------------------------------------------
  // node:http and Connect
  // -------------------------------------------------------------------------------------------

  node(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const mark = url.indexOf('?');
    const relative = this.relative(mark === -1 ? url : url.slice(0, mark));
    const match = relative === undefined ? undefined : matchPath(relative);
    if (match === undefined) {
      if (next !== undefined) next();
      else writeSafely(res, NOT_FOUND, method, next);
      return;
    }
    const query = mark === -1 ? '' : url.slice(mark + 1);
    const reqId = requestIdOf(req);
    this.log.watch(res, method, relative!, req.headers['x-callback-id'], reqId);
    if (match.type === 'sso') {
      this.#nodeSso(req, res, method, query, next);
      return;
    }
    const headers = req.headers;
    const onceEach = sentOnceEach(req);
    const original = (req as { originalUrl?: string }).originalUrl ?? url;
    this.parts.signature.check({ method, url: original, headers, onceEach, distinct: onceEach ? undefined : req.headersDistinct, body: { stream: req } }, (failure, accepted) => {
      if (accepted === undefined) {
        writeSafely(res, errorAnswer(failure, this.parts.logger), method, next);
        return;
      }
      let body: unknown;
      try {
        body = this.parseBody(headers, accepted);
      } catch (error) {
        writeSafely(res, errorAnswer(error, this.parts.logger), method, next);
        return;
      }
      if (match.type === 'signed') {
        // Verified, but none of our routes: the host app's, with what verifySignature leaves.
        if (next === undefined) {
          writeSafely(res, NOT_FOUND, method, next);
          return;
        }
        const carrier = req as IncomingMessage & { rawBody?: Buffer; body?: unknown; marketplaceSignature?: VerifiedRequest };
        carrier.rawBody = accepted.raw;
        carrier.marketplaceSignature = accepted.verified;
        if (body !== undefined) carrier.body = body;
        next();
        return;
      }
      const answer = this.serveMatched(match, method, query, headers, body, accepted.verified, reqId);
      if (answer instanceof Promise) void answer.then((done) => writeSafely(res, done, method, next));
      else writeSafely(res, answer, method, next);
    });
  }

  #nodeSso(req: IncomingMessage, res: ServerResponse, method: string, query: string, next: ((error?: unknown) => void) | undefined): void {
    const secure = (req.socket as { encrypted?: boolean } | null)?.encrypted === true;
    const answer = this.answerSso({ method, query, headers: req.headers, secure, webRequest: () => webRequestOf(req, secure) });
    if (!(answer instanceof Promise)) {
      writeSafely(res, answer, method, next);
      return;
    }
    void answer.then((done) => (done instanceof Response ? writeResponse(res, done) : writeSafely(res, done, method, next)))
      .catch((error: unknown) => fail(res, error, next));
  }

  // -------------------------------------------------------------------------------------------
  // Web fetch
  // -------------------------------------------------------------------------------------------

  async fetch(request: Request): Promise<Response> {
    const method = request.method;
    const url = new URL(request.url);
    const relative = this.relative(url.pathname);
    const match = relative === undefined ? undefined : matchPath(relative);
    if (match === undefined) return toResponse(NOT_FOUND, method);
    const headers = headerRecord(request.headers, url.host);
    const watched = this.log.start(method, relative!, headers['x-callback-id'], undefined);
    const answer = await this.#fetchAnswer(request, match, method, url, headers);
    if (watched !== undefined) this.log.finish(watched, answer.status, answer instanceof Response ? undefined : answer.code);
    return answer instanceof Response ? answer : toResponse(answer, method);
  }

  async #fetchAnswer(request: Request, match: Exclude<PathMatch, undefined>, method: string, url: URL, headers: Record<string, string>): Promise<SsoAnswer> {
    const query = url.search.length === 0 ? '' : url.search.slice(1);
    if (match.type === 'sso') return this.answerSso({ method, query, headers, secure: url.protocol === 'https:', webRequest: () => request });
    // Read only once the header checks passed; `request.body` is not touched before (see readWebBody).
    const body = { read: (limit: number, timeoutMs: number) => readWebBody(request, limit, timeoutMs) };
    const verified = await this.verifyRequest({ method, url: url.pathname + url.search, headers, onceEach: false, body });
    if (!('accepted' in verified)) return verified;
    if (match.type === 'signed') return NOT_FOUND;
    return this.serveMatched(match, method, query, headers, verified.body, verified.accepted.verified, undefined);
  }

  // -------------------------------------------------------------------------------------------
  // What the host's own code drives
  // -------------------------------------------------------------------------------------------

  complete(target: CompletionTarget, completion: Completion): Promise<void> {
    return this.parts.engine.complete(target, completion);
  }

  async pendingOperations(limit = 100) {
    const { store } = this.parts;
    if (store.listPendingOperations === undefined) throw new TypeError(`pendingOperations: the ${store.kind} store does not implement listPendingOperations`);
    return store.listPendingOperations(limit);
  }

  session(request: Request | Pick<IncomingMessage, 'headers'>): Promise<MarketplaceLogin | undefined> {
    if (this.sso === undefined) return Promise.resolve(undefined);
    return this.sso.session(request, (node) => webRequestOf(node as IncomingMessage, false));
  }
}

/**
 * The provider without a framework: the signed resource and credential routes, measures and
 * single sign-on, served to any Web-standard host through `provider.fetch(request)` and to node:http
 * or Connect through `provider.node(req, res, next)`. Same options as `marketplaceRouter` (but the
 * Express-only `sso.onError`), plus the session the fetch and node hosts need for single sign-on.
 *
 * @throws {InvalidOptionsError} at construction for a wrong option.
 * @example
 * ```ts
 * import { createProvider } from 'embedded-marketplace';
 * const provider = createProvider({
 *   handlers,
 *   masterKey: process.env.MASTER_PUBLIC_KEY,
 *   publicHost: 'api.example.com',
 *   connector: { url: process.env.CONNECTOR_URL!, clientId, clientSecret },
 *   sso: { session: { secret: process.env.SSO_SESSION_SECRET! } },
 * });
 * // Next.js, app/v1/[...path]/route.ts
 * export const GET = (request: Request) => provider.fetch(request);
 * export const PUT = GET, PATCH = GET, DELETE = GET;
 * // or node:http
 * http.createServer((req, res) => provider.node(req, res)).listen(4567);
 * ```
 */
export function createProvider(options: ProviderOptions): Provider {
  const raw = asOptionsObject(FACTORY, options);
  const basePath = readBasePath(raw.basePath);
  if (raw.sso !== undefined && raw.sso !== false && (typeof raw.sso !== 'object' || raw.sso === null)) {
    throw new InvalidOptionsError(`${FACTORY}: option "sso" must be { session: { secret } } (or your session hooks) with options "dashboardUrl" and "onError", or false`);
  }
  // Single sign-on's options are checked before anything starts (the callback worker's timer).
  const now = typeof raw.now === 'function' ? raw.now as () => number : Date.now;
  const makeSso = options.sso === undefined || options.sso === false ? undefined : ssoCore(FACTORY, options.sso, raw.connector !== undefined, now);
  const parts = composeProvider(FACTORY, options, ['sso', 'basePath']);
  const sso = makeSso === undefined || parts.connector === undefined ? undefined : makeSso(parts.connector, parts.logger);
  const core = new ProviderCore(parts, { sso, basePath });
  return providerOf(core);
}

/** The public face of a core: its methods bound, and the core itself for adapters (see coreOf). */
export function providerOf(core: ProviderCore): Provider {
  const provider: Provider & { [CORE]: ProviderCore } = {
    fetch: (request) => core.fetch(request),
    node: (req, res, next) => core.node(req, res, next),
    session: (request) => core.session(request),
    complete: (target, completion) => core.complete(target, completion),
    pendingOperations: (limit) => core.pendingOperations(limit),
    recordUsage: core.parts.ledger.recordUsage,
    health: core.parts.health,
    store: core.parts.store,
    close: core.parts.close,
    [CORE]: core,
  };
  return provider;
}

const CORE = Symbol('embedded-marketplace.core');

/** @internal The core of a provider from createProvider, for adapters built on one. */
export function coreOf(provider: Provider): ProviderCore | undefined {
  return (provider as Partial<Record<typeof CORE, ProviderCore>>)[CORE];
}

function readBasePath(value: unknown): string {
  if (value === undefined || value === '' || value === '/') return '';
  if (typeof value !== 'string' || !/^\/[\x21-\x7e]*[^/]$/.test(value) || value.includes('?') || value.includes('#')) {
    throw new InvalidOptionsError(`${FACTORY}: option "basePath" must be a path such as "/marketplace" (a leading "/", no trailing "/", no query)`);
  }
  return value;
}

// X-Signature as the verifier accepts it (this runs only after it did): three parts separated by
// single spaces, the first one 86 characters long.
const SIGNATURE_LENGTH = 86 + 1 + 43 + 1 + 86;

/**
 * The request's own signature (the first field of X-Signature), which the verifier has checked:
 * Ed25519 signatures are not malleable, so it names this exact request and no other.
 */
export function requestSignature(headers: CoreHeaders): string | undefined {
  const header = headers['x-signature'];
  if (typeof header !== 'string') return undefined;
  if (header.length === SIGNATURE_LENGTH && header.charCodeAt(86) === 0x20) return header.slice(0, 86);
  const first = header.trim().split(/\s+/, 1)[0];
  return first === undefined || first === '' ? undefined : first;
}

export function singleHeader(headers: CoreHeaders, name: string): string | undefined {
  const value = headers[name];
  if (value === undefined || typeof value === 'string') return value;
  throw new BadRequestError(`Header ${name} must appear once`, 'ERR_VALIDATION');
}

function single(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value[0];
}

/**
 * The id pino-http (or any request-id middleware) gave the request, so the library's lines join the
 * app's own. pino-http sets `req.id`; a number or string is kept, anything else ignored.
 */
export function requestIdOf(req: IncomingMessage): string | undefined {
  const id = (req as IncomingMessage & { id?: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? truncateForLog(String(id)) : undefined;
}

/** A Web request's headers as the verifier reads them (lowercase names), with Host from the URL when absent. */
function headerRecord(headers: Headers, host: string): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  for (const [name, value] of headers) out[name] = value;
  out.host ??= host;
  return out;
}

/** A node request as a Web `Request` without a body (for the SSO hooks; never on the signed routes). */
function webRequestOf(req: IncomingMessage, secure: boolean): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const one of value) headers.append(name, one);
    else headers.set(name, value);
  }
  const host = typeof req.headers.host === 'string' && /^[\w.:[\]-]+$/.test(req.headers.host) ? req.headers.host : 'localhost';
  const target = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
  return new Request(`${secure ? 'https' : 'http'}://${host}${target.startsWith('/') ? target : `/${target}`}`, { method: req.method === 'HEAD' || req.method === 'GET' ? req.method : 'GET', headers });
}

/**
 * Writes an answer on a node response; should writing fail (a response already sent by someone
 * else), the error goes to `next`, or the connection is closed: never a throw from a callback.
 */
function writeSafely(res: ServerResponse, answer: CoreAnswer, method: string, next: ((error?: unknown) => void) | undefined): void {
  try {
    writeAnswer(res, answer, method);
  } catch (error) {
    fail(res, error, next);
  }
}

function fail(res: ServerResponse, error: unknown, next: ((error?: unknown) => void) | undefined): void {
  if (next !== undefined) next(error);
  else res.destroy(error instanceof Error ? error : undefined);
}

/** Writes a Web Response (a hook's) on a node response. */
async function writeResponse(res: ServerResponse, response: Response): Promise<void> {
  res.statusCode = response.status;
  for (const cookie of response.headers.getSetCookie()) res.appendHeader('Set-Cookie', cookie);
  for (const [name, value] of response.headers) if (name !== 'set-cookie') res.setHeader(name, value);
  res.end(Buffer.from(await response.arrayBuffer()));
}
