/**
 * The package's one clock. Options take `now: () => number` (milliseconds since the epoch); the
 * parts that wait (the operation engine) also sleep on the same clock, so that a test moving a fake
 * clock moves every wait with it and no test depends on the machine's speed.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms` of this clock's time, or at once when `signal` aborts. Never rejects. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Calls `fire` once after `ms` of this clock's time unless the returned function cancels it first.
   * The hot path's timers (every request arms two): no promise, no AbortSignal, no event dispatch.
   */
  after(ms: number, fire: () => void): () => void;
}

/** The clock of `now` with real timers (unref'd: a wait never keeps the process alive). */
export function systemClock(now: () => number = Date.now): Clock {
  return {
    now,
    sleep: (ms, signal) => sleepOnTimer(ms, signal, true),
    after(ms, fire) {
      const timer = setTimeout(fire, Math.max(0, ms));
      timer.unref();
      return () => clearTimeout(timer);
    },
  };
}

/**
 * `Clock.sleep` on a real timer: resolves after `ms`, or at once when `signal` aborts; never
 * rejects. `unref` lets the process exit meanwhile (the engine's waits); a command line that has
 * nothing else to keep it alive while it waits (the test kit's `--wait`) keeps the timer ref'd.
 */
export function sleepOnTimer(ms: number, signal: AbortSignal | undefined, unref: boolean): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    if (unref) timer.unref();
    signal?.addEventListener('abort', done, { once: true });
  });
}
