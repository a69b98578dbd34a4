import { isOperationLive } from '../store/common.js';
import type { ClaimInput, ClaimResult, EntitySnapshot, OperationRecord, RecordedAnswer, ReplayRecord } from '../store/types.js';
import { operationKey } from '../store/types.js';
import { claimShape } from './operations.js';

/**
 * The one claim rule: what a claim of the operation table finds and what it writes, as a pure
 * function of the stored state it reads. The memory and SQLite stores only read state through
 * {@link ClaimReads}, call {@link decideClaim} and apply its writes in the same atomic step; the
 * PostgreSQL store runs a port of it in PL/pgSQL (migration 5, `claim_operation_v2`), which the
 * differential test and the conformance suite hold to the same answers.
 *
 * In order, for a claim of `input.key`:
 *
 * 1. `input.requestId` has a live replay record → `replayed` with its answer; nothing written.
 * 2. A live operation holds the key:
 *    - with another fingerprint → `conflict` (409), recorded against `requestId`;
 *    - with the same fingerprint, `pending` (202 answered) → `pending` with its 202, recorded;
 *    - with the same fingerprint, `running` → `busy`: the caller waits; nothing written.
 * 3. The family holds it (parent/child exclusion, from each kind's {@link ClaimShape}):
 *    - a credential operation whose resource has a live `deprovision`: `pending` → `conflict`
 *      (recorded), `running` → `blocked` (the caller waits);
 *    - a `deprovision` while a credential operation of the resource is `running` → `blocked`.
 * 4. Otherwise → `claimed`: the caller's running record replaces whatever lapsed, and the claim
 *    reads the snapshot `decide` needs.
 *
 * "Recorded" means: when the input carries `requestId` and `replayExpiresAt`, a replay record with
 * the refusal's answer is written in the same atomic step, so the same signed request sent again
 * gets that answer and never runs the handler (issue 19).
 */

/** The reads a claim makes, each inside the claim's atomic step. Implemented by each store over its own state. */
export interface ClaimReads {
  /** The answer recorded for `requestId`, if its record is live at `now` (`expiresAt >= now`). */
  replay(requestId: string, now: number): RecordedAnswer | undefined;
  /** The operation record at `key`, live or not. */
  operation(key: string): OperationRecord | undefined;
  /** The stored credential set's resource id. */
  credentialParent(credentialId: string): string | undefined;
  /** A live `running` credential operation whose parent is `resourceId` (the oldest), if any. */
  runningChild(resourceId: string, now: number): OperationRecord | undefined;
  /** The entities `decide` needs (see EntitySnapshot). */
  snapshot(scope: SnapshotScope): EntitySnapshot;
}

/** Which entities a claimed operation's snapshot reads. */
export interface SnapshotScope {
  /** The target resource, or a credential operation's parent (undefined: none known). */
  resourceId: string | undefined;
  /** Credential operations: the target credential id. */
  credentialId: string | undefined;
  /** `deprovision`: list every credential set of `resourceId`. */
  listCredentials: boolean;
}

/** A write the claim applies atomically with its reads. */
export type ClaimWrite =
  /** Put the caller's running record at its key (replacing a lapsed one); `parentId` is stored beside it. */
  | { type: 'claim'; operation: OperationRecord; parentId: string | undefined }
  /** Record a refusal's answer against the request's signature (insert unless a live record exists). */
  | { type: 'record'; replay: ReplayRecord };

/** What {@link decideClaim} answers: the outcome to report and the writes that make it true. */
export interface ClaimDecision {
  result: ClaimResult;
  writes: ClaimWrite[];
}

/** The message of a 409 for a key (or its resource) held by another operation: by the holder's state. */
export function conflictMessage(holder: Pick<OperationRecord, 'state'>): string {
  return holder.state === 'pending' ? CONFLICT_PENDING_MESSAGE : CONFLICT_RUNNING_MESSAGE;
}
/** 409 while the holder waits for its completion (202 answered). */
export const CONFLICT_PENDING_MESSAGE = 'Another operation on this entity is pending; wait for its outcome';
/** 409 while the holder's handler runs. */
export const CONFLICT_RUNNING_MESSAGE = 'Another operation on this entity is in progress';
/** The 202 of an identical request's pending operation when it kept no message (never, in practice). */
export const PENDING_FALLBACK_MESSAGE = 'The operation is in progress';

/** The answer of a `conflict` outcome. */
export function conflictAnswer(holder: Pick<OperationRecord, 'state'>): RecordedAnswer {
  return { status: 409, body: { message: conflictMessage(holder) } };
}

/** The answer of a `pending` outcome: the holder's 202 again. */
export function pendingAnswer(holder: Pick<OperationRecord, 'message'>): RecordedAnswer {
  return { status: 202, body: { message: holder.message ?? PENDING_FALLBACK_MESSAGE } };
}

/**
 * Decides a claim from the stored state (see the module comment). Pure but for the reads it makes
 * through `reads` and the token it draws: call it inside the store's atomic step and apply
 * `writes` there too.
 *
 * @example
 * ```ts
 * // Inside one transaction of a store:
 * const { result, writes } = decideClaim(input, reads, newToken);
 * for (const write of writes) apply(write);
 * return result;
 * ```
 */
export function decideClaim(input: ClaimInput, reads: ClaimReads, token: () => string): ClaimDecision {
  const { now } = input;
  if (input.requestId !== undefined) {
    const answer = reads.replay(input.requestId, now);
    if (answer !== undefined) return { result: { outcome: 'replayed', answer }, writes: [] };
  }
  const existing = reads.operation(input.key);
  if (existing !== undefined && isOperationLive(existing, now)) {
    if (existing.fingerprint !== input.fingerprint) return refuse(input, 'conflict', existing, conflictAnswer(existing));
    if (existing.state === 'pending') return refuse(input, 'pending', existing, pendingAnswer(existing));
    return { result: { outcome: 'busy', operation: existing }, writes: [] };
  }
  const shape = claimShape(input.kind);
  const child = shape.entity === 'credential';
  const parentId = child ? (input.parentId ?? reads.credentialParent(input.targetId)) : undefined;
  const holder = child
    ? parentId === undefined ? undefined : excludingParent(reads.operation(operationKey('resource', parentId)), now)
    : shape.excludesChildren === true ? reads.runningChild(input.targetId, now) : undefined;
  if (holder !== undefined) {
    if (holder.state === 'pending') return refuse(input, 'conflict', holder, conflictAnswer(holder));
    return { result: { outcome: 'blocked', operation: holder }, writes: [] };
  }
  const operation: OperationRecord = {
    key: input.key,
    kind: input.kind,
    targetId: input.targetId,
    fingerprint: input.fingerprint,
    state: 'running',
    token: token(),
    owner: input.owner,
    leaseExpiresAt: input.now + input.leaseMs,
    request: input.request,
    createdAt: input.now,
  };
  const snapshot = reads.snapshot({
    resourceId: child ? parentId : input.targetId,
    credentialId: child ? input.targetId : undefined,
    listCredentials: shape.excludesChildren === true,
  });
  return { result: { outcome: 'claimed', operation, snapshot }, writes: [{ type: 'claim', operation, parentId }] };
}

/** The parent's operation when it keeps children out: a live one of a kind that excludes them. */
function excludingParent(operation: OperationRecord | undefined, now: number): OperationRecord | undefined {
  return operation !== undefined && claimShape(operation.kind).excludesChildren === true && isOperationLive(operation, now) ? operation : undefined;
}

function refuse(input: ClaimInput, outcome: 'conflict' | 'pending', holder: OperationRecord, answer: RecordedAnswer): ClaimDecision {
  const writes: ClaimWrite[] = [];
  if (input.requestId !== undefined && input.replayExpiresAt !== undefined) {
    writes.push({ type: 'record', replay: { requestId: input.requestId, answer, expiresAt: input.replayExpiresAt } });
  }
  return { result: { outcome, operation: holder, answer }, writes };
}

/**
 * The rule of every replay record write (a claim's refusal, a commit's answer, `recordReplay`): the
 * first answer recorded for a signature stands, so a record is written only when its signature has
 * none (an expired one is pruned, never replaced: it is never read either). Answers whether to
 * write and the answer that stands afterwards for a reader at `now`.
 *
 * @example
 * ```ts
 * const { write, standing } = decideRecord(table.get(replay.requestId), replay, now);
 * if (write) table.set(replay.requestId, replay);
 * return standing;
 * ```
 */
export function decideRecord(existing: ReplayRecord | undefined, replay: ReplayRecord, now: number): { write: boolean; standing: RecordedAnswer } {
  if (existing === undefined) return { write: true, standing: replay.answer };
  return { write: false, standing: existing.expiresAt >= now ? existing.answer : replay.answer };
}
