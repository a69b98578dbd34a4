import { createRedactingLogger, type Logger } from '../../src/lib/logger.js';
import type { CallbackPayload, NewDelivery, Store } from '../../src/store/types.js';

/** A clock the test moves by hand. */
export function fakeClock(start = Date.UTC(2030, 0, 1)): { now: () => number; set(ms: number): void; advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    set(ms) {
      t = ms;
    },
    advance(ms) {
      t += ms;
    },
  };
}

let sequence = 0;

/**
 * Enqueues a delivery the way the router does: in the commit that releases an operation.
 * Returns the delivery as enqueued.
 */
export async function enqueue(
  store: Store,
  input: { now: number; payload?: CallbackPayload; url?: string; deadlineMs?: number; id?: string },
): Promise<NewDelivery> {
  sequence++;
  const id = input.id ?? `delivery-${sequence}`;
  const key = `resource:res-${sequence}`;
  const claim = await store.claimOperation({
    key,
    kind: 'deprovision',
    targetId: `res-${sequence}`,
    fingerprint: 'deprovision',
    request: { kind: 'deprovision' },
    owner: 'router-under-test',
    now: input.now,
    leaseMs: 60_000,
  });
  if (claim.outcome !== 'claimed') throw new Error('test setup: could not claim an operation');
  const delivery: NewDelivery = {
    id,
    callbackId: `cb${String(sequence).padStart(27, '0')}`,
    url: input.url ?? `https://connector.test/v1/callbacks/cb-${sequence}`,
    payload: input.payload ?? { state: 'done', message: 'Your database is ready' },
    createdAt: input.now,
    deadlineAt: input.now + (input.deadlineMs ?? 24 * 60 * 60_000),
  };
  await store.commitOperation(key, claim.operation.token, { mutation: { type: 'none' }, delivery });
  return delivery;
}

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** A real pino logger (with the package's redaction) whose output the test can read back. */
export function captureLogs(): { logger: Logger; raw: () => string; lines: () => LogLine[] } {
  const chunks: string[] = [];
  const logger = createRedactingLogger({ write: (line: string) => void chunks.push(line) }, 'debug');
  return {
    logger,
    raw: () => chunks.join(''),
    lines: () => chunks.join('').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as LogLine),
  };
}

export const LEVEL = { info: 30, warn: 40, error: 50 } as const;

/** A promise with its resolve function exposed. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Waits until `check` holds, polling every few ms; fails after `limitMs` so a broken test ends. */
export async function waitFor(check: () => boolean | Promise<boolean>, what: string, limitMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > limitMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
