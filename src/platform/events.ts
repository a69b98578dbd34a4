import type { Request, RequestHandler, Response } from 'express';
import {
  BadRequestError,
  InternalError,
  InvalidOptionsError,
  isMarketplaceError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
  type MarketplaceError,
} from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { bodyAlreadyConsumed, readRawBody } from '../signature/raw-body.js';
import { sendJson } from './http.js';
import { randomUUID } from 'node:crypto';
import { integerOption, optionalFunction } from '../lib/options.js';
import { matchesAnyDigest, sha256 } from '../lib/secrets.js';
import type { MetricsOptions } from '../observability/index.js';
import type { EventOutcome } from '../observability/hooks.js';
import { checkOptionKeys, loggerOption, stringList, instrumentationOption } from './options.js';
import type { SeenEventClaim, SeenEventStore } from '../store/platform/types.js';

/** The event types interface section 6 defines. */
export const EVENT_TYPES = ['resource:provisioned', 'resource:deprovisioned'] as const;
export type MarketplaceEventType = (typeof EVENT_TYPES)[number];

/** The `data` of both resource events. */
export interface ResourceEventData {
  /** The marketplace resource id: keep it, the resource cannot be queried after deprovisioning. */
  resource_id: string;
  /** The platform's identifier of the user (or team) the resource belongs to. */
  subject: string;
}

/** Delivery details passed to an event handler next to the data. */
export interface MarketplaceEventContext {
  /** The type from the `X-Marketplace-Event` header (authoritative; the body's `event` may differ). */
  type: MarketplaceEventType;
  /** The envelope's payload version (1 for the events the interface shows). */
  version: number;
  /** `X-Marketplace-Request`, the publisher's id of this delivery, for correlating logs. */
  requestId: string | undefined;
  req: Request;
}

export type MarketplaceEventHandler = (data: ResourceEventData, context: MarketplaceEventContext) => void | Promise<void>;

export type { SeenEventClaim, SeenEventStore } from '../store/platform/types.js';

/**
 * Checks that a delivery comes from the marketplace (the raw body is given). Answer `false` to
 * refuse with 401. See {@link eventSecretHeader} and {@link eventSecretPath}.
 */
export type EventVerifier = (req: Request, body: Buffer) => boolean | Promise<boolean>;

/** Options of {@link marketplaceEvents}. */
export interface MarketplaceEventsOptions {
  /** One handler per event type; at least one. Types without a handler are acknowledged and ignored. */
  handlers: Partial<Record<MarketplaceEventType, MarketplaceEventHandler>>;
  /**
   * Required. The interface does not sign event deliveries: anyone who can reach this endpoint can
   * forge one. Give {@link eventSecretHeader} (a secret the marketplace sends in a header),
   * {@link eventSecretPath} (a secret segment in the receiver's address), your own check, or `false`
   * when something in front of this endpoint (a gateway, an address allow-list) already
   * authenticates deliveries. Refused deliveries never reach the de-duplication store.
   */
  verify: EventVerifier | false;
  /**
   * A delivery (same type, resource_id and subject) handled successfully within this window reaches
   * the handler once. Default 10 minutes; 0 turns de-duplication off.
   */
  dedupeWindowMs?: number;
  /**
   * How long a claim on a delivery holds off copies arriving at other instances (default 5 minutes,
   * at least 1 second). It is renewed every half lease while the handler runs, so it only decides how
   * soon another instance takes a delivery over when the one handling it died.
   */
  claimLeaseMs?: number;
  /** Largest accepted body (default 64 KiB); larger answers 413. */
  maxBodyBytes?: number;
  /** Where handled deliveries are remembered (default: in memory, this process only). */
  seenStore?: SeenEventStore;
  /** A pino logger, or `false` for none. */
  logger?: Logger | false;
  /** `{ registry }` (a prom-client Registry): counts deliveries by type and outcome. */
  metrics?: MetricsOptions;
  /** Clock in epoch milliseconds, for tests. */
  now?: () => number;
}

const FACTORY = 'marketplaceEvents';
const OPTION_KEYS = ['handlers', 'verify', 'dedupeWindowMs', 'claimLeaseMs', 'maxBodyBytes', 'seenStore', 'logger', 'metrics', 'instrumentation', 'now'] as const;
const DAY_MS = 24 * 60 * 60 * 1000;
const VERIFY_REQUIRED =
  `${FACTORY}: option "verify" is required, because the marketplace does not sign event deliveries and anyone who can reach ` +
  'the endpoint could forge one. Choose: verify: eventSecretHeader({ header, secret }) (a secret the marketplace sends in a header), ' +
  'verify: eventSecretPath({ secret }) (a secret segment in the receiver address), your own (req, rawBody) => boolean, ' +
  'or verify: false when a gateway or an address allow-list in front of this endpoint already authenticates deliveries';

type Outcome = 'processed' | 'duplicate';

/**
 * Receives the marketplace's webhook events (interface section 6) on a POST endpoint.
 *
 * - `verify` runs first (required; see {@link MarketplaceEventsOptions.verify}): a refused delivery
 *   answers 401 and never reaches the de-duplication store, so forged events cannot flush it.
 * - The type comes from the `X-Marketplace-Event` header, never from the body's `event` field.
 * - Unknown types are acknowledged (200) and ignored, so new event types break nothing.
 * - A delivery with the same type, resource and subject as one handled within `dedupeWindowMs` is
 *   acknowledged without calling the handler again. A copy arriving while the first is handled waits
 *   for it in the same process; at another instance (a shared `seenStore`) it answers 503 with
 *   `Retry-After`, and the marketplace's retry then finds it done.
 * - When the handler throws the answer is 500 and the delivery is not remembered, so the
 *   marketplace's retry reaches the handler again. Handlers should therefore be idempotent.
 * - The body is read here (limit `maxBodyBytes`, 413 beyond); a body parser mounted earlier is tolerated.
 *
 * @example
 * ```ts
 * app.post('/v1/events', marketplaceEvents({
 *   verify: eventSecretHeader({ header: 'x-events-secret', secret: process.env.EVENTS_SECRET! }),
 *   handlers: {
 *     'resource:provisioned': async ({ resource_id, subject }) => db.attach(subject, resource_id),
 *     'resource:deprovisioned': async ({ resource_id }) => db.detach(resource_id),
 *   },
 * }));
 * ```
 */
export function marketplaceEvents(options: MarketplaceEventsOptions): RequestHandler {
  const record = checkOptionKeys(FACTORY, options, OPTION_KEYS);
  const handlers = checkHandlers(record.handlers);
  if (record.verify === undefined) throw new InvalidOptionsError(VERIFY_REQUIRED);
  if (record.verify !== false && typeof record.verify !== 'function') throw new InvalidOptionsError(VERIFY_REQUIRED);
  const verify = record.verify === false ? undefined : (record.verify as EventVerifier);
  const windowMs = integerOption(FACTORY, 'dedupeWindowMs', record.dedupeWindowMs, 10 * 60 * 1000, 0, 7 * DAY_MS);
  const leaseMs = integerOption(FACTORY, 'claimLeaseMs', record.claimLeaseMs, 5 * 60 * 1000, 1000, DAY_MS);
  const maxBodyBytes = integerOption(FACTORY, 'maxBodyBytes', record.maxBodyBytes, 64 * 1024, 1, 16 * 1024 * 1024);
  const now = optionalFunction<() => number>(FACTORY, record, 'now') ?? Date.now;
  const seen = record.seenStore === undefined ? new MemorySeenEventStore({ now }) : checkSeenStore(record.seenStore);
  const log = createLogger(loggerOption(FACTORY, record), { component: 'platform-events' });
  const instrumentation = instrumentationOption(FACTORY, record);
  // Names this receiver's claims: a claim held by another instance answers busy, never "mine".
  const owner = randomUUID();
  const inFlight = new Map<string, Promise<Outcome>>();
  if (verify === undefined) log.warn('marketplace events: verify is false, deliveries are not authenticated here; make sure something in front of this endpoint does');

  return (req, res) => {
    let eventType = 'other';
    const count = (outcome: EventOutcome): void => instrumentation.event({ type: eventType, outcome });
    handle(req, res, (type) => {
      eventType = type;
    }, count).catch(async (error: unknown) => {
      const answer: MarketplaceError = isMarketplaceError(error) ? error : new InternalError({ cause: error });
      count(answer.status < 500 ? 'refused' : 'failed');
      // An InternalError or a store's 503 was logged, with its context, where it was raised.
      if (answer.status < 500) log.warn({ status: answer.status, code: answer.code }, `marketplace event refused: ${answer.message}`);
      else if (!(error instanceof InternalError) && answer.status !== 503) log.error({ err: error }, 'marketplace event: failed; answering 500 so that the marketplace retries');
      if (res.headersSent) return;
      const headers: Record<string, string> = answer.status === 413 ? { Connection: 'close' } : answer.status === 503 ? { 'Retry-After': '1' } : {};
      await sendJson(req, res, answer.status, answer.toJSON(), { headers }).catch(() => undefined);
    });
  };

  async function handle(req: Request, res: Response, typed: (type: string) => void, count: (outcome: EventOutcome) => void): Promise<void> {
    if (req.method !== 'POST') {
      count('refused');
      await sendJson(req, res, 405, { message: 'Marketplace events are delivered with POST' }, { headers: { Allow: 'POST' } });
      return;
    }
    // A body parser mounted earlier may have read the stream: express.raw() leaves the bytes, express.json() only the object.
    const raw = bodyAlreadyConsumed(req) ? (Buffer.isBuffer(req.body) ? req.body : undefined) : await readRawBody(req, maxBodyBytes);
    // Verified before anything else is looked at: an unauthenticated caller learns nothing, stores nothing.
    if (verify !== undefined) {
      if (raw === undefined) {
        log.error('marketplace event: a body parser consumed the body before verify() could see it: mount marketplaceEvents() before express.json()');
        throw new InternalError();
      }
      if (!(await verify(req, raw))) throw new UnauthorizedError('Event delivery could not be verified');
    }
    const typeHeader = req.headers['x-marketplace-event'];
    const type = typeof typeHeader === 'string' ? typeHeader.trim() : '';
    if (type.length === 0) throw new BadRequestError('The X-Marketplace-Event header is required', 'ERR_VALIDATION');
    const requestId = typeof req.headers['x-marketplace-request'] === 'string' ? req.headers['x-marketplace-request'] : undefined;

    const handler = (EVENT_TYPES as readonly string[]).includes(type) ? handlers[type as MarketplaceEventType] : undefined;
    if ((EVENT_TYPES as readonly string[]).includes(type)) typed(type);
    if (handler === undefined) {
      log.info({ type: type.slice(0, 64), requestId }, 'marketplace event: no handler for this type; acknowledged and ignored');
      count('ignored');
      await sendJson(req, res, 200, { message: 'Event type not handled; ignored' });
      return;
    }

    const envelope = parseEnvelope(req, raw);
    const data: ResourceEventData = { resource_id: envelope.resource_id, subject: envelope.subject };
    const context: MarketplaceEventContext = { type: type as MarketplaceEventType, version: envelope.version, requestId, req };
    const key = JSON.stringify([type, data.resource_id, data.subject]);
    const fields = { type, resource_id: data.resource_id, subject: data.subject, requestId };

    let outcome: Outcome = 'processed';
    try {
      if (windowMs === 0) await runHandler(handler, data, context);
      else outcome = await deliverOnce(key, handler, data, context);
    } catch (error) {
      if (!(error instanceof HandlerFailed) && !(error instanceof DeliveryBusy)) {
        // The seen-event store failed (a 503 from an unreachable database answers as itself).
        log.error({ ...fields, err: error }, 'marketplace event: the seen-event store failed; the marketplace retries');
        throw isMarketplaceError(error) ? error : new InternalError({ cause: error });
      }
      if (error instanceof DeliveryBusy) {
        log.info(fields, 'marketplace event: the same delivery is being handled by another instance; answering 503 so that the marketplace retries');
        count('duplicate');
        await sendJson(req, res, 503, { message: 'This delivery is being handled right now; retry later' }, { headers: { 'Retry-After': '1' } });
        return;
      }
      // Whatever the handler threw, even a 4xx MarketplaceError: a 5xx is what makes the marketplace retry.
      log.error({ ...fields, err: error.cause }, 'marketplace event: the handler failed; answering 500 so that the marketplace retries');
      throw new InternalError({ cause: error.cause });
    }
    count(outcome);
    if (outcome === 'duplicate') {
      log.info(fields, 'marketplace event: duplicate delivery acknowledged');
      await sendJson(req, res, 200, { message: 'Duplicate event; already processed' });
      return;
    }
    log.info(fields, 'marketplace event handled');
    await sendJson(req, res, 200, { message: 'Event processed' });
  }

  /**
   * Calls the handler unless the same delivery succeeded within the window. A copy arriving in this
   * process while the first is still running waits for it (registered in `inFlight` before the first
   * await); a copy at another instance meets the store's claim and is answered busy.
   */
  async function deliverOnce(key: string, handler: MarketplaceEventHandler, data: ResourceEventData, context: MarketplaceEventContext): Promise<Outcome> {
    const running = inFlight.get(key);
    if (running !== undefined) {
      // Shares the first copy's outcome: a failure (or busy) fails this copy too, and both are retried.
      await running;
      return 'duplicate';
    }
    const run = (async (): Promise<Outcome> => {
      const claimed = await seen.claim(key, { owner, now: now(), leaseExpiresAt: now() + leaseMs });
      if (claimed.outcome === 'done') return 'duplicate';
      if (claimed.outcome === 'busy') throw new DeliveryBusy();
      // Renewed while the handler runs (a claim by the same owner extends it), so the lease only
      // decides how soon another instance takes over when this one dies.
      const renewal = setInterval(() => {
        seen.claim(key, { owner, now: now(), leaseExpiresAt: now() + leaseMs }).catch((error: unknown) => log.warn({ err: error }, 'marketplace event: could not renew the claim'));
      }, Math.floor(leaseMs / 2));
      renewal.unref();
      try {
        await runHandler(handler, data, context);
      } catch (error) {
        // Only a success is remembered: a failed delivery must reach the handler again on retry.
        await seen.release(key, owner).catch((releaseError: unknown) => log.warn({ err: releaseError }, 'marketplace event: could not release the claim; a retry waits for its lease to lapse'));
        throw error;
      } finally {
        clearInterval(renewal);
      }
      await seen.complete(key, owner, now() + windowMs);
      return 'processed';
    })();
    inFlight.set(key, run);
    try {
      return await run;
    } finally {
      inFlight.delete(key);
    }
  }
}

/** Another instance holds the claim on this delivery. */
class DeliveryBusy extends Error {}

/** The handler threw `cause` (told apart from a failing seen-event store). */
class HandlerFailed extends Error {
  constructor(override readonly cause: unknown) {
    super('the event handler failed');
  }
}

async function runHandler(handler: MarketplaceEventHandler, data: ResourceEventData, context: MarketplaceEventContext): Promise<void> {
  try {
    await handler(data, context);
  } catch (error) {
    throw new HandlerFailed(error);
  }
}

interface Envelope extends ResourceEventData {
  version: number;
}

function parseEnvelope(req: Request, raw: Buffer | undefined): Envelope {
  let body: unknown = req.body;
  if (raw !== undefined) {
    const contentType = req.headers['content-type'];
    if (contentType !== undefined && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) throw new UnsupportedMediaTypeError();
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new BadRequestError('The event body is not valid JSON', 'ERR_VALIDATION');
    }
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequestError('The event body must be a JSON object', 'ERR_VALIDATION');
  const { version = 1, data } = body as { version?: unknown; data?: unknown };
  if (typeof version !== 'number' || !Number.isInteger(version)) throw new BadRequestError('The event version must be an integer', 'ERR_VALIDATION');
  if (typeof data !== 'object' || data === null) throw new BadRequestError('The event has no data object', 'ERR_VALIDATION');
  const { resource_id, subject } = data as { resource_id?: unknown; subject?: unknown };
  if (typeof resource_id !== 'string' || resource_id.length === 0) throw new BadRequestError('The event data needs a resource_id string', 'ERR_VALIDATION');
  if (typeof subject !== 'string' || subject.length === 0) throw new BadRequestError('The event data needs a subject string', 'ERR_VALIDATION');
  return { resource_id, subject, version };
}

function checkHandlers(value: unknown): Partial<Record<MarketplaceEventType, MarketplaceEventHandler>> {
  const record = checkOptionKeys(`${FACTORY}: handlers`, value, EVENT_TYPES);
  const handlers: Partial<Record<MarketplaceEventType, MarketplaceEventHandler>> = {};
  for (const type of EVENT_TYPES) {
    const handler = optionalFunction<MarketplaceEventHandler>(`${FACTORY}: handlers`, record, type);
    if (handler !== undefined) handlers[type] = handler;
  }
  if (Object.keys(handlers).length === 0) {
    throw new InvalidOptionsError(`${FACTORY}: option "handlers" needs at least one of ${EVENT_TYPES.join(', ')}`);
  }
  return handlers;
}

function checkSeenStore(value: unknown): SeenEventStore {
  const store = value as Partial<SeenEventStore> & { has?: unknown } | null;
  const methods = ['claim', 'complete', 'release'] as const;
  if (typeof store !== 'object' || store === null || !methods.every((method) => typeof store[method] === 'function')) {
    const old = store !== null && typeof store === 'object' && typeof store.has === 'function' ? ' (has/add stores cannot be made atomic across instances and are no longer accepted)' : '';
    throw new InvalidOptionsError(`${FACTORY}: option "seenStore" must implement claim, complete and release (see SeenEventStore)${old}`);
  }
  return store as SeenEventStore;
}

/** Options of {@link MemorySeenEventStore}. */
export interface MemorySeenEventStoreOptions {
  /** Most handled deliveries remembered (default 10 000); beyond it expired ones go, then the oldest. */
  maxEntries?: number;
  now?: () => number;
}

interface SeenEntry {
  state: 'claimed' | 'done';
  owner: string;
  /** Lease end of a claim, expiry of a done delivery. */
  until: number;
}

/**
 * The default {@link SeenEventStore}: bounded, in this process's memory. Only authenticated
 * deliveries reach it (see `verify`), so the bound is not something an outsider can exhaust; when
 * it is reached anyway, expired entries go first, then the oldest handled ones (claims in progress
 * are never dropped).
 */
export class MemorySeenEventStore implements SeenEventStore {
  private readonly entries = new Map<string, SeenEntry>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: MemorySeenEventStoreOptions = {}) {
    this.maxEntries = integerOption('MemorySeenEventStore', 'maxEntries', options.maxEntries, 10_000, 1);
    this.now = options.now ?? Date.now;
  }

  /** How many deliveries are remembered or claimed (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  claim(key: string, claim: { owner: string; now: number; leaseExpiresAt: number }): Promise<SeenEventClaim> {
    const entry = this.entries.get(key);
    if (entry !== undefined && entry.until > claim.now) {
      if (entry.state === 'done') return Promise.resolve({ outcome: 'done' });
      if (entry.owner !== claim.owner) return Promise.resolve({ outcome: 'busy', leaseExpiresAt: entry.until });
    }
    this.entries.delete(key);
    this.entries.set(key, { state: 'claimed', owner: claim.owner, until: claim.leaseExpiresAt });
    this.trim();
    return Promise.resolve({ outcome: 'claimed' });
  }

  complete(key: string, owner: string, expiresAt: number): Promise<void> {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.state === 'done' || entry.owner === owner || entry.until <= this.now()) {
      this.entries.delete(key);
      this.entries.set(key, { state: 'done', owner, until: expiresAt });
      this.trim();
    }
    return Promise.resolve();
  }

  release(key: string, owner: string): Promise<void> {
    const entry = this.entries.get(key);
    if (entry?.state === 'claimed' && entry.owner === owner) this.entries.delete(key);
    return Promise.resolve();
  }

  private trim(): void {
    if (this.entries.size <= this.maxEntries) return;
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.until <= now) this.entries.delete(key);
    // Still full: forget the oldest handled deliveries. A late duplicate of one would be handled
    // again, which idempotent handlers tolerate; unbounded memory would not be tolerated.
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries) break;
      if (entry.state === 'done') this.entries.delete(key);
    }
  }
}

/** Options of {@link eventSecretHeader}. */
export interface EventSecretHeaderOptions {
  /** The header the marketplace sends the secret in (case-insensitive). Default `x-marketplace-secret`. */
  header?: string;
  /** The shared secret (at least 16 characters), or a list to rotate without downtime. */
  secret: string | readonly string[];
}

/**
 * A {@link EventVerifier} for a shared secret the marketplace sends in a header, compared in
 * constant time. A list of secrets accepts each, so a new one can be rolled out before the old goes.
 */
export function eventSecretHeader(options: EventSecretHeaderOptions): EventVerifier {
  const factory = 'eventSecretHeader';
  const record = checkOptionKeys(factory, options, ['header', 'secret']);
  const header = record.header ?? 'x-marketplace-secret';
  if (typeof header !== 'string' || !/^[A-Za-z0-9-]+$/.test(header)) throw new InvalidOptionsError(`${factory}: option "header" must be a header name such as "x-marketplace-secret"`);
  const digests = secretDigests(factory, record.secret);
  const name = header.toLowerCase();
  return (req) => {
    const value = req.headers[name];
    return typeof value === 'string' && matchesAnyDigest(value, digests);
  };
}

/** Options of {@link eventSecretPath}. */
export interface EventSecretPathOptions {
  /** The secret (at least 16 URL-safe characters), or a list to rotate without downtime. */
  secret: string | readonly string[];
}

/**
 * A {@link EventVerifier} for a secret segment in the receiver's address, for marketplaces that only
 * let you register a URL: mount the receiver at `/v1/events/:secret` (or any path whose last
 * segment is the secret) and register `https://platform.example/v1/events/<secret>`. Compared in
 * constant time. Keep such URLs out of access logs.
 */
export function eventSecretPath(options: EventSecretPathOptions): EventVerifier {
  const factory = 'eventSecretPath';
  const record = checkOptionKeys(factory, options, ['secret']);
  const digests = secretDigests(factory, record.secret);
  return (req) => {
    const path = (req.originalUrl ?? req.url).split('?')[0] ?? '';
    const last = path.split('/').filter((segment) => segment.length > 0).pop() ?? '';
    let segment: string;
    try {
      segment = decodeURIComponent(last);
    } catch {
      return false;
    }
    return matchesAnyDigest(segment, digests);
  };
}

function secretDigests(factory: string, value: unknown): Buffer[] {
  const secrets = stringList(factory, 'secret', value);
  if (secrets.some((secret) => secret.length < 16)) {
    throw new InvalidOptionsError(`${factory}: option "secret" must be at least 16 characters (for example: openssl rand -hex 32)`);
  }
  return secrets.map((secret) => sha256(secret));
}
