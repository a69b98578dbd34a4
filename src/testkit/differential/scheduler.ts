/**
 * The harness's scheduling: a clock that moves only when told, and a turnstile that lets one store
 * call through at a time, chosen by the calling request's priority, so that a run interleaves the
 * same way on every backend however fast its database answers. No sleeps anywhere: a run waits only
 * for the store calls it let through, and for the event loop to go quiet after each.
 */
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import type { Clock } from '../../lib/clock.js';

/** Which request a piece of work belongs to (carried across awaits by AsyncLocalStorage). */
export interface FlowTag {
  index: number;
  priority: number;
}

/** A clock that moves only with `advance`; its timers keep the async context they were set in. */
export class HarnessClock implements Clock {
  #t: number;
  #timers: { at: number; fire: () => void }[] = [];

  constructor(start: number) {
    this.#t = start;
  }

  now(): number {
    return this.#t;
  }

  after(ms: number, fire: () => void): () => void {
    const timer = { at: this.#t + Math.max(0, ms), fire: AsyncResource.bind(fire) };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted === true) {
        resolve();
        return;
      }
      const cancel = this.after(ms, resolve);
      signal?.addEventListener('abort', () => {
        cancel();
        resolve();
      }, { once: true });
    });
  }

  /** Moves time and fires, in the order they were set, the timers that are due (not those they set). */
  advance(ms: number): void {
    this.#t += ms;
    const due = this.#timers.filter((t) => t.at <= this.#t);
    this.#timers = this.#timers.filter((t) => t.at > this.#t);
    for (const timer of due) timer.fire();
  }
}

/** The clock of an instance that crashed: it reads the time, and none of its timers ever fire. */
export function deadClock(of: Clock): Clock {
  return {
    now: () => of.now(),
    after: () => () => undefined,
    sleep: (_ms, signal) =>
      new Promise<void>((resolve) => {
        signal?.addEventListener('abort', () => resolve(), { once: true });
      }),
  };
}

interface Queued {
  /** 0: lease renewals and replay pruning (before anything else); 1: the rest. */
  rank: number;
  priority: number;
  index: number;
  seq: number;
  method: string;
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Background calls that go first: a live instance renews its leases before any other claim is looked at. */
const BACKGROUND = new Set(['renewOperation', 'pruneReplays']);

/**
 * Queues every call to the wrapped store and lets them through one at a time: background calls
 * first, then by the calling request's (priority, index), first come first served within one request.
 */
export class Turnstile {
  readonly flows = new AsyncLocalStorage<FlowTag>();
  #queue: Queued[] = [];
  #seq = 0;
  readonly #callTimeoutMs: number;
  /** Store calls let through (for the report). */
  calls = 0;

  constructor(callTimeoutMs: number) {
    this.#callTimeoutMs = callTimeoutMs;
  }

  /** The store as the engine sees it: every method call waits its turn. */
  wrap<S extends object>(store: S): S {
    return new Proxy(store, {
      get: (target, property, _receiver) => {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== 'function' || property === 'close' || typeof property === 'symbol') return value;
        return (...args: unknown[]) => this.#enqueue(property, () => (value as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
  }

  #enqueue(method: string, run: () => unknown): Promise<unknown> {
    const tag = this.flows.getStore();
    return new Promise((resolve, reject) => {
      this.#queue.push({
        rank: BACKGROUND.has(method) ? 0 : 1,
        priority: tag?.priority ?? Number.MAX_SAFE_INTEGER,
        index: tag?.index ?? Number.MAX_SAFE_INTEGER,
        seq: this.#seq++,
        method,
        run,
        resolve,
        reject,
      });
    });
  }

  /** Runs queued calls, one at a time, until nothing is queued and the event loop has gone quiet. */
  async drain(): Promise<void> {
    for (;;) {
      await quiet();
      if (this.#queue.length === 0) return;
      let best = 0;
      for (let i = 1; i < this.#queue.length; i++) if (before(this.#queue[i]!, this.#queue[best]!)) best = i;
      const [next] = this.#queue.splice(best, 1);
      this.calls += 1;
      try {
        next!.resolve(await this.#watch(next!));
      } catch (error) {
        next!.reject(error);
      }
    }
  }

  /** A store call that never settles would hang the run: fail it with a clear reason instead. */
  async #watch(call: Queued): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const watchdog = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`differential: store.${call.method}() did not settle within ${this.#callTimeoutMs} ms`)), this.#callTimeoutMs);
    });
    try {
      return await Promise.race([Promise.resolve().then(call.run), watchdog]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function before(a: Queued, b: Queued): boolean {
  if (a.rank !== b.rank) return a.rank < b.rank;
  if (a.priority !== b.priority) return a.priority < b.priority;
  if (a.index !== b.index) return a.index < b.index;
  return a.seq < b.seq;
}

/**
 * One turn of the event loop: every promise continuation that can run has run (microtasks all run
 * before the next macrotask). Everything a request does between two store calls is such a
 * continuation: the handlers either return at once or wait on a latch of the harness.
 */
function quiet(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
