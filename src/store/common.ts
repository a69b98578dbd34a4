import { randomBytes } from 'node:crypto';
import { claimShape } from '../idempotency/operations.js';
import type { CommitResult, DeliveryRecord, DeliverySummary, NewDelivery, OperationRecord } from './types.js';

/**
 * Whether an operation still holds its key at `now`. Every adapter must apply exactly this rule
 * (SQL adapters in their WHERE clauses), so it lives in one place for the in-process ones.
 */
export function isOperationLive(operation: OperationRecord, now: number): boolean {
  if (operation.state === 'running') return operation.leaseExpiresAt > now;
  return operation.deadlineAt === undefined || operation.deadlineAt > now;
}

/**
 * Where a store method keeps its synchronous form, for a store whose every step completes in the
 * calling turn (`memoryStore`'s `claimOperation` and `commitOperation`): the engine calls that form
 * instead, without a promise and a microtask turn per call on every request. It lives on the
 * method itself, so a wrapper that replaces the method (a fault injector in a test, a timing
 * proxy) drops it and is called as written (docs/stores.md).
 */
export const IMMEDIATE: unique symbol = Symbol.for('embedded-marketplace.immediate');

/** A store method with its synchronous form under {@link IMMEDIATE}. */
type WithImmediate<A extends unknown[], R> = ((...args: A) => Promise<R>) & { readonly [IMMEDIATE]: (...args: A) => R };

/**
 * The promise form of `now`, carrying `now` itself under {@link IMMEDIATE}. `now` must answer exactly
 * what the method promises; it is called with the store as `this`.
 */
export function withImmediate<A extends unknown[], R>(now: (...args: A) => R): WithImmediate<A, R> {
  // A throw of `now` becomes the rejection, as in any async method.
  // eslint-disable-next-line @typescript-eslint/require-await
  const method = async function (this: unknown, ...args: A): Promise<R> {
    return now.apply(this, args);
  };
  return Object.assign(method, { [IMMEDIATE]: now });
}

/** The synchronous form a store method carries, if any (see {@link IMMEDIATE}). */
export function immediateOf<A extends unknown[], R>(method: (...args: A) => Promise<R>): ((...args: A) => R) | undefined {
  return (method as Partial<WithImmediate<A, R>>)[IMMEDIATE];
}

const TOKEN_BYTES = 16;
// One randomBytes call per 256 tokens instead of one per claim: the call is a system call (about
// 10 µs on a small VM) and showed in the request profile. Tokens are still 128 random bits.
const TOKEN_POOL_BYTES = TOKEN_BYTES * 256;
let tokenPool = Buffer.alloc(0);
let tokenOffset = 0;

/** A fresh fencing token: 16 random bytes, base64url. */
export function newToken(): string {
  if (tokenOffset + TOKEN_BYTES > tokenPool.length) {
    tokenPool = randomBytes(TOKEN_POOL_BYTES);
    tokenOffset = 0;
  }
  const token = tokenPool.toString('base64url', tokenOffset, tokenOffset + TOKEN_BYTES);
  tokenOffset += TOKEN_BYTES;
  return token;
}

/** The one `committed` outcome, shared: commits are the hot path. */
export const COMMITTED: CommitResult = Object.freeze({ outcome: 'committed' });
/** The one `lease_lost` outcome, shared. */
export const LEASE_LOST: CommitResult = Object.freeze({ outcome: 'lease_lost' });

/** The message of the `error` callback for a pending credential operation whose resource was deleted. */
export const ORPHAN_MESSAGE = 'The resource was deprovisioned';

/**
 * The resource a credential operation belongs to, as its kind's claim shape says: the PUT's
 * `resource_id`, or for a DELETE the stored credential's resource (`credentialParent`). Undefined
 * for resource operations.
 */
export function parentOf(
  operation: Pick<OperationRecord, 'key' | 'targetId' | 'request'>,
  credentialParent: (credentialId: string) => string | undefined,
): string | undefined {
  const shape = claimShape(operation.request.kind);
  if (shape.entity !== 'credential') return undefined;
  return shape.parent === 'request' && 'resourceId' in operation.request ? operation.request.resourceId : credentialParent(operation.targetId);
}

/**
 * The `error` callback a committed `deleteResource` enqueues for an orphaned pending credential
 * operation (see CommitInput.orphanMessage); undefined when it carried no callback headers.
 */
export function orphanDelivery(operation: OperationRecord, deletedAt: number, message: string | undefined): NewDelivery | undefined {
  if (operation.callbackId === undefined || operation.callbackUrl === undefined) return undefined;
  return {
    id: newToken(),
    callbackId: operation.callbackId,
    url: operation.callbackUrl,
    payload: { state: 'error', message: message ?? ORPHAN_MESSAGE },
    createdAt: deletedAt,
    deadlineAt: operation.deadlineAt ?? deletedAt,
  };
}

/** A delivery without its payload (see DeliverySummary). */
export function summarizeDelivery(delivery: DeliveryRecord): DeliverySummary {
  const { payload: _payload, ...summary } = delivery;
  return summary;
}
