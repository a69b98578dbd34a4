import { randomBytes } from 'node:crypto';
import { ConflictError } from '../errors.js';
import type { ClaimInput, EntityKind, OperationRecord } from './types.js';

/**
 * Whether an operation still holds its key at `now`. Every adapter must apply exactly this rule
 * (SQL adapters in their WHERE clauses), so it lives in one place for the in-process ones.
 */
export function isOperationLive(operation: OperationRecord, now: number): boolean {
  if (operation.state === 'running') return operation.leaseExpiresAt > now;
  return operation.deadlineAt === undefined || operation.deadlineAt > now;
}

/** A fresh fencing token. */
export function newToken(): string {
  return randomBytes(16).toString('base64url');
}

/** The record a successful claim writes. */
export function claimedRecord(input: ClaimInput, token: string): OperationRecord {
  return {
    key: input.key,
    kind: input.kind,
    targetId: input.targetId,
    fingerprint: input.fingerprint,
    state: 'running',
    token,
    owner: input.owner,
    leaseExpiresAt: input.now + input.leaseMs,
    request: input.request,
    createdAt: input.now,
  };
}

/**
 * The refusal of a PUT for a tombstoned id, shared by the router (which checks first) and every
 * store's commitOperation (which checks again inside its transaction).
 */
export function entityDeletedError(entity: EntityKind): ConflictError {
  return new ConflictError(
    entity === 'resource'
      ? 'Resource was deprovisioned; its id cannot be provisioned again'
      : 'Credentials were deprovisioned; their id cannot be provisioned again',
    'ERR_ENTITY_DELETED',
  );
}
