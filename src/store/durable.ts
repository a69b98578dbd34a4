import type { SecretCipher } from './crypto.js';
import { newToken } from './common.js';
import type { ClaimInput, CredentialRecord, DeliveryRecord, DeliverySummary, Features, OperationRecord, OperationRequest, OutboxStats, RecordedAnswer, ResourceRecord, UsageEntry } from './types.js';

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

/** A bytea/BLOB column: a Buffer from the drivers, or `\\x…` hex text inside PostgreSQL JSON. */
type BytesColumn = Buffer | string;

export interface CredentialRow {
  id: string;
  resource_id: string;
  sealed_values: BytesColumn;
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
  sealed_payload?: BytesColumn;
  /** A payload holding no secret, stored plain (see migration 3); the sealed column is then empty. */
  payload?: unknown;
  created_at: IntColumn;
  deadline_at: IntColumn;
  state: DeliveryRecord['state'];
  attempts: IntColumn;
  next_attempt_at: IntColumn;
  last_error: string | null;
  claimed_by: string | null;
  claim_expires_at: IntColumn | null;
}

export interface ReplayRow {
  request_id: string;
  status: IntColumn;
  sealed_body: BytesColumn | null;
  /** The body when it holds no secret (migration 4): JSON text (SQLite) or parsed (PostgreSQL). */
  body?: unknown;
  expires_at: IntColumn;
}

/**
 * How a recorded answer's body is stored: as plain JSON text when it holds no secret, sealed under
 * `replay:<request id>` when it carries credentials (the only answers that do).
 */
export function replayBody(cipher: SecretCipher, requestId: string, body: unknown): { body: string | null; sealed: Buffer | null } {
  if (body === undefined) return { body: null, sealed: null };
  const secret = typeof body === 'object' && body !== null && Object.hasOwn(body, 'credentials');
  return secret ? { body: null, sealed: cipher.seal(body, `replay:${requestId}`) } : { body: JSON.stringify(body), sealed: null };
}

const int = (value: IntColumn): number => Number(value);
const bytes = (value: BytesColumn): Buffer => (typeof value === 'string' ? Buffer.from(value.slice(2), 'hex') : value);
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
      values: cipher.open(bytes(row.sealed_values), `credential:${row.id}`),
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

    toDelivery: (row: DeliveryRow): DeliveryRecord => ({
      ...toSummary(row),
      payload: row.payload !== null && row.payload !== undefined ? json(row.payload) : cipher.open(bytes(row.sealed_payload!), `delivery:${row.id}`),
    }),

    toSummary,

    /** A recorded answer; its body plain, or sealed under `replay:<request id>` (see {@link replayBody}). */
    toAnswer: (row: ReplayRow): RecordedAnswer => {
      const answer: RecordedAnswer = { status: int(row.status) };
      if (row.body !== null && row.body !== undefined) answer.body = json(row.body);
      else if (row.sealed_body !== null) answer.body = cipher.open(bytes(row.sealed_body), `replay:${row.request_id}`);
      return answer;
    },
  };
}

/** A delivery row without its payload: what diagnostics show (no key needed). */
function toSummary(row: DeliveryRow): DeliverySummary {
  const delivery: DeliverySummary = {
    id: row.id,
    callbackId: row.callback_id,
    url: row.url,
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
}

/** A zero-length blob: the sealed column of a delivery whose payload is stored plain. */
export const EMPTY = Buffer.alloc(0);

/** The order the outbox expects claimed deliveries in (RETURNING gives no order). */
export const byDue = (a: DeliveryRecord, b: DeliveryRecord): number =>
  a.nextAttemptAt - b.nextAttemptAt || a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The named values of the `claim` statement. */
export function claimValues(input: ClaimInput, parentId: string | undefined): Record<string, unknown> {
  return {
    key: input.key,
    kind: input.kind,
    targetId: input.targetId,
    fingerprint: input.fingerprint,
    token: newToken(),
    owner: input.owner,
    leaseExpiresAt: input.now + input.leaseMs,
    request: JSON.stringify(input.request),
    now: input.now,
    parentId,
  };
}

/** A usage batch as the one JSON parameter of the `recordUsage` statement. */
export function usageJson(entries: readonly UsageEntry[]): string {
  return JSON.stringify(entries.map((e) => ({ resource_id: e.resourceId, feature: e.feature, quantity: e.quantity, at: e.at })));
}

export function usageTotals(rows: readonly { feature: string; total: unknown }[]): Record<string, number> {
  const totals = Object.create(null) as Record<string, number>;
  for (const row of rows) totals[row.feature] = Number(row.total);
  return totals;
}

export interface OutboxStatsRow {
  pending: IntColumn;
  failed: IntColumn;
  oldest: IntColumn | null;
}

export function toOutboxStats(row: OutboxStatsRow): OutboxStats {
  return { pending: int(row.pending), failed: int(row.failed), oldestPendingCreatedAt: row.oldest === null ? undefined : int(row.oldest) };
}
