import type { SecretCipher } from './crypto.js';
import type { CredentialRecord, DeliveryRecord, Features, OperationRecord, OperationRequest, ResourceRecord } from './types.js';

/**
 * Private helpers shared by the SQL adapters (sqlite.ts, postgres.ts). Not exported from the package;
 * the general option checks live in src/lib/options.ts.
 */

/** Copies `value` onto `target[key]` only when it is present, so absent fields stay absent (not `undefined`). */
export function setIfPresent<T extends object, K extends keyof T>(target: T, key: K, value: T[K] | null | undefined): void {
  if (value !== null && value !== undefined) target[key] = value;
}

/** A time or count column: a number in SQLite, possibly a string for PostgreSQL's bigint. */
type IntColumn = number | string;

export interface ResourceRow {
  id: string;
  product: string;
  plan: string;
  region: string;
  /** JSON text (SQLite) or already parsed (PostgreSQL's json type). */
  features: unknown;
  message: string;
  created_at: IntColumn;
  updated_at: IntColumn;
}

export interface CredentialRow {
  id: string;
  resource_id: string;
  sealed_values: Buffer;
  message: string;
  created_at: IntColumn;
}

export interface OperationRow {
  key: string;
  kind: OperationRecord['kind'];
  target_id: string;
  fingerprint: string;
  state: OperationRecord['state'];
  token: string;
  owner: string;
  lease_expires_at: IntColumn;
  request: unknown;
  created_at: IntColumn;
  message: string | null;
  callback_id: string | null;
  callback_url: string | null;
  deadline_at: IntColumn | null;
}

export interface DeliveryRow {
  id: string;
  callback_id: string;
  url: string;
  sealed_payload: Buffer;
  created_at: IntColumn;
  deadline_at: IntColumn;
  state: DeliveryRecord['state'];
  attempts: IntColumn;
  next_attempt_at: IntColumn;
  last_error: string | null;
  claimed_by: string | null;
  claim_expires_at: IntColumn | null;
}

const int = (value: IntColumn): number => Number(value);
const json = <T>(value: unknown): T => (typeof value === 'string' ? (JSON.parse(value) as T) : (value as T));

/**
 * Row → record conversions shared by the SQL adapters. Secret columns are opened with `cipher`,
 * bound to their row (`credential:<id>`, `delivery:<id>`) so a sealed value moved to another row
 * does not decrypt.
 */
export function recordMappers(cipher: SecretCipher) {
  return {
    toResource: (row: ResourceRow): ResourceRecord => ({
      id: row.id,
      product: row.product,
      plan: row.plan,
      region: row.region,
      features: json<Features>(row.features),
      message: row.message,
      createdAt: int(row.created_at),
      updatedAt: int(row.updated_at),
    }),

    toCredential: (row: CredentialRow): CredentialRecord => ({
      id: row.id,
      resourceId: row.resource_id,
      values: cipher.open(row.sealed_values, `credential:${row.id}`),
      message: row.message,
      createdAt: int(row.created_at),
    }),

    toOperation: (row: OperationRow): OperationRecord => {
      const operation: OperationRecord = {
        key: row.key,
        kind: row.kind,
        targetId: row.target_id,
        fingerprint: row.fingerprint,
        state: row.state,
        token: row.token,
        owner: row.owner,
        leaseExpiresAt: int(row.lease_expires_at),
        request: json<OperationRequest>(row.request),
        createdAt: int(row.created_at),
      };
      setIfPresent(operation, 'message', row.message);
      setIfPresent(operation, 'callbackId', row.callback_id);
      setIfPresent(operation, 'callbackUrl', row.callback_url);
      if (row.deadline_at !== null) operation.deadlineAt = int(row.deadline_at);
      return operation;
    },

    toDelivery: (row: DeliveryRow): DeliveryRecord => {
      const delivery: DeliveryRecord = {
        id: row.id,
        callbackId: row.callback_id,
        url: row.url,
        payload: cipher.open(row.sealed_payload, `delivery:${row.id}`),
        createdAt: int(row.created_at),
        deadlineAt: int(row.deadline_at),
        state: row.state,
        attempts: int(row.attempts),
        nextAttemptAt: int(row.next_attempt_at),
      };
      setIfPresent(delivery, 'lastError', row.last_error);
      setIfPresent(delivery, 'claimedBy', row.claimed_by);
      if (row.claim_expires_at !== null) delivery.claimExpiresAt = int(row.claim_expires_at);
      return delivery;
    },
  };
}
