import { ConflictError, MarketplaceError, ServiceUnavailableError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import type { ClaimResult, Mutation, OperationKind, OperationRecord, OperationRequest, Store } from '../store/types.js';

/** An HTTP answer the router sends as is. */
export interface Answer {
  status: number;
  body?: unknown;
}

/** What running a handler produced. */
export type RunOutcome =
  | { type: 'done'; answer: Answer; mutation: Mutation }
  | { type: 'accepted'; message: string };

/**
 * One state-changing request, described for the engine. `decide` runs while the caller holds the
 * entity's operation, so what it reads cannot change under it; it returns the final answer when no
 * work is needed (a replay, a 404, a 409) or `undefined` to run the handler.
 */
export interface OperationSpec {
  key: string;
  kind: OperationKind;
  targetId: string;
  fingerprint: string;
  request: OperationRequest;
  callbackId: string | undefined;
  callbackUrl: string | undefined;
  decide(): Promise<Answer | undefined>;
  run(): Promise<RunOutcome>;
}

export interface EngineOptions {
  store: Store;
  owner: string;
  now: () => number;
  /** How long a claim lives without renewal; a crashed process's claims lapse after this. */
  leaseMs: number;
  /** How long a request waits for the handler (its own or a duplicate's) before answering 503. */
  waitMs: number;
  /** The 24 h callback deadline (section 8). */
  pendingDeadlineMs: number;
  logger: Logger;
}

/** Raised when a duplicate waited longer than `waitMs`: the first request is still working. */
class StillWorkingError extends ServiceUnavailableError {
  constructor() {
    super('The operation is still in progress, retry later', 'ERR_OPERATION_IN_PROGRESS');
  }
}

/**
 * Runs operations so that identical requests, concurrent or repeated, call the handler once, and a
 * crash at any point leaves the operation retryable, never reported done.
 *
 * Every write request claims the entity's operation record first (store.claimOperation is atomic
 * in every adapter), then decides from the entity's state. Concurrent duplicates in this process
 * wait on the first one's promise; in other processes they poll the store until the claim is
 * released or its lease lapses.
 */
export class OperationEngine {
  readonly #options: EngineOptions;
  readonly #inflight = new Map<string, Promise<unknown>>();

  constructor(options: EngineOptions) {
    this.#options = options;
  }

  async execute(spec: OperationSpec): Promise<Answer> {
    const { store, now } = this.#options;
    const waitUntil = now() + this.#options.waitMs;
    for (let attempt = 0; ; attempt++) {
      const claim: ClaimResult = await store.claimOperation({
        key: spec.key,
        kind: spec.kind,
        targetId: spec.targetId,
        fingerprint: spec.fingerprint,
        request: spec.request,
        owner: this.#options.owner,
        now: now(),
        leaseMs: this.#options.leaseMs,
      });
      if (claim.outcome === 'claimed') return this.#runClaimed(spec, claim.operation, waitUntil);
      if (claim.outcome === 'replayed') return claim.answer;
      if (claim.outcome === 'blocked') throw new ConflictError(conflictMessage(claim.operation), 'ERR_OPERATION_IN_PROGRESS');

      const busy = claim.operation;
      if (busy.fingerprint !== spec.fingerprint) {
        throw new ConflictError(conflictMessage(busy), 'ERR_OPERATION_IN_PROGRESS');
      }
      if (busy.state === 'pending') return { status: 202, body: { message: busy.message ?? 'The operation is in progress' } };
      if (now() >= waitUntil) throw new StillWorkingError();
      await this.#waitFor(spec.key, attempt, waitUntil);
    }
  }

  async #runClaimed(spec: OperationSpec, operation: OperationRecord, waitUntil: number): Promise<Answer> {
    const work = this.#holdAndRun(spec, operation);
    this.#inflight.set(spec.key, work);
    void work.finally(() => {
      if (this.#inflight.get(spec.key) === work) this.#inflight.delete(spec.key);
    }).catch(() => undefined);

    // The handler keeps its claim (renewed) past the wait limit and commits when it finishes; this
    // request only stops waiting, so the marketplace's retry later finds the stored outcome.
    const remaining = waitUntil - this.#options.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StillWorkingError()), Math.max(0, remaining));
      timer.unref();
    });
    try {
      return await Promise.race([work, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #holdAndRun(spec: OperationSpec, operation: OperationRecord): Promise<Answer> {
    const { store, now, leaseMs, logger } = this.#options;
    const { key, token } = operation;
    let settled = false;
    const heartbeat = setInterval(() => {
      store.renewOperation(key, token, now() + leaseMs).then(
        (held) => {
          if (!held && !settled) logger.error({ key, kind: spec.kind }, 'operation lease lost while the handler was running');
        },
        (error: unknown) => logger.warn({ key, err: errorSummary(error) }, 'could not renew operation lease'),
      );
    }, Math.max(10, Math.floor(leaseMs / 3)));
    heartbeat.unref();

    try {
      // decide() runs under the claim, so what it reads cannot change before the commit.
      const decided = await spec.decide();
      if (decided !== undefined) {
        settled = true;
        await store.releaseOperation(key, token);
        return decided;
      }
      const outcome = await spec.run();
      settled = true;
      if (outcome.type === 'accepted') {
        const pending = {
          message: outcome.message,
          deadlineAt: now() + this.#options.pendingDeadlineMs,
          ...(spec.callbackId === undefined ? {} : { callbackId: spec.callbackId }),
          ...(spec.callbackUrl === undefined ? {} : { callbackUrl: spec.callbackUrl }),
        };
        await store.markOperationPending(key, token, pending);
        return { status: 202, body: { message: outcome.message } };
      }
      await store.commitOperation(key, token, { mutation: outcome.mutation });
      return outcome.answer;
    } catch (error) {
      settled = true;
      // A 404/409 decision, a refusal, a failure or a failed commit changes nothing (commits are all
      // or nothing): drop the claim so the next request starts clean instead of waiting out the lease.
      await store.releaseOperation(key, token).catch((releaseError: unknown) => {
        logger.warn({ key, err: errorSummary(releaseError) }, 'could not release operation; it lapses with its lease');
      });
      throw error;
    } finally {
      clearInterval(heartbeat);
    }
  }

  async #waitFor(key: string, attempt: number, waitUntil: number): Promise<void> {
    const local = this.#inflight.get(key);
    if (local !== undefined) {
      await local.catch(() => undefined);
      return;
    }
    // Another process holds it: poll with a growing interval, bounded by the wait limit.
    const delay = Math.min(25 * 2 ** Math.min(attempt, 5), 500, Math.max(1, waitUntil - this.#options.now()));
    await new Promise((resolve) => setTimeout(resolve, delay).unref());
  }
}

function conflictMessage(operation: OperationRecord): string {
  return operation.state === 'pending'
    ? 'Another operation on this entity is pending; wait for its outcome'
    : 'Another operation on this entity is in progress';
}

/** Error text safe for logs: class, code and message only (our messages never carry secrets). */
export function errorSummary(error: unknown): Record<string, unknown> {
  if (error instanceof MarketplaceError) return { type: error.name, code: error.code, message: error.message };
  if (error instanceof Error) return { type: error.name, message: error.message, stack: error.stack };
  return { type: typeof error };
}
