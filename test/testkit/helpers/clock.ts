import type { Clock } from '../../../src/testkit/cli/io.js';

interface Timer {
  due: number;
  fire: () => void;
}

/**
 * A clock for `--wait` (`waitForProvider`) whose time moves only when the test moves it: never by
 * itself, so an attempt's own time never runs out while it waits for an answer (however busy the
 * machine), and a pause ends only when the test says so.
 *
 * - `advance(ms)` moves time forward, ending the pauses and the attempts' times that fall due.
 * - `wake()` waits until the waiter pauses, then moves time to the end of that pause.
 * - With `{ auto: true }`, every pause ends at once, time moving by its length: a wait runs through
 *   its whole deadline without waiting for real, each attempt getting its answer (or refusal).
 */
export class FakeClock implements Clock {
  /** The length of every pause asked for, in order. */
  readonly sleeps: number[] = [];
  #now = 0;
  #timers = new Set<Timer>();
  #pending: Timer | undefined;
  #sleeping: (() => void)[] = [];
  readonly #auto: boolean;

  constructor(options: { auto?: boolean } = {}) {
    this.#auto = options.auto === true;
  }

  now(): number {
    return this.#now;
  }

  timeout(ms: number): AbortSignal {
    const controller = new AbortController();
    this.#at(ms, () => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')));
    return controller.signal;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    return new Promise<void>((resolve) => {
      if (signal?.aborted === true) return resolve();
      const done = (): void => {
        this.#timers.delete(timer);
        if (this.#pending === timer) this.#pending = undefined;
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.#at(ms, done);
      signal?.addEventListener('abort', done, { once: true });
      if (this.#auto) {
        this.advance(ms);
        return;
      }
      this.#pending = timer;
      for (const wake of this.#sleeping.splice(0)) wake();
    });
  }

  /** Moves time forward by `ms`, firing what falls due on the way, in order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const next = [...this.#timers].filter((t) => t.due <= target).sort((a, b) => a.due - b.due)[0];
      if (next === undefined) break;
      this.#timers.delete(next);
      this.#now = next.due;
      next.fire();
    }
    this.#now = target;
  }

  /** Resolves once the waiter is in a pause (at once if it is already). */
  asleep(): Promise<void> {
    if (this.#pending !== undefined) return Promise.resolve();
    return new Promise((resolve) => this.#sleeping.push(resolve));
  }

  /** Waits for the waiter's next pause, then ends it (time moves to its end). */
  async wake(): Promise<void> {
    await this.asleep();
    const pending = this.#pending;
    if (pending !== undefined) this.advance(pending.due - this.#now);
  }

  #at(ms: number, fire: () => void): Timer {
    const timer = { due: this.#now + ms, fire };
    this.#timers.add(timer);
    return timer;
  }
}
