/**
 * The retry schedule as pure functions of their inputs, so that every rule about time is testable
 * without a clock and the outbox itself only carries the results to the store.
 */

/** {@link BackoffOptions} with every default filled in. */
export interface Backoff {
  baseMs: number;
  maxMs: number;
  factor: number;
  jitter: 'full' | 'none';
}

export const DEFAULT_BACKOFF: Readonly<Backoff> = { baseMs: 1000, maxMs: 15 * 60_000, factor: 2, jitter: 'full' };

/**
 * The upper bound of the wait after the `failures`-th failed attempt (1 for the first):
 * `min(maxMs, baseMs × factor^(failures − 1))`.
 */
export function backoffBound(failures: number, backoff: Backoff): number {
  // factor^n overflows to Infinity long before it matters; min() then yields maxMs, as wanted.
  return Math.min(backoff.maxMs, backoff.baseMs * backoff.factor ** Math.max(0, failures - 1));
}

/** The wait after the `failures`-th failed attempt: the bound, or with full jitter a random share of it. */
export function backoffDelay(failures: number, backoff: Backoff, random: () => number): number {
  const bound = backoffBound(failures, backoff);
  if (backoff.jitter === 'none') return bound;
  // A random() outside [0, 1) from an injected source must not push the wait past its bound.
  const share = Math.min(Math.max(random(), 0), 1);
  return Math.floor(share * bound);
}

export interface RetryInput {
  now: number;
  /** Failed attempts so far, this one included. */
  failures: number;
  deadlineAt: number;
  /** From a Retry-After header, when the connector sent one. */
  retryAfterMs?: number | undefined;
  /**
   * How long before the deadline the last attempt is scheduled, so that even a process that only
   * polls (the one that scheduled it may have died) picks it up in time.
   */
  lastAttemptLeadMs: number;
  backoff: Backoff;
  random: () => number;
}

/**
 * `retry`: attempt again at `nextAttemptAt`; `lastAttempt` is true when the regular schedule would
 * have overshot the deadline and this is the final try, moved ahead of it.
 * `give-up`: no attempt can be made before the deadline any more.
 */
export type RetryPlan = { action: 'retry'; nextAttemptAt: number; lastAttempt: boolean } | { action: 'give-up' };

/**
 * When to attempt a failed delivery again: `now + max(Retry-After capped at maxMs, backoff)`, at
 * least 1 ms later (a retry is never due at the instant it failed, which keeps a frozen test clock
 * from spinning). Attempts keep going until the deadline: a next attempt that would fall in the
 * last `lastAttemptLeadMs` before it, or after it, is moved to the start of that window, once;
 * a failure inside the window gives up.
 */
export function planRetry(input: RetryInput): RetryPlan {
  const { now, backoff } = input;
  const retryAfter = input.retryAfterMs !== undefined && Number.isFinite(input.retryAfterMs) && input.retryAfterMs > 0
    ? Math.min(input.retryAfterMs, backoff.maxMs)
    : 0;
  const delay = Math.max(1, retryAfter, backoffDelay(input.failures, backoff, input.random));
  const lastAttemptAt = input.deadlineAt - input.lastAttemptLeadMs;
  if (now + delay <= lastAttemptAt) return { action: 'retry', nextAttemptAt: now + delay, lastAttempt: false };
  if (now < lastAttemptAt) return { action: 'retry', nextAttemptAt: lastAttemptAt, lastAttempt: true };
  return { action: 'give-up' };
}
