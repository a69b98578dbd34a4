/**
 * Readiness of a provider instance: can it reach its store, and is the callback outbox draining?
 * Free of any framework (the Express handler lives in health.ts), and of the router: it reads the
 * store's diagnostics methods, so the provider's `health()` is one line over {@link createHealthCheck}.
 */
import { InvalidOptionsError } from '../errors.js';
import { asOptionsObject, optionalFunction, optionalPositiveNumber, rejectUnknownKeys } from '../lib/options.js';
import type { HealthProbeStore } from '../store/types.js';
import { Timeout, within } from './timeout.js';

/** `ok`: take traffic. `degraded`: take traffic, but someone should look. `down`: take none. */
export type HealthStatus = 'ok' | 'degraded' | 'down';

/** The callback outbox as a health check sees it. */
export interface OutboxHealth {
  /** Deliveries waiting to be sent (due now or retrying later). */
  pending: number;
  /** Age of the oldest pending delivery in whole seconds; 0 when none is pending. */
  oldestPendingSeconds: number;
  /** Deliveries given up on (refused by the connector or past their deadline), kept for inspection. */
  failing: number;
}

/** What `router.health()` answers and `healthHandler` sends as JSON. */
export interface HealthReport {
  status: HealthStatus;
  /** Whether the store answered a trivial query within the timeout. */
  store: 'ok' | 'down';
  /** `null` when the store does not offer outbox statistics or could not be read. */
  outbox: OutboxHealth | null;
  /** Why the status is not `ok`, for the operator (never a secret, never a driver message). */
  reason?: string;
}

/** Anything that can report its health: a router with `health()`, or an object built for it. */
export interface HealthSource {
  health(): Promise<HealthReport>;
}

/** A store as the health check reads it: `ping()` when it has one, else a lookup of an id that cannot exist; `outboxStats()` when it has one. */
export type HealthStore = HealthProbeStore;

export interface HealthCheckOptions {
  /** The store the router uses. */
  store: HealthStore;
  /** Clock, for the outbox's age. Default `Date.now`. */
  now?: () => number;
  /** How long the store may take to answer before the instance is `down`. Default 2000 ms. */
  timeoutMs?: number;
  /** The outbox is `degraded` once its oldest pending delivery is older than this. Default 1 hour. */
  outboxMaxAgeMs?: number;
}

const FACTORY = 'createHealthCheck';
const DEFAULT_TIMEOUT_MS = 2000;
const DEFAULT_OUTBOX_MAX_AGE_MS = 60 * 60_000;
/** Never a valid marketplace id, so the fallback probe reads an index and finds nothing. */
const PROBE_ID = '__health_probe__';

/**
 * Builds the health check of a provider instance: the store answers a trivial query (`ping()`,
 * `SELECT 1`) within `timeoutMs`, else `down`; the outbox is `degraded` when its oldest pending
 * delivery is older than `outboxMaxAgeMs`. The check never throws: a failure is a status.
 *
 * @example
 * ```ts
 * import { createHealthCheck, healthHandler } from 'embedded-marketplace';
 * const health = createHealthCheck({ store, outboxMaxAgeMs: 30 * 60_000 });
 * app.get('/healthz', healthHandler({ health }));
 * ```
 */
export function createHealthCheck(options: HealthCheckOptions): () => Promise<HealthReport> {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, ['store', 'now', 'timeoutMs', 'outboxMaxAgeMs']);
  const store = raw.store as HealthStore | undefined;
  if (typeof store !== 'object' || store === null) throw new InvalidOptionsError(`${FACTORY}: option "store" is required`);
  const probe = typeof store.ping === 'function' ? () => store.ping!() : typeof store.getResource === 'function' ? () => store.getResource!(PROBE_ID) : undefined;
  if (probe === undefined) throw new InvalidOptionsError(`${FACTORY}: option "store" has neither ping() nor getResource(); give the store the router uses`);
  const now = optionalFunction<() => number>(FACTORY, raw, 'now') ?? Date.now;
  const timeoutMs = optionalPositiveNumber(FACTORY, raw, 'timeoutMs') ?? DEFAULT_TIMEOUT_MS;
  const outboxMaxAgeMs = optionalPositiveNumber(FACTORY, raw, 'outboxMaxAgeMs') ?? DEFAULT_OUTBOX_MAX_AGE_MS;

  return async () => {
    try {
      await within(Promise.resolve(probe()), timeoutMs);
    } catch (err) {
      const reason = err instanceof Timeout ? `The store did not answer within ${timeoutMs} ms` : 'The store could not be reached';
      return { status: 'down', store: 'down', outbox: null, reason };
    }
    if (typeof store.outboxStats !== 'function') return { status: 'ok', store: 'ok', outbox: null };
    let outbox: OutboxHealth;
    try {
      const stats = await within(store.outboxStats(), timeoutMs);
      const created = stats.oldestPendingCreatedAt;
      const oldestPendingSeconds = created === undefined ? 0 : Math.max(0, Math.floor((now() - created) / 1000));
      outbox = { pending: stats.pending, oldestPendingSeconds, failing: stats.failed };
    } catch {
      return { status: 'degraded', store: 'ok', outbox: null, reason: 'The store answered, but its outbox statistics could not be read' };
    }
    if (outbox.oldestPendingSeconds * 1000 > outboxMaxAgeMs) {
      const reason = `The oldest pending callback delivery is ${outbox.oldestPendingSeconds} s old (more than ${Math.floor(outboxMaxAgeMs / 1000)} s)`;
      return { status: 'degraded', store: 'ok', outbox, reason };
    }
    return { status: 'ok', store: 'ok', outbox };
  };
}

/**
 * The check behind a source: its `health()` (looked up at each call, as a router's may be attached
 * after the handler is built), or the source itself when it is a plain function. An Express router
 * is a function too, but never a check: without `health()` it is no source.
 */
export function healthOf(source: unknown): (() => Promise<HealthReport>) | undefined {
  if ((typeof source !== 'object' && typeof source !== 'function') || source === null) return undefined;
  const holder = source as Partial<HealthSource>;
  if (typeof holder.health === 'function') return () => holder.health!();
  if (typeof source === 'function' && typeof (source as { use?: unknown }).use !== 'function') return source as () => Promise<HealthReport>;
  return undefined;
}

/** What an instance without a store check reports: it answers, nothing more is known. */
export const ALIVE: HealthReport = Object.freeze({ status: 'ok', store: 'ok', outbox: null });
