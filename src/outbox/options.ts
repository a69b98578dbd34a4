import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';
import {
  asOptionsObject,
  integerOption,
  optionalFunction,
  optionalLogger,
  optionalPositiveNumber,
  rejectUnknownKeys,
} from '../lib/options.js';
import { InvalidOptionsError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import type { DeliveryStore } from '../store/types.js';
import { DEFAULT_BACKOFF, type Backoff } from './schedule.js';
import type { SendCallback } from './types.js';

const FACTORY = 'createOutbox';
const OPTION_KEYS = [
  'store', 'send', 'owner', 'pollIntervalMs', 'leaseMs', 'sendTimeoutMs', 'batchSize', 'concurrency', 'backoff',
  'now', 'random', 'logger', 'instrumentation',
] as const;
const BACKOFF_KEYS = ['baseMs', 'maxMs', 'factor', 'jitter'] as const;
const STORE_METHODS = ['claimDeliveries', 'completeDelivery', 'retryDelivery', 'failDelivery'] as const;
/** Longest default send timeout: a connector that has not answered in 30 s will not. */
const MAX_DEFAULT_SEND_TIMEOUT_MS = 30_000;
/** setTimeout fires at once for anything above 2^31 − 1 ms: refuse such periods rather than spin. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** {@link OutboxOptions} checked, with every default filled in (except owner and logger). */
export interface ResolvedOutboxOptions {
  store: DeliveryStore;
  send: SendCallback;
  owner: string | undefined;
  pollIntervalMs: number;
  leaseMs: number;
  sendTimeoutMs: number;
  batchSize: number;
  concurrency: number;
  backoff: Backoff;
  now: () => number;
  random: () => number;
  logger: Logger | false | undefined;
  instrumentation: Instrumentation;
}

/** Validates the options of createOutbox; throws InvalidOptionsError with a hint on the first problem. */
export function resolveOutboxOptions(input: unknown): ResolvedOutboxOptions {
  const options = asOptionsObject(FACTORY, input);
  rejectUnknownKeys(FACTORY, options, OPTION_KEYS);

  const store = options.store as Partial<Record<string, unknown>> | undefined;
  if (typeof store !== 'object' || store === null || STORE_METHODS.some((m) => typeof store[m] !== 'function')) {
    throw new InvalidOptionsError(`${FACTORY}: option "store" is required and must be a Store (memoryStore(), sqliteStore(…) or postgresStore(…)) with ${STORE_METHODS.join(', ')}`);
  }
  const send = optionalFunction<SendCallback>(FACTORY, options, 'send');
  if (send === undefined) {
    throw new InvalidOptionsError(`${FACTORY}: option "send" is required: a function (url, payload) => Promise<SendResult>, e.g. (url, payload) => connector.sendCallback(url, payload)`);
  }
  const owner = options.owner;
  if (owner !== undefined && (typeof owner !== 'string' || owner.trim().length === 0 || owner.length > 200)) {
    throw new InvalidOptionsError(`${FACTORY}: option "owner" must be a non-empty string of at most 200 characters, unique per process`);
  }

  const pollIntervalMs = timerPeriod(options, 'pollIntervalMs') ?? 1000;
  const leaseMs = timerPeriod(options, 'leaseMs') ?? 60_000;
  const sendTimeoutMs = timerPeriod(options, 'sendTimeoutMs') ?? Math.min(MAX_DEFAULT_SEND_TIMEOUT_MS, Math.floor(leaseMs / 2));
  if (sendTimeoutMs >= leaseMs) {
    throw new InvalidOptionsError(`${FACTORY}: option "sendTimeoutMs" (${sendTimeoutMs}) must be below "leaseMs" (${leaseMs}): an attempt must end before its claim lapses, or another process could send the same callback at the same time`);
  }
  if (sendTimeoutMs < 1) throw new InvalidOptionsError(`${FACTORY}: option "leaseMs" is too short to leave any time for an attempt`);
  const batchSize = integerOption(FACTORY, 'batchSize', options.batchSize, 10, 1, 1000);
  const concurrency = integerOption(FACTORY, 'concurrency', options.concurrency, 4, 1, 1000);

  return {
    store: store as unknown as DeliveryStore,
    send,
    owner,
    pollIntervalMs,
    leaseMs,
    sendTimeoutMs,
    batchSize,
    concurrency,
    backoff: resolveBackoff(options.backoff),
    now: optionalFunction<() => number>(FACTORY, options, 'now') ?? Date.now,
    random: optionalFunction<() => number>(FACTORY, options, 'random') ?? Math.random,
    logger: optionalLogger<Logger>(FACTORY, options),
    instrumentation: (options.instrumentation as Instrumentation | undefined) ?? noInstrumentation,
  };
}

function resolveBackoff(input: unknown): Backoff {
  if (input === undefined) return { ...DEFAULT_BACKOFF };
  const options = asOptionsObject(`${FACTORY}: option "backoff"`, input);
  rejectUnknownKeys(`${FACTORY}: option "backoff"`, options, BACKOFF_KEYS);
  const where = `${FACTORY}: option "backoff"`;
  const baseMs = optionalPositiveNumber(where, options, 'baseMs') ?? DEFAULT_BACKOFF.baseMs;
  const maxMs = optionalPositiveNumber(where, options, 'maxMs') ?? Math.max(DEFAULT_BACKOFF.maxMs, baseMs);
  if (maxMs < baseMs) throw new InvalidOptionsError(`${where}: "maxMs" (${maxMs}) must be at least "baseMs" (${baseMs})`);
  const factor = optionalPositiveNumber(where, options, 'factor') ?? DEFAULT_BACKOFF.factor;
  if (factor < 1) throw new InvalidOptionsError(`${where}: "factor" must be at least 1 (the wait never shrinks between attempts)`);
  const jitter = options.jitter ?? DEFAULT_BACKOFF.jitter;
  if (jitter !== 'full' && jitter !== 'none') throw new InvalidOptionsError(`${where}: "jitter" must be 'full' or 'none'`);
  return { baseMs, maxMs, factor, jitter };
}

function timerPeriod(options: Record<string, unknown>, key: string): number | undefined {
  const value = optionalPositiveNumber(FACTORY, options, key);
  if (value !== undefined && value > MAX_TIMER_MS) {
    throw new InvalidOptionsError(`${FACTORY}: option "${key}" must be at most ${MAX_TIMER_MS} ms (about 24.8 days)`);
  }
  return value;
}
