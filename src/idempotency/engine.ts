import { randomBytes } from 'node:crypto';
import { ConflictError, InternalError, LeaseLostError, MarketplaceError, NotFoundError, safeMessage, ServiceUnavailableError } from '../errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { noInstrumentation, type HandlerOutcome, type Instrumentation } from '../observability/hooks.js';
import { spanMayRecord } from '../observability/tracing.js';
import { immediateOf, ORPHAN_MESSAGE } from '../store/common.js';
import type { CallbackPayload, ClaimInput, CommitInput, CommitResult, EntitySnapshot, NewDelivery, OperationRecord, RecordedAnswer, Store } from '../store/types.js';
import type { Completion, HandlerContext, ProviderHandlers } from '../domain/handlers.js';
import { conflictMessage } from './claim-rule.js';
import {
  entityDeletedError,
  OPERATIONS,
  outcomeOf,
  prepareOperation,
  type Answer,
  type Entity,
  type OperationCall,
  type PreparedOperation,
  type Settled,
  type TableEnv,
} from './operations.js';

export type { Answer } from './operations.js';

export interface EngineOptions {
  store: Store;
  handlers: ProviderHandlers;
  env: TableEnv;
  /** Identifies this process in operation records. */
  owner: string;
  clock: Clock;
  /** How long a claim lives without renewal; a crashed process's claims lapse after this. */
  leaseMs: number;
  /** How long a request waits for the handler (its own or a duplicate's) before answering. */
  waitMs: number;
  /** The 24 h callback deadline (section 8). */
  pendingDeadlineMs: number;
  /** How long the answer to a signed request is kept against its signature (at least twice the Date tolerance). */
  replayTtlMs: number;
  /**
   * Whether callbacks can be sent (a connector is configured). Then a handler still running at
   * `waitMs` on a request with callback headers is handed over to the callback: 202 now, the outcome
   * delivered by the outbox when the handler finishes.
   */
  callbacks: boolean;
  /** Called after a commit enqueued a callback (wakes the outbox). */
  onDelivery?: () => void;
  logger: Logger;
  instrumentation?: Instrumentation;
}

/** Which entity a `complete` call finishes. */
export interface CompletionTarget {
  entity: 'resource' | 'credential';
  id: string;
}

/** 503: the operation (this request's or an identical one's) is still running past the wait limit; retrying is safe. */
export class OperationInProgressError extends ServiceUnavailableError {
  constructor() {
    super('The operation is still in progress, retry later', 'ERR_OPERATION_IN_PROGRESS');
  }
}

/** 409: another operation holds the entity (or its resource), with other properties. Its message is the claim rule's (claim-rule.ts), which records it. */
export class OperationConflictError extends ConflictError {
  constructor(holder: Pick<OperationRecord, 'state'>) {
    super(conflictMessage(holder), 'ERR_OPERATION_CONFLICT');
  }
}

/** 503: the store answered that the key kept changing hands during the claim; retrying is safe. */
class ClaimUnavailableError extends ServiceUnavailableError {
  constructor() {
    super('The operation is changing hands too fast, retry later');
  }
}

/** The answer given when a handler is handed over to the callback at the wait limit. */
export const HANDOFF_MESSAGE = 'The operation is taking longer than expected; its outcome will follow by callback';
/** The callback message of a handed-over operation that failed unexpectedly (the reason is logged). */
const FAILED_MESSAGE = 'The provider could not complete the operation';
const TIMEOUT = Symbol('timeout');
const REPLAY_PRUNE_INTERVAL_MS = 60_000;

/**
 * Where a claimed operation is: `running` (the handler may still be handed over to the callback),
 * `committing` (its outcome is being written: this request answers it), or `handedOff` (this request
 * answered 202 and the outcome goes out by callback).
 */
interface Progress {
  phase: 'running' | 'committing' | 'handedOff';
  handedOffAt: number;
}

/**
 * One request's bookkeeping of its replay record: `recorded` once its answer is recorded against
 * its signature (by the claim, a commit, a pending mark or `recordReplay`; requests without a
 * signature have nothing to record); `deferred` once the recording belongs to the handler still
 * running past the wait limit (it records its outcome when it commits, or when it fails), so the
 * 202 or 503 answered meanwhile is not recorded.
 */
interface Run {
  recorded: boolean;
  deferred: boolean;
  /**
   * Whether this operation's steps go through the span hook. Decided once, in `execute`: with no
   * tracer provider registered the steps call their work directly, without the attributes object
   * and closure a span that records nothing would cost each of them.
   */
  traced: boolean;
}

/**
 * The context a handler gets. A class rather than an object literal with a logger accessor: the
 * literal built two closures and an accessor pair for every request, and what a request allocates
 * is what the garbage collector pays for. `complete` stays an own, bound function, so that
 * `({ complete }) => ...` keeps working.
 */
class OperationContext implements HandlerContext {
  readonly callbackId: string | undefined;
  readonly reqId: string | undefined;
  readonly complete: (completion: Completion) => Promise<void>;
  readonly #op: PreparedOperation;
  readonly #parent: Logger;
  #bound: Logger | undefined;

  constructor(op: PreparedOperation, parent: Logger, complete: (completion: Completion) => Promise<void>) {
    this.callbackId = op.callbackId;
    this.reqId = op.reqId;
    this.complete = complete;
    this.#op = op;
    this.#parent = parent;
  }

  /**
   * A child logger bound to the operation. A pino child costs more than the rest of the context
   * (bindings serialized, redaction set up): it is made on first use, so a handler that never logs
   * does not pay for it.
   */
  get logger(): Logger {
    const op = this.#op;
    this.#bound ??= this.#parent.child({
      entity: op.entity,
      id: op.targetId,
      ...(op.callbackId === undefined ? {} : { callbackId: op.callbackId }),
      ...(op.reqId === undefined ? {} : { reqId: op.reqId }),
    });
    return this.#bound;
  }

  set logger(value: Logger) {
    this.#bound = value;
  }
}

/**
 * Drives the operation table (operations.ts) so that identical requests, concurrent or repeated,
 * call the handler once; a replayed signed request answers what it answered first; a resource's
 * deletion and the operations on its credentials never interleave; and a crash at any point leaves
 * the operation retryable, never reported done.
 *
 * Each request: one claim (which answers a replay, or reads the snapshot `decide` needs), the
 * handler, one commit. Concurrent duplicates in this process wait on the first one's promise; in
 * other processes they poll the store until the claim is released or its lease lapses.
 */
export class OperationEngine {
  readonly #options: EngineOptions;
  readonly #instrumentation: Instrumentation;
  readonly #inflight = new Map<string, Promise<unknown>>();
  /** Keys whose handler was handed over to the callback: identical repeats answer 202 meanwhile. */
  readonly #handedOff = new Map<string, Answer>();
  /**
   * Keys whose handler returned `accepted(...)` and whose pending mark is being written: a
   * `complete()` for one (a timer the handler armed, firing early on a busy machine) waits for the
   * mark instead of finding no pending operation and losing the outcome.
   */
  readonly #markingPending = new Map<string, Promise<unknown>>();
  #lastReplayPrune = 0;

  constructor(options: EngineOptions) {
    this.#options = options;
    this.#instrumentation = options.instrumentation ?? noInstrumentation;
  }

  /**
   * Prepares and runs one call: the whole operation table for a request (the router's one call).
   * A refusal from `prepare` (schema, catalog, the `validate` hook, callback headers) is recorded
   * against the request's signature like every other first answer; when a record of that
   * signature already stands (the request was answered before, and its validation now says
   * otherwise), that answer is given instead.
   */
  handle(call: OperationCall): Promise<Answer> {
    // Not async: a request that the `validate` hook does not hold up goes straight to `execute`,
    // without a frame and a promise of its own (the engine's allocations are what the scavenger
    // pays for on every request).
    let prepared: PreparedOperation | Promise<PreparedOperation>;
    try {
      prepared = prepareOperation(call, this.#options.env);
    } catch (error) {
      return this.#refusedCall(call, error);
    }
    if (prepared instanceof Promise) {
      return prepared.then(
        (operation) => this.execute(operation),
        (error: unknown) => this.#refusedCall(call, error),
      );
    }
    // Callers chain on the promise: whatever `execute` throws (a span hook) arrives as its rejection.
    try {
      return this.execute(prepared);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /** A call that `prepare` refused: the refusal is recorded against the signature, or the answer recorded before is given. */
  async #refusedCall(call: OperationCall, error: unknown): Promise<Answer> {
    if (call.requestId === undefined) throw error;
    const given = answerOf(error);
    const standing = await this.#record(call.requestId, given);
    if (standing === undefined || sameAnswer(standing, given)) throw error;
    return standing;
  }

  /** Runs one prepared operation to its answer, recorded against its signature (the first answer stands). */
  execute(operation: PreparedOperation): Promise<Answer> {
    if (!spanMayRecord(this.#instrumentation.span)) return this.#answer(operation, false);
    return this.#instrumentation.span(
      'marketplace.operation',
      { kind: operation.kind, entityId: operation.targetId, callbackId: operation.callbackId },
      () => this.#answer(operation, true),
    );
  }

  /**
   * The operation's answer, and its record: an answer no claim, commit or pending mark recorded
   * (a 503 after waiting for another request, a duplicate's 202 after a hand-over, a store failure)
   * is recorded here; when another answer was recorded first (an identical request raced this
   * one), that one is given, so every copy of a signed request answers the same.
   */
  async #answer(op: PreparedOperation, traced: boolean): Promise<Answer> {
    const run: Run = { recorded: op.requestId === undefined, deferred: false, traced };
    let answer: Answer;
    try {
      answer = await this.#execute(op, run);
    } catch (error) {
      if (run.recorded || run.deferred) throw error;
      const given = answerOf(error);
      const standing = await this.#record(op.requestId!, given);
      if (standing === undefined || sameAnswer(standing, given)) throw error;
      return standing;
    }
    if (run.recorded || run.deferred) return answer;
    return (await this.#record(op.requestId!, answer)) ?? answer;
  }

  /** Records `answer` unless the signature has a live record; the answer that stands, or undefined when the store failed. */
  async #record(requestId: string, answer: RecordedAnswer): Promise<RecordedAnswer | undefined> {
    try {
      return await this.#options.store.recordReplay(this.#replayRecord(requestId, answer), this.#options.clock.now());
    } catch (error) {
      this.#options.logger.warn({ err: errorSummary(error), status: answer.status }, 'could not record the answer against the request signature');
      return undefined;
    }
  }

  async #execute(original: PreparedOperation, run: Run): Promise<Answer> {
    const { store, clock } = this.#options;
    const deadline = clock.now() + this.#options.waitMs;
    let op = original;
    let recorded: RecordedAnswer | undefined;
    for (let attempt = 0; ; attempt++) {
      const now = clock.now();
      const input: ClaimInput = {
        key: op.key,
        kind: op.kind,
        targetId: op.targetId,
        fingerprint: op.fingerprint,
        request: op.request,
        owner: this.#options.owner,
        now,
        leaseMs: this.#options.leaseMs,
      };
      if (op.parentId !== undefined) input.parentId = op.parentId;
      if (op.requestId !== undefined) {
        input.requestId = op.requestId;
        input.replayExpiresAt = now + this.#options.replayTtlMs;
      }
      // A store that never waits answers in this turn: no promise, no microtask (see IMMEDIATE).
      const claimNow = immediateOf(store.claimOperation);
      const claim = claimNow === undefined ? await store.claimOperation(input) : claimNow.call(store, input);
      switch (claim.outcome) {
        case 'replayed':
          // This exact signed request was answered before. Its identical repeat (the marketplace
          // retrying within the same second signs the same bytes) still gets today's answer when
          // that needs no work (404 after a DELETE, the stored 201): claim again for the snapshot.
          // Whatever would run the handler again answers what it answered first instead.
          run.recorded = true;
          recorded = claim.answer;
          op = { ...op, requestId: undefined };
          continue;
        case 'claimed':
          // `return await`: an async function that returns a promise without awaiting it pays for
          // a thenable job and two more microtasks before its own promise settles.
          return await this.#runClaimed(op, claim.operation, claim.snapshot, deadline, recorded, run);
        case 'unavailable':
          if (recorded !== undefined) return recorded;
          throw new ClaimUnavailableError();
        case 'conflict':
          // A replay never waits and never takes another request's answer: it gives its own.
          if (recorded !== undefined) return recorded;
          // The claim recorded the 409 against the signature in the same step.
          if (op.requestId !== undefined) run.recorded = true;
          throw new OperationConflictError(claim.operation);
        case 'pending':
          if (recorded !== undefined) return recorded;
          if (op.requestId !== undefined) run.recorded = true;
          return claim.answer;
        case 'busy': {
          if (recorded !== undefined) return recorded;
          const handedOff = this.#handedOff.get(op.key);
          if (handedOff !== undefined) return handedOff;
          break;
        }
        case 'blocked':
          if (recorded !== undefined) return recorded;
          break;
      }
      // The same request running, or the other side of the parent/child exclusion: wait for it.
      if (clock.now() >= deadline) throw new OperationInProgressError();
      await this.#waitFor(claim.operation.key, attempt, deadline);
    }
  }

  async #runClaimed(op: PreparedOperation, operation: OperationRecord, snapshot: EntitySnapshot, deadline: number, recorded: RecordedAnswer | undefined, run: Run): Promise<Answer> {
    const progress: Progress = { phase: 'running', handedOffAt: 0 };
    const work = this.#hold(op, operation, snapshot, progress, recorded, run);
    this.#inflight.set(op.key, work);
    const { clock } = this.#options;
    // The handler's outcome or the wait limit, whichever comes first; one timer, cancelled with the
    // outcome. The same reactions forget the key (after the wait limit too: `resolve` is then a no-op).
    const first = await new Promise<Answer | typeof TIMEOUT>((resolve, reject) => {
      const cancel = clock.after(deadline - clock.now(), () => resolve(TIMEOUT));
      work.then(
        (answer) => {
          cancel();
          this.#forget(op.key, work);
          resolve(answer);
        },
        (error: unknown) => {
          cancel();
          this.#forget(op.key, work);
          reject(error);
        },
      );
    });
    if (first !== TIMEOUT) return first;
    // Past the wait limit the handler keeps its (renewed) claim and commits when it finishes: its
    // outcome is what gets recorded against the signature, not the 202 or 503 answered now (see
    // docs/idempotency.md), so this request's answer is not recorded here.
    run.deferred = true;
    if (progress.phase === 'committing') return await work;
    if (this.#options.callbacks && op.callbackId !== undefined && op.callbackUrl !== undefined) {
      progress.phase = 'handedOff';
      progress.handedOffAt = clock.now();
      const answer: Answer = { status: 202, body: { message: HANDOFF_MESSAGE } };
      this.#handedOff.set(op.key, answer);
      this.#options.logger.info({ key: op.key, kind: op.kind, callbackId: op.callbackId }, 'handler past the wait limit: answered 202, the outcome follows by callback');
      return answer;
    }
    // Without callback headers the marketplace's retry later finds the stored outcome.
    throw new OperationInProgressError();
  }

  /** A held operation has settled: identical requests no longer wait on it, nor answer its hand-over's 202. */
  #forget(key: string, work: Promise<Answer>): void {
    if (this.#inflight.get(key) === work) this.#inflight.delete(key);
    this.#handedOff.delete(key);
  }

  async #hold(op: PreparedOperation, operation: OperationRecord, snapshot: EntitySnapshot, progress: Progress, recorded: RecordedAnswer | undefined, run: Run): Promise<Answer> {
    const descriptor = OPERATIONS[op.kind];
    const { clock, logger } = this.#options;
    const stopRenewing = this.#keepLease(op, operation);
    try {
      let settled: Settled;
      try {
        // A replay answers from the state or from its record: neither the catalog nor the
        // `validate` hook has a say in it any more.
        const env = recorded === undefined ? this.#options.env : REPLAY_ENV;
        // Most kinds decide synchronously: an await of a plain value would still cost a microtask.
        let decision = descriptor.decide(op.targetId, op.request, snapshot, env);
        if (decision instanceof Promise) decision = await decision;
        if (decision.type === 'answer' || recorded !== undefined) {
          const answer = decision.type === 'answer' ? decision.answer : recorded!;
          settled = { mutation: { type: 'none' }, answer, payload: payloadOf(answer, descriptor.defaultMessage) };
        } else {
          const result = await this.#invoke(op, decision.entity, run.traced);
          const outcome = outcomeOf(op.kind, result);
          if (outcome === 'accepted') {
            const marking = this.#markPending(op, operation, progress, (result as { message: string }).message, run);
            this.#markingPending.set(op.key, marking);
            try {
              return await marking;
            } finally {
              this.#markingPending.delete(op.key);
            }
          }
          settled = descriptor.settle(op.targetId, op.request, decision.entity, outcome, clock.now(), logger);
        }
      } catch (error) {
        return await this.#refused(op, operation, progress, error, run);
      }
      return await this.#commit(op, operation, progress, settled, run);
    } finally {
      stopRenewing();
    }
  }

  /** Not async: without metrics or a tracer the handler's own promise is the answer, with no frame around it. */
  #invoke(op: PreparedOperation, entity: Entity, traced: boolean): Promise<unknown> {
    const { handlers, logger } = this.#options;
    const context = new OperationContext(op, logger, (completion) => this.complete({ entity: op.entity, id: op.targetId }, completion));
    const instrumentation = this.#instrumentation;
    if (instrumentation.handler === noInstrumentation.handler && !traced) return OPERATIONS[op.kind].invoke(handlers, op, entity, context);
    const run = () => OPERATIONS[op.kind].invoke(handlers, op, entity, context);
    if (instrumentation.handler === noInstrumentation.handler) return instrumentation.span('marketplace.handler', { kind: op.kind }, run);
    return this.#measured(op, run);
  }

  /** The handler timed and classified for the `handler` metric (and under its span). */
  async #measured(op: PreparedOperation, run: () => Promise<unknown>): Promise<unknown> {
    const instrumentation = this.#instrumentation;
    const started = performance.now();
    let outcome: HandlerOutcome = 'failed';
    try {
      const result = await instrumentation.span('marketplace.handler', { kind: op.kind }, run);
      outcome = outcomeOf(op.kind, result) === 'accepted' ? 'accepted' : 'done';
      return result;
    } catch (error) {
      if (error instanceof MarketplaceError && error.status < 500) outcome = 'refused';
      throw error;
    } finally {
      instrumentation.handler({ operation: op.kind, outcome, seconds: (performance.now() - started) / 1000 });
    }
  }

  /** Commits a finished operation: its mutation with the answer recorded for a replay, or its callback when handed over. */
  async #commit(op: PreparedOperation, operation: OperationRecord, progress: Progress, settled: Settled, run: Run): Promise<Answer> {
    if (progress.phase === 'running') progress.phase = 'committing';
    const handedOff = progress.phase === 'handedOff';
    const answer = handedOff ? this.#handedOff.get(op.key) ?? settled.answer : settled.answer;
    const delivery = handedOff ? this.#delivery(op, settled.payload, progress.handedOffAt + this.#options.pendingDeadlineMs) : undefined;
    const commit: CommitInput = { mutation: settled.mutation };
    if (delivery !== undefined) commit.delivery = delivery;
    if (op.requestId !== undefined) commit.replay = this.#replayRecord(op.requestId, answer);
    if (settled.mutation.type === 'deleteResource') commit.orphanMessage = ORPHAN_MESSAGE;
    let refusal: MarketplaceError | undefined;
    try {
      const { store } = this.#options;
      if (run.traced) refusal = commitRefusal(await this.#commitSpan(op, () => store.commitOperation(operation.key, operation.token, commit)));
      else {
        const commitNow = immediateOf(store.commitOperation);
        refusal = commitRefusal(commitNow === undefined ? await store.commitOperation(operation.key, operation.token, commit) : commitNow.call(store, operation.key, operation.token, commit));
      }
    } catch (error) {
      // Nothing was written (commits are all or nothing): report or release, then answer the error.
      return await this.#refused(op, operation, progress, error, run);
    }
    // A refused commit wrote nothing either: the entity changed under the claim (its resource was
    // deleted, its id tombstoned) or the lease was lost.
    if (refusal !== undefined) return await this.#refused(op, operation, progress, refusal, run);
    if (commit.replay !== undefined) run.recorded = true;
    if (delivery !== undefined) this.#options.onDelivery?.();
    this.#pruneReplays();
    return answer;
  }

  /**
   * A decision (404, 409), a refusal, a failure or a failed commit: the answer is final for this
   * signature either way. Under a claim it is recorded with the claim's release, in one commit, so
   * the same signed request sent again answers it and never runs the handler (issue 19); the
   * entity is untouched, so a new request (new Date, new signature) starts clean. After a hand-over
   * the marketplace waits for a callback, so the claim is closed with an `error` callback too.
   */
  async #refused(op: PreparedOperation, operation: OperationRecord, progress: Progress, error: unknown, run: Run): Promise<never> {
    if (progress.phase === 'running') progress.phase = 'committing';
    const { store, logger } = this.#options;
    const refusal = error instanceof MarketplaceError && error.status < 500 ? error : undefined;
    const handedOff = progress.phase === 'handedOff';
    // What the caller was (or is being) answered: after a hand-over, its 202.
    const answer = handedOff ? this.#handedOff.get(op.key) ?? answerOf(error) : answerOf(error);
    const commit: CommitInput = { mutation: { type: 'none' } };
    if (handedOff) {
      if (refusal === undefined) logger.error({ key: op.key, kind: op.kind, err: errorSummary(error) }, 'handed-over operation failed; reporting an error by callback');
      const delivery = this.#delivery(op, { state: 'error', message: refusal?.message ?? FAILED_MESSAGE }, progress.handedOffAt + this.#options.pendingDeadlineMs);
      if (delivery !== undefined) commit.delivery = delivery;
    }
    if (op.requestId !== undefined) commit.replay = this.#replayRecord(op.requestId, answer);
    try {
      if (commit.delivery === undefined && commit.replay === undefined) await store.releaseOperation(operation.key, operation.token);
      else {
        const result = await store.commitOperation(operation.key, operation.token, commit);
        if (result.outcome === 'committed') {
          if (commit.replay !== undefined) run.recorded = true;
          if (commit.delivery !== undefined) this.#options.onDelivery?.();
        }
      }
    } catch (closeError) {
      logger.warn({ key: op.key, err: errorSummary(closeError) }, 'could not release operation; it lapses with its lease');
    }
    // The claim was lost (or the store failed): the answer is recorded on its own, so that the
    // same signed request never runs the handler again.
    if (op.requestId !== undefined && !run.recorded) {
      await this.#record(op.requestId, answer);
      run.recorded = true;
    }
    throw error;
  }

  async #markPending(op: PreparedOperation, operation: OperationRecord, progress: Progress, message: string, run: Run): Promise<Answer> {
    if (progress.phase === 'running') progress.phase = 'committing';
    const { clock, store } = this.#options;
    const handedOff = progress.phase === 'handedOff';
    const answer: Answer = handedOff ? this.#handedOff.get(op.key)! : { status: 202, body: { message } };
    let marked: OperationRecord | undefined;
    try {
      marked = await store.markOperationPending(operation.key, operation.token, {
        message,
        deadlineAt: (handedOff ? progress.handedOffAt : clock.now()) + this.#options.pendingDeadlineMs,
        ...(op.callbackId === undefined ? {} : { callbackId: op.callbackId }),
        ...(op.callbackUrl === undefined ? {} : { callbackUrl: op.callbackUrl }),
        ...this.#replay(op, answer),
      });
    } catch (error) {
      return await this.#refused(op, operation, progress, error, run);
    }
    if (marked === undefined) return await this.#refused(op, operation, progress, new LeaseLostError(), run);
    if (op.requestId !== undefined) run.recorded = true;
    return answer;
  }

  /** Renews the claim while the handler works, on the engine's clock; returns the stop function. */
  #keepLease(op: PreparedOperation, operation: OperationRecord): () => void {
    const { store, clock, leaseMs, logger } = this.#options;
    const every = Math.max(10, Math.floor(leaseMs / 3));
    let stopped = false;
    // Most handlers finish long before the first renewal: then this timer is all the lease costs.
    let cancel = clock.after(every, renew);
    function renew(): void {
      store.renewOperation(operation.key, operation.token, clock.now() + leaseMs).then(
        (held) => {
          if (!held && !stopped) logger.error({ key: op.key, kind: op.kind }, 'operation lease lost while the handler was running');
        },
        (error: unknown) => logger.warn({ key: op.key, err: errorSummary(error) }, 'could not renew operation lease'),
      ).finally(() => {
        if (!stopped) cancel = clock.after(every, renew);
      });
    }
    return () => {
      stopped = true;
      cancel();
    };
  }

  async #waitFor(key: string, attempt: number, deadline: number): Promise<void> {
    const { clock } = this.#options;
    const remaining = Math.max(1, deadline - clock.now());
    const local = this.#inflight.get(key);
    // Another process holds it: poll with a growing interval, bounded by the wait limit.
    const ms = local === undefined ? Math.min(25 * 2 ** Math.min(attempt, 5), 500, remaining) : remaining;
    await new Promise<void>((resolve) => {
      const cancel = clock.after(ms, resolve);
      // Held here: wake as soon as it settles, whatever its outcome.
      const wake = (): void => {
        cancel();
        resolve();
      };
      local?.then(wake, wake);
    });
  }

  #replay(op: PreparedOperation, answer: RecordedAnswer): Pick<CommitInput, 'replay'> {
    return op.requestId === undefined ? {} : { replay: this.#replayRecord(op.requestId, answer) };
  }

  #replayRecord(requestId: string, answer: RecordedAnswer): NonNullable<CommitInput['replay']> {
    return { requestId, answer, expiresAt: this.#options.clock.now() + this.#options.replayTtlMs };
  }

  #delivery(op: Pick<OperationRecord, 'callbackId' | 'callbackUrl'>, payload: CallbackPayload, deadlineAt: number): NewDelivery | undefined {
    if (op.callbackId === undefined || op.callbackUrl === undefined) return undefined;
    const safe = { ...payload, message: safeMessage(payload.message) };
    return { id: randomBytes(12).toString('base64url'), callbackId: op.callbackId, url: op.callbackUrl, payload: safe, createdAt: this.#options.clock.now(), deadlineAt };
  }

  #commitSpan<T>(op: PreparedOperation | OperationRecord, fn: () => Promise<T>): Promise<T> {
    return this.#instrumentation.span('marketplace.store.commit', { kind: op.kind }, fn);
  }

  /** Replay records past their time go at most once a minute, off the request path. */
  #pruneReplays(): void {
    const { store, clock, logger } = this.#options;
    const now = clock.now();
    if (now - this.#lastReplayPrune < REPLAY_PRUNE_INTERVAL_MS) return;
    this.#lastReplayPrune = now;
    store.pruneReplays(now).catch((error: unknown) => logger.warn({ err: errorSummary(error) }, 'could not prune replay records'));
  }

  /**
   * Finishes a pending (202) operation: the outcome settled by the same table as the synchronous
   * path, committed with its callback in one store commit.
   *
   * Rejects with NotFoundError (`ERR_OPERATION_NOT_PENDING`) when no operation is pending for the
   * target: completed already, abandoned after its 24 h deadline, or, for a credential operation,
   * closed because its resource was deprovisioned (the marketplace then received an `error`
   * callback "The resource was deprovisioned").
   */
  async complete(target: CompletionTarget, completion: Completion): Promise<void> {
    const { store, clock, logger } = this.#options;
    if (target === null || typeof target !== 'object' || (target.entity !== 'resource' && target.entity !== 'credential') || typeof target.id !== 'string') {
      throw new TypeError('complete: target must be { entity: "resource" | "credential", id }');
    }
    if (completion === null || typeof completion !== 'object' || (completion.state !== 'done' && completion.state !== 'error')) {
      throw new TypeError('complete: completion must be { state: "done" | "error", message?, credentials? }');
    }
    const key = `${target.entity}:${target.id}`;
    await this.#markingPending.get(key)?.catch(() => undefined);
    const operation = await store.getOperation(key);
    // Past its deadline a pending operation is abandoned (a repeat may start it afresh, and the
    // callback could no longer be delivered): completing it would change state nobody waits for.
    if (operation === undefined || operation.state !== 'pending' || (operation.deadlineAt !== undefined && operation.deadlineAt <= clock.now())) {
      throw new NotFoundError(
        `No pending operation for ${target.entity} ${target.id} (completed already, past its deadline, or its resource was deprovisioned)`,
        'ERR_OPERATION_NOT_PENDING',
      );
    }
    const descriptor = OPERATIONS[operation.kind];
    let settled: Pick<Settled, 'mutation' | 'payload'>;
    if (completion.state === 'done') {
      const entity = (await descriptor.reload?.(store, operation.targetId)) ?? {};
      const outcome = outcomeOf(operation.kind, completion);
      if (outcome === 'accepted') throw new TypeError('complete: a completion cannot be accepted(...)');
      settled = descriptor.settle(operation.targetId, operation.request, entity, outcome, clock.now(), logger);
    } else {
      if (typeof completion.message !== 'string' || completion.message.trim().length < 3) {
        throw new TypeError('complete: an error completion needs a message of 3 to 256 characters for the user');
      }
      // A failed operation leaves nothing behind, no tombstone either: the marketplace's retry starts clean.
      settled = { mutation: { type: 'none' }, payload: { state: 'error', message: completion.message } };
    }
    const delivery = this.#delivery(operation, settled.payload, operation.deadlineAt ?? clock.now() + this.#options.pendingDeadlineMs);
    if (delivery === undefined) {
      logger.warn({ key, kind: operation.kind }, 'completed an operation that carried no callback headers: the marketplace learns the outcome when it repeats the request');
    }
    const result = await this.#commitSpan(operation, () =>
      store.commitOperation(key, operation.token, {
        mutation: settled.mutation,
        ...(delivery === undefined ? {} : { delivery }),
        ...(settled.mutation.type === 'deleteResource' ? { orphanMessage: ORPHAN_MESSAGE } : {}),
      }),
    );
    const refusal = commitRefusal(result);
    if (refusal !== undefined) throw refusal;
    logger.info({ key, kind: operation.kind, state: completion.state, callbackId: operation.callbackId }, 'long-running operation completed');
    if (delivery !== undefined) this.#options.onDelivery?.();
  }
}

/** The callback payload of an answer decided without the handler (after a hand-over). */
function payloadOf(answer: Answer, fallback: string): CallbackPayload {
  const body = (answer.body ?? {}) as { message?: unknown; credentials?: unknown };
  const message = typeof body.message === 'string' ? body.message : fallback;
  if (answer.status >= 400) return { state: 'error', message };
  return { state: 'done', message, ...(body.credentials === undefined ? {} : { credentials: body.credentials as Record<string, string> }) };
}

/** The error a commit outcome other than `committed` answers (see CommitResult); undefined for `committed`. */
function commitRefusal(result: CommitResult): MarketplaceError | undefined {
  switch (result.outcome) {
    case 'committed':
      return undefined;
    case 'lease_lost':
      return new LeaseLostError();
    case 'parent_missing':
      return new NotFoundError('Resource not found');
    case 'tombstoned':
      return entityDeletedError(result.entity);
  }
}

/** The answer an error is rendered as (the router's errorResponder renders it the same way). */
function answerOf(error: unknown): RecordedAnswer {
  const known = error instanceof MarketplaceError ? error : new InternalError();
  return { status: known.status, body: { message: known.message } };
}

function sameAnswer(a: RecordedAnswer, b: RecordedAnswer): boolean {
  return a.status === b.status && JSON.stringify(a.body) === JSON.stringify(b.body);
}

/** What `decide` sees on a replay: no catalog, no hook (they ran when the request was first answered). */
const REPLAY_ENV: TableEnv = { catalog: undefined, validate: undefined, checkCallbackUrl: undefined };

/** Error text safe for logs: class, code and message only (our messages never carry secrets). */
export function errorSummary(error: unknown): Record<string, unknown> {
  if (error instanceof MarketplaceError) return { type: error.name, code: error.code, message: error.message };
  if (error instanceof Error) return { type: error.name, message: error.message, stack: error.stack };
  return { type: typeof error };
}
