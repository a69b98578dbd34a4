import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { createLogger } from '../lib/logger.js';
import type { CallbackPayload, DeliveryRecord } from '../store/types.js';
import { resolveOutboxOptions } from './options.js';
import { planRetry } from './schedule.js';
import type { Outbox, OutboxOptions, OutboxStats, SendResult } from './types.js';

/** Longest reason kept in the store and in log lines. */
const MAX_REASON = 300;

/**
 * Creates the durable callback outbox: it delivers the callbacks that the router enqueues in the
 * store (in the same transaction as the state change they report) and retries them until the
 * connector gives an expected answer or the 24-hour callback deadline (section 8) passes.
 *
 * Every process may run one: a claim with a lease keeps a delivery to one process at a time, and
 * deliveries left by a stopped or crashed process are taken up by any outbox over the same store
 * once their lease lapses (memory store within one process; SQLite and PostgreSQL across restarts).
 *
 * @example
 * ```ts
 * import { createConnectorClient, createOutbox } from 'embedded-marketplace';
 * import { sqliteStore } from 'embedded-marketplace/stores/sqlite';
 *
 * const store = sqliteStore({ path: 'provider.db' });
 * const connector = createConnectorClient({ connectorUrl, clientId, clientSecret });
 * const outbox = createOutbox({ store, send: (url, payload) => connector.sendCallback(url, payload) });
 * outbox.start();
 * process.on('SIGTERM', () => void outbox.stop().then(() => store.close()));
 * ```
 */
export function createOutbox(options: OutboxOptions): Outbox {
  const config = resolveOutboxOptions(options);
  const { store, send, now, backoff, random, sendTimeoutMs, batchSize, concurrency, leaseMs, pollIntervalMs, instrumentation } = config;
  const owner = config.owner ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const logger = createLogger(config.logger, { component: 'outbox', owner });
  // The last attempt before the deadline is placed two polls ahead of it so that any process still
  // polling claims it in time, even when the one that scheduled it (and its timer) is gone.
  const lastAttemptLeadMs = 2 * pollIntervalMs;

const WAKE_SLACK_MS = 5;

  const counters = { delivered: 0, rejected: 0, retried: 0, expired: 0, storeErrors: 0 };
  let inFlight = 0;
  let running = false;
  /** Batches run one after another, whoever asks (the poll loop, kick, runOnce, idle). */
  let chain: Promise<unknown> = Promise.resolve();
  /** Batches in progress; stop() halts them so that they attempt nothing more. */
  const batches = new Set<{ halted: boolean }>();

  let timer: NodeJS.Timeout | undefined;
  let timerAt = Infinity;
  let ticking = false;
  let wakeAfterTick = Infinity;

  /** Makes the loop run a batch within `delayMs` (never later than an earlier wake-up already set). */
  function wake(delayMs: number): void {
    if (!running) return;
    // Never later than the next poll: a wake-up beyond it would find the loop already awake.
    const delay = Math.min(Math.max(0, delayMs), pollIntervalMs);
    const at = performance.now() + delay;
    if (ticking) {
      wakeAfterTick = Math.min(wakeAfterTick, at);
      return;
    }
    if (timer !== undefined && at >= timerAt) return;
    if (timer !== undefined) clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(() => void tick(), delay);
    timer.unref();
  }

  async function tick(): Promise<void> {
    timer = undefined;
    timerAt = Infinity;
    ticking = true;
    wakeAfterTick = Infinity;
    let claimed = 0;
    try {
      claimed = (await enqueue()).claimed;
    } catch (error) {
      counters.storeErrors++;
      logger.error({ err: safeError(error) }, 'outbox could not claim deliveries from the store; trying again at the next poll');
    } finally {
      ticking = false;
    }
    // A full batch means more may be waiting: go on at once rather than a poll later. Otherwise the
    // next poll, or a retry this batch scheduled sooner (wake() caps the delay at one poll).
    wake(claimed >= batchSize ? 0 : wakeAfterTick - performance.now());
  }

  function enqueue(): Promise<{ claimed: number; handled: number }> {
    const run = chain.then(runBatch);
    chain = run.catch(() => undefined);
    return run;
  }

  async function runBatch(): Promise<{ claimed: number; handled: number }> {
    const batch = { halted: false };
    batches.add(batch);
    try {
      const claimed = await store.claimDeliveries({ owner, now: now(), leaseMs, limit: batchSize });
      let handled = 0;
      let next = 0;
      const worker = async (): Promise<void> => {
        while (!batch.halted && next < claimed.length) {
          const delivery = claimed[next++]!;
          if (await attempt(delivery)) handled++;
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, claimed.length) }, worker));
      return { claimed: claimed.length, handled };
    } finally {
      batches.delete(batch);
    }
  }

  /** One attempt at one claimed delivery, its outcome recorded. Never rejects. False when skipped. */
  async function attempt(delivery: DeliveryRecord): Promise<boolean> {
    const number = delivery.attempts + 1;
    const fields = { deliveryId: delivery.id, callbackId: delivery.callbackId, attempt: number };
    const startedAt = now();
    if (startedAt >= delivery.deadlineAt) {
      counters.expired++;
      instrumentation.delivery('expired');
      logger.error(
        { ...fields, outcome: 'expired', deadlineAt: iso(delivery.deadlineAt), lastError: delivery.lastError },
        'callback deadline passed before delivery; giving up (the marketplace repeats the original request)',
      );
      await record('failDelivery', fields, () => store.failDelivery(delivery.id, owner, 'deadline passed'));
      return true;
    }
    // An attempt must end before the claim lapses, or another process could send the same callback
    // meanwhile; one claimed long ago in a slow batch is left for its next claim instead.
    if (delivery.claimExpiresAt !== undefined && delivery.claimExpiresAt - startedAt <= sendTimeoutMs) {
      logger.warn({ ...fields, outcome: 'skipped' }, 'claim too close to lapsing for a safe attempt; the delivery is attempted after it lapses');
      return false;
    }

    inFlight++;
    try {
      const result = await instrumentation.span('marketplace.callback.send', { callbackId: delivery.callbackId }, () => sendOnce(delivery, number));
      const at = now();
      const status = result.status;
      switch (result.outcome) {
        case 'delivered':
          counters.delivered++;
          instrumentation.delivery('delivered');
          logger.info({ ...fields, status, outcome: 'delivered' }, 'callback delivered');
          await record('completeDelivery', fields, () => store.completeDelivery(delivery.id, owner));
          break;
        case 'rejected': {
          counters.rejected++;
          instrumentation.delivery('rejected');
          const reason = scrub(
            `rejected${status === undefined ? ' before sending' : ` with status ${status}`}${result.reason === undefined ? '' : `: ${result.reason}`}`,
            delivery.payload,
          );
          logger.error(
            { ...fields, status, outcome: 'rejected', reason },
            status === 409
              ? 'callback rejected with 409: the marketplace already holds a different outcome for this callback id; not retried'
              : 'callback rejected; not retried (kept as a failed delivery)',
          );
          await record('failDelivery', fields, () => store.failDelivery(delivery.id, owner, reason));
          break;
        }
        case 'retry': {
          const reason = scrub(result.reason, delivery.payload);
          const plan = planRetry({
            now: at, failures: number, deadlineAt: delivery.deadlineAt, retryAfterMs: result.retryAfterMs,
            lastAttemptLeadMs, backoff, random,
          });
          if (plan.action === 'give-up') {
            counters.expired++;
            instrumentation.delivery('expired');
            logger.error(
              { ...fields, status, outcome: 'expired', reason, deadlineAt: iso(delivery.deadlineAt) },
              'callback cannot be delivered before its deadline; giving up (the marketplace repeats the original request)',
            );
            await record('failDelivery', fields, () => store.failDelivery(delivery.id, owner, scrub(`cannot make the deadline; last error: ${reason}`, delivery.payload)));
            break;
          }
          counters.retried++;
          instrumentation.delivery('retry');
          const line = { ...fields, status, outcome: 'retry', reason, retryAfterMs: result.retryAfterMs, nextAttemptAt: iso(plan.nextAttemptAt) };
          if (plan.lastAttempt) {
            logger.error(
              { ...line, deadlineAt: iso(delivery.deadlineAt) },
              'callback cannot make its deadline on the regular retry schedule; one last attempt before it, then the marketplace repeats the original request',
            );
          } else {
            logger.warn(line, 'callback not delivered; retry scheduled');
          }
          const retried = await record('retryDelivery', fields, () =>
            store.retryDelivery(delivery.id, owner, { attempts: number, nextAttemptAt: plan.nextAttemptAt, lastError: reason }));
          // Timers run on libuv's cached loop time and may fire a millisecond before Date.now()
          // reaches nextAttemptAt; waking early would find nothing due and sleep a whole poll.
          if (retried) wake(plan.nextAttemptAt - at + WAKE_SLACK_MS);
          break;
        }
      }
      return true;
    } finally {
      inFlight--;
    }
  }

  /** Calls `send` once, bounded by sendTimeoutMs, and turns whatever happens into a SendResult. */
  async function sendOnce(delivery: DeliveryRecord, number: number): Promise<SendResult> {
    const controller = new AbortController();
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<SendResult>((resolve) => {
      timeout = setTimeout(() => {
        controller.abort();
        resolve({ outcome: 'retry', reason: `no answer within ${sendTimeoutMs} ms` });
      }, sendTimeoutMs);
      // Not unref'd, unlike the poll timer: an attempt in flight is work under way, and this bounds it.
    });
    const sent = Promise.resolve()
      .then(() => send(delivery.url, delivery.payload, { callbackId: delivery.callbackId, attempt: number, signal: controller.signal }))
      .then(checkResult, (error: unknown): SendResult => ({ outcome: 'retry', reason: `send failed: ${errorText(error)}` }));
    try {
      return await Promise.race([sent, timedOut]);
    } finally {
      clearTimeout(timeout);
    }
  }

  /** Runs a store write; a failure is logged, never thrown: the claim lapses and the delivery comes back. */
  async function record(method: string, fields: Record<string, unknown>, write: () => Promise<void>): Promise<boolean> {
    try {
      await write();
      return true;
    } catch (error) {
      counters.storeErrors++;
      logger.error(
        { ...fields, err: safeError(error) },
        `outbox could not record the outcome (${method}); the delivery is attempted again once its claim lapses`,
      );
      return false;
    }
  }

  return {
    owner,

    start() {
      if (running) return;
      running = true;
      wake(0);
    },

    async stop() {
      running = false;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      timerAt = Infinity;
      for (const batch of batches) batch.halted = true;
      await chain;
    },

    kick() {
      wake(0);
    },

    async runOnce() {
      return (await enqueue()).handled;
    },

    async idle() {
      while ((await enqueue()).handled > 0) {
        // Each batch may make more deliveries due (a retry 1 ms later under a moving clock): go on.
      }
    },

    stats(): OutboxStats {
      return { ...counters, inFlight, running };
    },
  };
}

/** Anything but a well-formed SendResult counts as `retry`, so that a buggy sender never loses a callback. */
function checkResult(value: unknown): SendResult {
  const result = value as Partial<Record<string, unknown>> | null | undefined;
  const status = typeof result?.status === 'number' && Number.isInteger(result.status) ? result.status : undefined;
  switch (result?.outcome) {
    case 'delivered':
      return { outcome: 'delivered', status };
    case 'rejected':
      return { outcome: 'rejected', status, reason: typeof result.reason === 'string' ? result.reason : undefined };
    case 'retry': {
      const retryAfterMs = typeof result.retryAfterMs === 'number' && Number.isFinite(result.retryAfterMs) && result.retryAfterMs >= 0
        ? result.retryAfterMs
        : undefined;
      const reason = typeof result.reason === 'string' && result.reason.length > 0 ? result.reason : status === undefined ? 'retry' : `status ${status}`;
      return { outcome: 'retry', status, retryAfterMs, reason };
    }
    default:
      return { outcome: 'retry', reason: 'send resolved with something other than a SendResult' };
  }
}

/**
 * Removes every credential value of the payload from a text bound for a log line or the store: a
 * sender's error message may quote the request body, and credentials must never be written there.
 */
function scrub(text: string, payload: CallbackPayload): string {
  let out = text;
  const values = Object.values(payload.credentials ?? {}).filter((v) => typeof v === 'string' && v.length > 0);
  // Longest first, so that a value containing another is removed whole.
  for (const value of values.sort((a, b) => b.length - a.length)) out = out.split(value).join('[redacted]');
  return out.length > MAX_REASON ? `${out.slice(0, MAX_REASON - 1)}…` : out;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return error.message.length > 0 ? error.message : error.name;
  return 'non-Error value thrown';
}

/** The parts of an error a log line may carry: its name, code and message, never its properties. */
function safeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: 'non-Error value thrown' };
  const code = (error as { code?: unknown }).code;
  return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) };
}

function iso(ms: number): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString();
}
