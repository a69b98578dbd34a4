import { sleepOnTimer } from '../../lib/clock.js';
import { UsageError, type Clock } from './io.js';

/** Options of {@link waitForProvider}. */
export interface WaitOptions {
  /** How long to keep trying, in milliseconds. */
  timeoutMs: number;
  /** Called once, after the first attempt that got no answer, with why (e.g. "connection refused"). */
  onWaiting?: (reason: string) => void;
  /** Stops the wait early (Ctrl-C on `serve`); the promise then resolves with `'aborted'`. */
  signal?: AbortSignal;
  /** The time the wait counts on; the system's ({@link systemClock}) when absent. A seam for tests. */
  clock?: Clock;
}

/** The outcome of {@link waitForProvider}. */
export type WaitOutcome =
  | { outcome: 'answered'; status: number; waitedMs: number }
  | { outcome: 'timeout'; reason: string }
  | { outcome: 'aborted' };

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 1000;
const ATTEMPT_TIMEOUT_MS = 5000;
const NO_ANSWER_IN_TIME = 'no answer in time';

/**
 * The system's clock: `Date.now`, a ref'd timer (the command has nothing else keeping the process
 * alive while it waits) and `AbortSignal.timeout`.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) => sleepOnTimer(ms, signal, false),
  timeout: (ms) => AbortSignal.timeout(ms),
};

/** Why a fetch got no answer, in words (connection refused, timed out, ...). */
function noAnswer(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = typeof cause?.code === 'string' ? cause.code : undefined;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET') return 'connection reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `host not found (${code})`;
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return NO_ANSWER_IN_TIME;
  if (code !== undefined) return code;
  return err instanceof Error ? err.message : 'no answer';
}

/**
 * Polls `url` until it answers anything at all over HTTP (any status counts: a 404 means a server
 * listens), retrying after a short growing delay (100 ms up to 1 s) while it gets no answer, until
 * `timeoutMs` has passed. Never throws.
 *
 * Each attempt may take 5 s, or what is left before the deadline when that is less (at least 1 ms:
 * the last attempt, made at the deadline, often gets just that). An attempt that ran out of time
 * the deadline cut short says nothing about the provider (on a busy machine its timer can fire
 * before a refusal arrives), so the timeout then reports the last reason an earlier attempt saw,
 * e.g. "connection refused"; "no answer in time" only when no earlier attempt saw anything else,
 * or when an attempt got its whole 5 s.
 *
 * @example
 * ```ts
 * const waited = await waitForProvider('http://127.0.0.1:4567', { timeoutMs: 30_000 });
 * if (waited.outcome !== 'answered') process.exit(2);
 * ```
 */
export async function waitForProvider(url: string, options: WaitOptions): Promise<WaitOutcome> {
  const clock = options.clock ?? systemClock;
  const now = (): number => clock.now();
  const started = now();
  const deadline = started + options.timeoutMs;
  let delay = FIRST_DELAY_MS;
  let told = false;
  // What a timeout reports: the reason of the last attempt the deadline did not cut short (see above).
  let lastReason: string | undefined;
  // A function, not a property read: the signal changes while we await.
  const aborted = (): boolean => options.signal?.aborted === true;
  for (;;) {
    if (aborted()) return { outcome: 'aborted' };
    let reason: string;
    const left = deadline - now();
    const clipped = left < ATTEMPT_TIMEOUT_MS;
    const attempt = clock.timeout(Math.max(1, Math.min(ATTEMPT_TIMEOUT_MS, left)));
    try {
      const signal = options.signal === undefined ? attempt : AbortSignal.any([attempt, options.signal]);
      const response = await fetch(url, { method: 'GET', redirect: 'manual', signal });
      // Only the status matters; let the body go.
      await response.body?.cancel();
      return { outcome: 'answered', status: response.status, waitedMs: now() - started };
    } catch (err) {
      if (aborted()) return { outcome: 'aborted' };
      const why = noAnswer(err);
      const cutShort = clipped && attempt.aborted && why === NO_ANSWER_IN_TIME;
      reason = cutShort && lastReason !== undefined ? lastReason : why;
      lastReason = reason;
    }
    if (now() >= deadline) return { outcome: 'timeout', reason };
    if (!told) {
      told = true;
      options.onWaiting?.(reason);
    }
    const pause = Math.min(delay, Math.max(0, deadline - now()));
    delay = Math.min(MAX_DELAY_MS, delay * 2);
    await clock.sleep(pause, options.signal);
  }
}

/** `--wait SECONDS`: a positive number of seconds (decimals allowed), at most a day. */
export function waitOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)s?$/.exec(value.trim());
  const seconds = match === null ? Number.NaN : Number(match[1]);
  if (!(seconds > 0) || seconds > 86_400) throw new UsageError(`--wait takes a number of seconds (more than 0, at most 86400), got ${JSON.stringify(value)}`);
  return seconds * 1000;
}

/**
 * For `test` and `serve`: waits for the provider when `--wait` was given. Writes one line while it
 * waits; returns an error message naming the URL and the seconds when it never answered.
 */
export async function waitForProviderFlag(url: string, waitMs: number | undefined, write: (line: string) => void, signal?: AbortSignal, clock?: Clock): Promise<string | undefined> {
  if (waitMs === undefined) return undefined;
  const seconds = Number((waitMs / 1000).toFixed(3));
  const result = await waitForProvider(url, {
    timeoutMs: waitMs,
    ...(signal === undefined ? {} : { signal }),
    ...(clock === undefined ? {} : { clock }),
    onWaiting: (reason) => write(`Waiting up to ${seconds} s for the provider at ${url} to answer (${reason})…\n`),
  });
  if (result.outcome === 'timeout') {
    return `the provider at ${url} did not answer within ${seconds} s (--wait ${seconds}); last attempt: ${result.reason}. Is it running, and listening on that address?`;
  }
  return undefined;
}
