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
import { integerOption, optionalFunction } from '../lib/options.js';
import { checkOptionKeys, loggerOption } from './options.js';

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

/**
 * Remembers which deliveries were already handled, for the duplicate window. The in-memory default
 * only sees its own process: behind several instances, give a shared store (Redis `SET key 1 PX ttl`,
 * a table with an expiry column, ...).
 */
export interface SeenEventStore {
  /** Whether `key` was recorded and has not expired yet. */
  has(key: string): boolean | Promise<boolean>;
  /** Records `key` until `expiresAt` (epoch milliseconds). */
  add(key: string, expiresAt: number): void | Promise<void>;
}

/** Options of {@link marketplaceEvents}. */
export interface MarketplaceEventsOptions {
  /** One handler per event type; at least one. Types without a handler are acknowledged and ignored. */
  handlers: Partial<Record<MarketplaceEventType, MarketplaceEventHandler>>;
  /**
   * A delivery with the same type, resource_id and subject as one handled successfully within this
   * window reaches the handler once. Default 10 minutes; 0 turns de-duplication off.
   */
  dedupeWindowMs?: number;
  /** Largest accepted body (default 64 KiB); larger answers 413. */
  maxBodyBytes?: number;
  /**
   * Checks a delivery before anything else happens (the raw body is given). The interface does not
   * sign event deliveries: without a check, anyone who can reach this endpoint can forge events.
   * Answer `false` to refuse with 401 (for example: a secret in the receiver's URL, an allow-list of
   * source addresses, or a signature your marketplace deployment adds).
   */
  verify?: (req: Request, body: Buffer) => boolean | Promise<boolean>;
  /** Where handled deliveries are remembered (default: in memory, this process only). */
  seenStore?: SeenEventStore;
  /** A pino logger, or `false` for none. */
  logger?: Logger | false;
  /** Clock in epoch milliseconds, for tests. */
  now?: () => number;
}

const FACTORY = 'marketplaceEvents';
const OPTION_KEYS = ['handlers', 'dedupeWindowMs', 'maxBodyBytes', 'verify', 'seenStore', 'logger', 'now'] as const;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Receives the marketplace's webhook events (interface section 6) on a POST endpoint.
 *
 * - The type comes from the `X-Marketplace-Event` header, never from the body's `event` field.
 * - Unknown types are acknowledged (200) and ignored, so new event types break nothing.
 * - A delivery with the same type, resource and subject as one handled within `dedupeWindowMs` is
 *   acknowledged without calling the handler again; one arriving while the first is still being
 *   handled waits for it and shares its outcome.
 * - When the handler throws the answer is 500 and the delivery is not remembered, so the
 *   marketplace's retry reaches the handler again. Handlers should therefore be idempotent.
 * - The body is read here (limit `maxBodyBytes`, 413 beyond); a body parser mounted earlier is tolerated.
 *
 * @example
 * ```ts
 * app.post('/v1/events', marketplaceEvents({
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
  const windowMs = integerOption(FACTORY, 'dedupeWindowMs', record.dedupeWindowMs, 10 * 60 * 1000, 0, 7 * DAY_MS);
  const maxBodyBytes = integerOption(FACTORY, 'maxBodyBytes', record.maxBodyBytes, 64 * 1024, 1, 16 * 1024 * 1024);
  const verify = optionalFunction<NonNullable<MarketplaceEventsOptions['verify']>>(FACTORY, record, 'verify');
  const now = optionalFunction<() => number>(FACTORY, record, 'now') ?? Date.now;
  const seen = record.seenStore === undefined ? new MemorySeenEventStore({ now }) : checkSeenStore(record.seenStore);
  const log = createLogger(loggerOption(FACTORY, record), { component: 'platform-events' });
  const inFlight = new Map<string, Promise<'handled' | 'duplicate'>>();

  return (req, res) => {
    handle(req, res).catch(async (error: unknown) => {
      const answer: MarketplaceError = isMarketplaceError(error) ? error : new InternalError({ cause: error });
      // An InternalError was logged, with its context, where it was raised.
      if (answer.status < 500) log.warn({ status: answer.status, code: answer.code }, `marketplace event refused: ${answer.message}`);
      else if (!(error instanceof InternalError)) log.error({ err: error }, 'marketplace event: failed; answering 500 so that the marketplace retries');
      if (res.headersSent) return;
      const headers: Record<string, string> = answer.status === 413 ? { Connection: 'close' } : {};
      await sendJson(req, res, answer.status, answer.toJSON(), { headers }).catch(() => undefined);
    });
  };

  async function handle(req: Request, res: Response): Promise<void> {
    if (req.method !== 'POST') {
      await sendJson(req, res, 405, { message: 'Marketplace events are delivered with POST' }, { headers: { Allow: 'POST' } });
      return;
    }
    const typeHeader = req.headers['x-marketplace-event'];
    const type = typeof typeHeader === 'string' ? typeHeader.trim() : '';
    if (type.length === 0) throw new BadRequestError('The X-Marketplace-Event header is required', 'ERR_VALIDATION');
    const requestId = typeof req.headers['x-marketplace-request'] === 'string' ? req.headers['x-marketplace-request'] : undefined;

    // A body parser mounted earlier may have read the stream: express.raw() leaves the bytes, express.json() only the object.
    const raw = bodyAlreadyConsumed(req) ? (Buffer.isBuffer(req.body) ? req.body : undefined) : await readRawBody(req, maxBodyBytes);
    if (verify !== undefined) {
      if (raw === undefined) {
        log.error('marketplace event: a body parser consumed the body before verify() could see it: mount marketplaceEvents() before express.json()');
        throw new InternalError();
      }
      if (!(await verify(req, raw))) throw new UnauthorizedError('Event delivery could not be verified');
    }

    const handler = (EVENT_TYPES as readonly string[]).includes(type) ? handlers[type as MarketplaceEventType] : undefined;
    if (handler === undefined) {
      log.info({ type: type.slice(0, 64), requestId }, 'marketplace event: no handler for this type; acknowledged and ignored');
      await sendJson(req, res, 200, { message: 'Event type not handled; ignored' });
      return;
    }

    const envelope = parseEnvelope(req, raw);
    const data: ResourceEventData = { resource_id: envelope.resource_id, subject: envelope.subject };
    const context: MarketplaceEventContext = { type: type as MarketplaceEventType, version: envelope.version, requestId, req };
    const key = JSON.stringify([type, data.resource_id, data.subject]);

    let outcome: 'handled' | 'duplicate' = 'handled';
    try {
      if (windowMs === 0) await handler(data, context);
      else outcome = await deliverOnce(key, handler, data, context);
    } catch (error) {
      // Whatever the handler threw, even a 4xx MarketplaceError: a 5xx is what makes the marketplace retry.
      log.error({ type, resource_id: data.resource_id, subject: data.subject, requestId, err: error }, 'marketplace event: the handler failed; answering 500 so that the marketplace retries');
      throw new InternalError({ cause: error });
    }
    if (outcome === 'duplicate') {
      log.info({ type, resource_id: data.resource_id, subject: data.subject, requestId }, 'marketplace event: duplicate delivery acknowledged');
      await sendJson(req, res, 200, { message: 'Duplicate event; already processed' });
      return;
    }
    log.info({ type, resource_id: data.resource_id, subject: data.subject, requestId }, 'marketplace event handled');
    await sendJson(req, res, 200, { message: 'Event processed' });
  }

  /**
   * Calls the handler unless the same delivery succeeded within the window. A copy arriving while the
   * first is still running waits for it: registration in `inFlight` happens before the first await,
   * so two copies can never both reach the handler.
   */
  async function deliverOnce(
    key: string,
    handler: MarketplaceEventHandler,
    data: ResourceEventData,
    context: MarketplaceEventContext,
  ): Promise<'handled' | 'duplicate'> {
    const running = inFlight.get(key);
    if (running !== undefined) {
      await running;
      return 'duplicate';
    }
    const run = (async (): Promise<'handled' | 'duplicate'> => {
      if (await seen.has(key)) return 'duplicate';
      await handler(data, context);
      // Only a success is remembered: a failed delivery must reach the handler again on retry.
      await seen.add(key, now() + windowMs);
      return 'handled';
    })();
    inFlight.set(key, run);
    try {
      return await run;
    } finally {
      inFlight.delete(key);
    }
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
  const store = value as Partial<SeenEventStore> | null;
  if (typeof store !== 'object' || store === null || typeof store.has !== 'function' || typeof store.add !== 'function') {
    throw new InvalidOptionsError(`${FACTORY}: option "seenStore" must have has(key) and add(key, expiresAt) methods`);
  }
  return store as SeenEventStore;
}

/** Options of {@link MemorySeenEventStore}. */
export interface MemorySeenEventStoreOptions {
  /** Most keys kept (default 10 000); the oldest go first beyond it. */
  maxEntries?: number;
  now?: () => number;
}

/** The default {@link SeenEventStore}: bounded, in this process's memory, expired keys swept on write. */
export class MemorySeenEventStore implements SeenEventStore {
  private readonly entries = new Map<string, number>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: MemorySeenEventStoreOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  has(key: string): boolean {
    const expiresAt = this.entries.get(key);
    if (expiresAt === undefined) return false;
    if (expiresAt > this.now()) return true;
    this.entries.delete(key);
    return false;
  }

  add(key: string, expiresAt: number): void {
    this.entries.delete(key);
    this.entries.set(key, expiresAt);
    if (this.entries.size <= this.maxEntries) return;
    const now = this.now();
    for (const [entry, expiry] of this.entries) if (expiry <= now) this.entries.delete(entry);
    // Still full of live keys: forget the oldest. A late duplicate of it would be delivered again,
    // which idempotent handlers tolerate; unbounded memory would not be tolerated.
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
  }
}
