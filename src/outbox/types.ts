import type { Instrumentation } from '../observability/hooks.js';
import type { Logger } from '../lib/logger.js';
import type { CallbackPayload, DeliveryStore } from '../store/types.js';

/**
 * What one attempt to deliver a callback came to. The connector client's `sendCallback` answers
 * exactly this shape, so it plugs in as {@link OutboxOptions.send} unchanged.
 *
 * - `delivered`: the connector accepted it (204, also for an identical repeat). The delivery ends.
 * - `rejected`: final, never retried: 409 (the marketplace already holds a different outcome for
 *   this callback id) and the other final 4xx answers; `status` is absent when the callback was
 *   refused before it was sent (for example by the callback URL policy).
 * - `retry`: try again later: network error, timeout, 429, 5xx… `retryAfterMs` carries a
 *   Retry-After header when the connector sent one.
 *
 * `reason` texts end up in log lines and in the stored delivery: they must never hold a secret.
 */
export type SendResult =
  | { outcome: 'delivered'; status?: number }
  | { outcome: 'rejected'; status?: number; reason?: string }
  | { outcome: 'retry'; status?: number; retryAfterMs?: number; reason: string };

/** What the outbox tells `send` besides the callback itself. Extra: a two-argument function fits too. */
export interface SendContext {
  /** The marketplace's X-Callback-ID, for the sender's own log lines. */
  callbackId: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborted when the attempt outlives `sendTimeoutMs`: the outbox has then already counted it as a retry. */
  signal: AbortSignal;
}

/**
 * Makes one attempt to PUT `payload` to `url`. It should not throw; if it does, the outbox counts
 * the attempt as `retry` with the error's message as the reason.
 *
 * @example
 * ```ts
 * const connector = createConnectorClient({ connectorUrl, clientId, clientSecret });
 * const send: SendCallback = (url, payload) => connector.sendCallback(url, payload);
 * ```
 */
export type SendCallback = (url: string, payload: CallbackPayload, context: SendContext) => Promise<SendResult>;

/** The retry schedule: exponential backoff with jitter, see docs/outbox.md. */
export interface BackoffOptions {
  /** Upper bound of the wait after the first failed attempt, in ms. Default 1000. */
  baseMs?: number;
  /** Upper bound of any wait, and cap of a Retry-After, in ms. Default 15 minutes. */
  maxMs?: number;
  /** Growth of the upper bound per failed attempt. Default 2. */
  factor?: number;
  /**
   * `'full'` (default): wait a random time between 0 and the bound, so that deliveries failing
   * together do not retry together. `'none'`: wait exactly the bound.
   */
  jitter?: 'full' | 'none';
}

/** Options of {@link createOutbox}. */
export interface OutboxOptions {
  /** Where deliveries are kept: the same store the router commits operations to (only its {@link DeliveryStore} part is used). */
  store: DeliveryStore;
  /** Makes one delivery attempt; usually `connector.sendCallback`. */
  send: SendCallback;
  /** Names this process in claims and logs. Default: `<hostname>:<pid>:<random>`. Unique per process. */
  owner?: string;
  /** How often to look for due deliveries when nothing wakes the outbox sooner, in ms. Default 1000. */
  pollIntervalMs?: number;
  /** How long a claim keeps other processes off a delivery, in ms. Default 60 000. */
  leaseMs?: number;
  /** An attempt that has not answered after this long counts as `retry`, in ms. Default min(30 000, leaseMs / 2); must be below `leaseMs`. */
  sendTimeoutMs?: number;
  /** Deliveries claimed at once. Default 10. */
  batchSize?: number;
  /** Attempts in flight at once within a batch. Default 4. */
  concurrency?: number;
  /** The retry schedule. */
  backoff?: BackoffOptions;
  /** Clock in ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /** Source of jitter, in [0, 1). Default `Math.random`. */
  random?: () => number;
  /** A pino logger, or `false` for none. Default: JSON lines on stdout with secrets redacted. */
  logger?: Logger | false;
  /** @internal Metrics and tracing hooks; the router passes its own. */
  instrumentation?: Instrumentation;
}

/** Counters since this outbox was created (this process only). */
export interface OutboxStats {
  /** Accepted by the connector. */
  delivered: number;
  /** Refused for good by the connector (409 and other final 4xx). */
  rejected: number;
  /** Attempts that failed and were scheduled again. */
  retried: number;
  /** Given up because the 24 h callback deadline passed or could not be met. */
  expired: number;
  /** Store calls that failed (the delivery is retried once its claim lapses). */
  storeErrors: number;
  /** Attempts running now. */
  inFlight: number;
  /** Whether `start()` is in effect. */
  running: boolean;
}

/** The durable callback outbox: see {@link createOutbox}. */
export interface Outbox {
  /** The owner name this outbox claims deliveries under. */
  readonly owner: string;
  /** Starts polling the store. Its timers are unref'd: they never keep the process alive. */
  start(): void;
  /**
   * Stops polling and waits for the attempts in flight to finish (each is bounded by
   * `sendTimeoutMs`). Claimed deliveries not yet attempted are left to lapse with their lease.
   */
  stop(): Promise<void>;
  /** Polls now instead of at the next interval; a no-op unless started. Call it after enqueueing. */
  kick(): void;
  /** Claims one batch of due deliveries and attempts each; resolves with how many were handled. */
  runOnce(): Promise<number>;
  /** Runs batches until none is due and none is in flight. Deliveries due later do not hold it. */
  idle(): Promise<void>;
  /** Counters for this process. */
  stats(): OutboxStats;
}
