import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { decodeBasicAuth } from '../lib/basic-auth.js';
import { matchesAnyDigest, randomSecret, sha256 } from '../lib/secrets.js';
import { callbackPayloadProblem, type CallbackPayload, type ConnectorResource } from '../connector/client.js';
import {
  asOptionsObject,
  optionalFunction,
  optionalPositiveNumber,
  rejectUnknownKeys,
  requireNonEmptyString,
} from '../lib/options.js';

/** The three connector routes whose failures can be switched on. */
export type FakeConnectorTarget = 'tokens' | 'resources' | 'callbacks';

/**
 * An injected failure: answer `status` (with a JSON `{message}` body, or `body`), close the
 * connection without answering (`drop`), or hold the request `delayMs` before handling it normally
 * (for client timeouts).
 */
export type FakeFailure =
  | { status: number; body?: unknown; retryAfter?: string }
  | { drop: true }
  | { delayMs: number };

/** A resource the fake's resource check knows. */
export interface FakeResource extends ConnectorResource {
  product: string;
  plan: string;
  region: string;
  features: Record<string, string | number | boolean>;
  label: string;
  created_at: string;
  updated_at: string;
}

/**
 * Why a bearer token was refused: none sent, one this connector cannot have granted (another client,
 * another tool), expired, revoked by {@link FakeConnector.revokeTokens}, or an SSO token where a
 * client_credentials one is needed.
 *
 * @example
 * ```ts
 * const refused = fake.callbacks.filter((c) => c.authProblem === 'revoked');
 * ```
 */
export type FakeTokenProblem = 'missing' | 'unknown' | 'expired' | 'revoked' | 'not-client-credentials';

/** One request that reached `PUT /v1/callbacks/:id`, whatever it was answered. */
export interface ReceivedCallback {
  id: string;
  /** The parsed JSON body (undefined when there was none). Contains credentials in clear: test data only. */
  body: unknown;
  /** Whether it carried a valid client_credentials bearer token. */
  authOk: boolean;
  /** Why its token was refused, when `authOk` is false. */
  authProblem?: FakeTokenProblem;
  /** What the fake answered, or `'dropped'` when an injected failure closed the connection. */
  status: number | 'dropped';
  receivedAt: number;
}

/** One request that reached the token endpoint. */
export interface FakeTokenRequest {
  grantType: string | undefined;
  /** How the client authenticated: HTTP Basic, `client_id`/`client_secret` in the body, or not at all. */
  clientAuth: 'basic' | 'body' | 'none';
  status: number | 'dropped';
  /** When it arrived, by the fake's clock (`now`). */
  receivedAt: number;
}

/** Options of {@link createFakeConnector}. */
export interface FakeConnectorOptions {
  /** The only client the fake knows. */
  clientId: string;
  clientSecret: string;
  /** `expires_in` of every token it grants. Default 86 400 (24 h, the interface's maximum). */
  tokenTtlSeconds?: number;
  /** Validity of SSO codes. Default 300 (section 8). */
  codeTtlSeconds?: number;
  /** Clock in ms since the epoch, for code and token expiry. Default `Date.now`. */
  now?: () => number;
}

/** A running fake connector. */
export interface FakeConnectorServer {
  /** `http://127.0.0.1:<port>`, no trailing slash: use it as `connectorUrl`. */
  url: string;
  close(): Promise<void>;
}

/** The fake connector: an Express app and controls for tests. */
export interface FakeConnector {
  /** The Express app, to mount elsewhere or use with supertest. */
  readonly app: Express;
  /** Starts listening (default an OS-chosen port on 127.0.0.1). */
  listen(port?: number, host?: string): Promise<FakeConnectorServer>;
  /** The address once listening; throws before. */
  readonly url: string;
  /** Creates a single-use SSO code for `resourceId`, valid `codeTtlSeconds`. */
  issueSsoCode(grant: { resourceId: string; userId?: string }): string;
  /** Makes a resource known to the resource check; missing fields get test defaults. */
  addResource(resource: Pick<ConnectorResource, 'id'> & Partial<FakeResource>): FakeResource;
  /** Forgets a resource; `true` when it was known. */
  removeResource(id: string): boolean;
  /** Every request that reached the callback route, in order. */
  readonly callbacks: readonly ReceivedCallback[];
  /** The payload the fake accepted (first 204) for a callback id. */
  acceptedCallback(id: string): CallbackPayload | undefined;
  /** Every request that reached the token endpoint, in order. */
  readonly tokenRequests: readonly FakeTokenRequest[];
  /** Every resource check, in order, with the status it answered. */
  readonly resourceChecks: readonly { id: string; status: number | 'dropped' }[];
  /** The next `count` requests to `target` fail as described. Queued after earlier ones. */
  failNext(target: FakeConnectorTarget, count: number, failure: FakeFailure): void;
  /** Every request to `target` fails (default 503) until {@link FakeConnector.setUp}. */
  setDown(target: FakeConnectorTarget, failure?: FakeFailure): void;
  /** Ends {@link FakeConnector.setDown} for `target`. */
  setUp(target: FakeConnectorTarget): void;
  /** Clears every queued and persistent failure. */
  resetFailures(): void;
  /**
   * Invalidates every token granted so far, including client_credentials tokens an earlier fake
   * with the same client granted (the next callback then gets a 401).
   */
  revokeTokens(): void;
  /** `${url}/v1/callbacks/${encodeURIComponent(id)}`: the X-Callback-URL for an operation. */
  callbackUrl(callbackId: string): string;
  /** Resolves with the accepted callback for `id` (immediately if already there); rejects after `timeoutMs`. */
  waitForCallback(id: string, timeoutMs?: number): Promise<ReceivedCallback>;
  /** Closes the server if listening, drops open connections and rejects pending waits. */
  close(): Promise<void>;
}

interface Grant {
  kind: 'authorization_code' | 'client_credentials';
  resourceId?: string;
  userId?: string;
  expiresAt: number;
}

interface CodeRecord {
  resourceId: string;
  userId?: string;
  expiresAt: number;
  used: boolean;
}

interface Waiter {
  id: string;
  resolve(entry: ReceivedCallback): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

const SAFE_ID = /^[A-Za-z0-9._~-]{1,128}$/;
/** Prefix and version of the client_credentials tokens the fake derives (see `deriveToken`). */
const TOKEN_PREFIX = 'fct1';
const TARGETS: readonly FakeConnectorTarget[] = ['tokens', 'resources', 'callbacks'];

/**
 * A fake marketplace connector for tests (gaps.md "Connector"): the token endpoint with both
 * grants and single-use SSO codes, the resource check scoped to the token's grant, and the callback
 * route with its 204/409 semantics, plus switchable failures.
 *
 * Choices where the real connector is not documented: a client_credentials token reads no resource
 * (404, like any resource the token's user cannot access); a callback id is accepted without being
 * announced first; `credentials` with `state: "error"` is a 400.
 *
 * client_credentials tokens are not random: each carries its expiry and an HMAC keyed by the client
 * id and secret, so a fake connector started later with the same client accepts the tokens an
 * earlier one granted, as the real connector accepts a token until it expires. A provider that keeps
 * its token across two test runs then gets no 401 on the second run's callbacks.
 * {@link FakeConnector.revokeTokens} ends them all.
 *
 * @example
 * ```ts
 * const fake = createFakeConnector({ clientId: 'id', clientSecret: 'secret' });
 * const { url, close } = await fake.listen();
 * fake.addResource({ id: 'r1' });
 * const code = fake.issueSsoCode({ resourceId: 'r1' });
 * // ...drive the provider with `url` as connectorUrl, then:
 * fake.failNext('callbacks', 3, { status: 500 });
 * const callback = await fake.waitForCallback('cb1', 5000);
 * await close();
 * ```
 */
export function createFakeConnector(options: FakeConnectorOptions): FakeConnector {
  const factory = 'createFakeConnector';
  const raw = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, raw, ['clientId', 'clientSecret', 'tokenTtlSeconds', 'codeTtlSeconds', 'now']);
  const clientId = requireNonEmptyString(factory, raw, 'clientId');
  const clientSecret = requireNonEmptyString(factory, raw, 'clientSecret');
  const tokenTtlSeconds = optionalPositiveNumber(factory, raw, 'tokenTtlSeconds') ?? 86_400;
  const codeTtlSeconds = optionalPositiveNumber(factory, raw, 'codeTtlSeconds') ?? 300;
  const now = optionalFunction<() => number>(factory, raw, 'now') ?? Date.now;

  const codes = new Map<string, CodeRecord>();
  // SSO (authorization_code) tokens: bound to one code of this fake, kept in memory.
  const tokens = new Map<string, Grant>();
  // client_credentials tokens are derived, not stored: any fake with this client recognises them.
  const tokenKey = createHmac('sha256', 'embedded-marketplace fake connector: client_credentials tokens').update(`${clientId}\u0000${clientSecret}`).digest();
  // Bumped by revokeTokens(): tokens of an older generation are refused.
  let generation = 0;
  const resources = new Map<string, FakeResource>();
  const accepted = new Map<string, { payload: CallbackPayload; fingerprint: string; entry: ReceivedCallback }>();
  const callbacks: ReceivedCallback[] = [];
  const tokenRequests: FakeTokenRequest[] = [];
  const resourceChecks: { id: string; status: number | 'dropped' }[] = [];
  const queued = new Map<FakeConnectorTarget, FakeFailure[]>(TARGETS.map((t) => [t, []]));
  const down = new Map<FakeConnectorTarget, FakeFailure>();
  const delays = new Set<NodeJS.Timeout>();
  const waiters = new Set<Waiter>();
  let server: Server | undefined;
  let baseUrl: string | undefined;

  const app = express();
  app.disable('x-powered-by');
  const parseJson = express.json({ limit: '64kb', type: ['application/json', 'application/*+json'] });
  const parseForm = express.urlencoded({ extended: false, limit: '64kb' });

  /**
   * Applies an injected failure. Returns true when the request is finished (answered or dropped);
   * a delay runs `then` afterwards instead.
   */
  function injectFailure(target: FakeConnectorTarget, req: Request, res: Response, record: (status: number | 'dropped') => void, then: () => void): boolean {
    const failure = queued.get(target)?.shift() ?? down.get(target);
    if (failure === undefined) return false;
    if ('drop' in failure) {
      record('dropped');
      req.socket.destroy();
      return true;
    }
    if ('delayMs' in failure) {
      const timer = setTimeout(() => {
        delays.delete(timer);
        then();
      }, failure.delayMs);
      delays.add(timer);
      return true;
    }
    record(failure.status);
    if (failure.retryAfter !== undefined) res.setHeader('Retry-After', failure.retryAfter);
    res.status(failure.status).json(failure.body ?? { message: `Injected failure (${failure.status})` });
    return true;
  }

  function macOf(payload: string): string {
    return createHmac('sha256', tokenKey).update(payload).digest('base64url');
  }

  /** A client_credentials token: `fct1.<generation>.<expiry, base 36>.<nonce>.<HMAC of the rest>`. */
  function deriveToken(expiresAt: number): string {
    const payload = `${TOKEN_PREFIX}.${generation}.${expiresAt.toString(36)}.${randomSecret(12)}`;
    return `${payload}.${macOf(payload)}`;
  }

  function derivedGrant(token: string): Grant | FakeTokenProblem {
    const parts = token.split('.');
    if (parts.length !== 5 || parts[0] !== TOKEN_PREFIX) return 'unknown';
    const mac = Buffer.from(parts[4] ?? '');
    const expected = Buffer.from(macOf(parts.slice(0, 4).join('.')));
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return 'unknown';
    if (Number(parts[1]) !== generation) return 'revoked';
    const expiresAt = parseInt(parts[2] ?? '', 36);
    if (!Number.isFinite(expiresAt) || now() >= expiresAt) return 'expired';
    return { kind: 'client_credentials', expiresAt };
  }

  function bearerGrant(req: Request): Grant | FakeTokenProblem {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
    if (match === null) return 'missing';
    const token = match[1] ?? '';
    const grant = tokens.get(token);
    if (grant === undefined) return derivedGrant(token);
    if (now() >= grant.expiresAt) return 'expired';
    return grant;
  }

  // --- token endpoint -------------------------------------------------------------------------
  app.post('/v1/oauth/tokens', parseJson, parseForm, (req, res) => {
    const body = (typeof req.body === 'object' && req.body !== null ? req.body : {}) as Record<string, unknown>;
    const entry: FakeTokenRequest = { grantType: stringField(body, 'grant_type'), clientAuth: 'none', status: 0, receivedAt: now() };
    tokenRequests.push(entry);
    const record = (status: number | 'dropped'): void => {
      entry.status = status;
    };
    const handle = (): void => {
      res.setHeader('Cache-Control', 'no-store');
      res.setHeader('Pragma', 'no-cache');
      const oauthError = (status: number, error: string, description: string): void => {
        record(status);
        if (status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="connector"');
        res.status(status).json({ error, error_description: description });
      };

      const basic = parseBasic(req.get('authorization'));
      const bodyId = stringField(body, 'client_id');
      const bodySecret = stringField(body, 'client_secret');
      let presentedId: string | undefined;
      let presentedSecret: string | undefined;
      if (basic !== undefined) {
        entry.clientAuth = 'basic';
        if (bodySecret !== undefined || (bodyId !== undefined && bodyId !== basic.id)) {
          oauthError(400, 'invalid_request', 'Use one client authentication method, not both');
          return;
        }
        presentedId = basic.id;
        presentedSecret = basic.secret;
      } else if (bodyId !== undefined || bodySecret !== undefined) {
        entry.clientAuth = 'body';
        presentedId = bodyId;
        presentedSecret = bodySecret;
      }
      if (presentedId === undefined || presentedSecret === undefined) {
        oauthError(401, 'invalid_client', 'Client authentication is required');
        return;
      }
      if (!safeEqual(presentedId, clientId) || !safeEqual(presentedSecret, clientSecret)) {
        oauthError(401, 'invalid_client', 'Client authentication failed');
        return;
      }

      const grantType = entry.grantType;
      let grant: Grant;
      if (grantType === undefined) {
        oauthError(400, 'invalid_request', 'grant_type is required');
        return;
      } else if (grantType === 'authorization_code') {
        const code = stringField(body, 'code');
        if (code === undefined) {
          oauthError(400, 'invalid_request', 'code is required');
          return;
        }
        const record = codes.get(code);
        if (record === undefined || record.used || now() >= record.expiresAt) {
          oauthError(400, 'invalid_grant', 'The code is invalid, expired or already used');
          return;
        }
        record.used = true;
        grant = { kind: 'authorization_code', resourceId: record.resourceId, expiresAt: now() + tokenTtlSeconds * 1000 };
        if (record.userId !== undefined) grant.userId = record.userId;
      } else if (grantType === 'client_credentials') {
        grant = { kind: 'client_credentials', expiresAt: now() + tokenTtlSeconds * 1000 };
      } else {
        oauthError(400, 'unsupported_grant_type', 'Supported grants: authorization_code, client_credentials');
        return;
      }
      let accessToken: string;
      if (grant.kind === 'client_credentials') {
        accessToken = deriveToken(grant.expiresAt);
      } else {
        accessToken = randomSecret();
        tokens.set(accessToken, grant);
      }
      record(201);
      res.status(201).json({ access_token: accessToken, token_type: 'bearer', expires_in: tokenTtlSeconds });
    };
    if (!injectFailure('tokens', req, res, record, handle)) handle();
  });

  // --- resource check -------------------------------------------------------------------------
  app.get('/v1/resources/:id', (req, res) => {
    const id = req.params.id;
    const entry: { id: string; status: number | 'dropped' } = { id, status: 0 };
    resourceChecks.push(entry);
    const record = (status: number | 'dropped'): void => {
      entry.status = status;
    };
    const handle = (): void => {
      const grant = bearerGrant(req);
      if (typeof grant === 'string') {
        record(401);
        res.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
        res.status(401).json({ message: 'Missing, invalid or expired access token' });
        return;
      }
      const resource = resources.get(id);
      // Only an SSO token sees a resource, and only its own: anything else is a 404 so nothing leaks.
      if (grant.kind !== 'authorization_code' || grant.resourceId !== id || resource === undefined) {
        record(404);
        res.status(404).json({ message: 'Resource not found' });
        return;
      }
      record(200);
      res.status(200).json(resource);
    };
    if (!injectFailure('resources', req, res, record, handle)) handle();
  });

  // --- callbacks --------------------------------------------------------------------------------
  app.put('/v1/callbacks/:id', parseJson, (req, res) => {
    const id = req.params.id;
    const grant = bearerGrant(req);
    const authProblem = typeof grant === 'string' ? grant : grant.kind === 'client_credentials' ? undefined : 'not-client-credentials';
    const authOk = authProblem === undefined;
    const entry: ReceivedCallback = { id, body: req.body as unknown, authOk, status: 0, receivedAt: now() };
    if (authProblem !== undefined) entry.authProblem = authProblem;
    callbacks.push(entry);
    const record = (status: number | 'dropped'): void => {
      entry.status = status;
    };
    const handle = (): void => {
      const answer = (status: number, message?: string): void => {
        record(status);
        if (message === undefined) res.status(status).end();
        else res.status(status).json({ message });
      };
      if (!authOk) {
        res.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
        answer(401, 'A client_credentials access token is required');
        return;
      }
      if (!SAFE_ID.test(id)) {
        answer(404, 'Unknown callback');
        return;
      }
      const problem = callbackPayloadProblem(req.body);
      if (problem !== undefined) {
        answer(400, `Invalid callback: ${problem}`);
        return;
      }
      const payload = normalize(req.body as CallbackPayload);
      const fingerprint = JSON.stringify(payload);
      const earlier = accepted.get(id);
      if (earlier !== undefined) {
        if (earlier.fingerprint === fingerprint) answer(204);
        else answer(409, 'A different outcome was already reported for this callback');
        return;
      }
      accepted.set(id, { payload, fingerprint, entry });
      answer(204);
      for (const waiter of [...waiters]) {
        if (waiter.id !== id) continue;
        waiters.delete(waiter);
        clearTimeout(waiter.timer);
        waiter.resolve(entry);
      }
    };
    if (!injectFailure('callbacks', req, res, record, handle)) handle();
  });

  app.use((_req: Request, res: Response) => {
    res.status(404).json({ message: 'Not found on the fake connector' });
  });
  // Body-parser errors (malformed JSON, too large): the token endpoint speaks OAuth, the rest {message}.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const status = typeof (err as { status?: unknown }).status === 'number' ? (err as { status: number }).status : 500;
    if (req.path === '/v1/oauth/tokens') {
      res.status(status).json({ error: 'invalid_request', error_description: 'Unreadable request body' });
    } else {
      res.status(status).json({ message: 'Unreadable request body' });
    }
  });

  const fake: FakeConnector = {
    app,

    async listen(port = 0, host = '127.0.0.1') {
      if (server !== undefined) throw new Error('createFakeConnector: already listening; close() first');
      const created = createServer(app);
      const sockets = new Set<Socket>();
      created.on('connection', (socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        created.once('error', reject);
        created.listen(port, host, () => {
          created.off('error', reject);
          resolve();
        });
      });
      server = created;
      const address = created.address();
      const actualPort = typeof address === 'object' && address !== null ? address.port : port;
      baseUrl = `http://${host.includes(':') ? `[${host}]` : host}:${actualPort}`;
      return { url: baseUrl, close: () => fake.close() };
    },

    get url() {
      if (baseUrl === undefined) throw new Error('createFakeConnector: not listening yet; await fake.listen() first');
      return baseUrl;
    },

    issueSsoCode({ resourceId, userId }) {
      if (typeof resourceId !== 'string' || resourceId.length === 0) throw new TypeError('issueSsoCode: resourceId is required');
      const code = randomSecret();
      const record: CodeRecord = { resourceId, expiresAt: now() + codeTtlSeconds * 1000, used: false };
      if (userId !== undefined) record.userId = userId;
      codes.set(code, record);
      return code;
    },

    addResource(resource) {
      const at = new Date(now()).toISOString();
      const full: FakeResource = {
        product: 'test-product',
        plan: 'free',
        region: 'all::global',
        features: {},
        label: `resource-${resource.id}`,
        created_at: at,
        updated_at: at,
        ...resource,
      };
      resources.set(full.id, full);
      return full;
    },

    removeResource: (id) => resources.delete(id),
    callbacks,
    acceptedCallback: (id) => accepted.get(id)?.payload,
    tokenRequests,
    resourceChecks,

    failNext(target, count, failure) {
      checkTarget(target);
      if (!Number.isInteger(count) || count < 0) throw new TypeError('failNext: count must be a non-negative integer');
      for (let i = 0; i < count; i++) queued.get(target)?.push(failure);
    },

    setDown(target, failure = { status: 503 }) {
      checkTarget(target);
      down.set(target, failure);
    },

    setUp(target) {
      checkTarget(target);
      down.delete(target);
    },

    resetFailures() {
      down.clear();
      for (const list of queued.values()) list.length = 0;
    },

    revokeTokens() {
      tokens.clear();
      generation += 1;
    },

    callbackUrl: (callbackId) => `${fake.url}/v1/callbacks/${encodeURIComponent(callbackId)}`,

    waitForCallback(id, timeoutMs = 5000) {
      const done = accepted.get(id);
      if (done !== undefined) return Promise.resolve(done.entry);
      return new Promise<ReceivedCallback>((resolve, reject) => {
        const waiter: Waiter = {
          id,
          resolve,
          reject,
          timer: setTimeout(() => {
            waiters.delete(waiter);
            reject(new Error(`waitForCallback: no callback accepted for "${id}" within ${timeoutMs} ms`));
          }, timeoutMs),
        };
        waiters.add(waiter);
      });
    },

    async close() {
      for (const timer of delays) clearTimeout(timer);
      delays.clear();
      for (const waiter of waiters) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error('waitForCallback: the fake connector was closed'));
      }
      waiters.clear();
      const current = server;
      server = undefined;
      baseUrl = undefined;
      if (current === undefined) return;
      await new Promise<void>((resolve) => {
        current.close(() => resolve());
        current.closeAllConnections();
      });
    },
  };
  return fake;
}

function checkTarget(target: string): void {
  if (!(TARGETS as readonly string[]).includes(target)) {
    throw new TypeError(`fake connector: unknown target "${target}"; use one of ${TARGETS.join(', ')}`);
  }
}

function stringField(body: Record<string, unknown>, key: string): string | undefined {
  const value = body[key];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** RFC 6749 §2.3.1: Basic credentials are form-urlencoded; fall back to the raw text for lax clients. */
function parseBasic(header: string | undefined): { id: string; secret: string } | undefined {
  const basic = decodeBasicAuth(header);
  if (basic === undefined || basic === null) return undefined;
  return { id: formDecode(basic.user), secret: formDecode(basic.password) };
}

function formDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

function safeEqual(a: string, b: string): boolean {
  return matchesAnyDigest(a, [sha256(b)]);
}

/** Canonical form for comparing callbacks: field order and absent-vs-undefined do not matter. */
function normalize(payload: CallbackPayload): CallbackPayload {
  const out: CallbackPayload = { state: payload.state, message: payload.message };
  if (payload.credentials !== undefined) {
    out.credentials = Object.fromEntries(Object.entries(payload.credentials).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
  return out;
}
