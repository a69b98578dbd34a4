/**
 * The store contract. The operation table (src/idempotency) owns every decision (201/204/409/404/202);
 * a store only offers the few atomic steps those decisions need (a claim that reads what the decision
 * needs, a commit), so that an adapter is small and the rules live in one place.
 * docs/stores.md explains each method; src/testkit/conformance/ (exported as `storeConformance` from
 * `embedded-marketplace/testkit`) is the conformance suite every adapter
 * passes.
 *
 * Times are milliseconds since the epoch and are always passed in by the caller, never read from a
 * clock inside the store, so that every adapter behaves the same under a test clock.
 */

import type { CredentialRecord, CredentialValues, EntityKind, OperationKind, OperationRequest, ResourceRecord } from '../domain/records.js';

export type { Scalar, Features, CredentialValues, ResourceRecord, CredentialRecord, OperationKind, OperationRequest, EntityKind } from '../domain/records.js';
export { operationKey } from '../domain/records.js';

/**
 * An operation in progress on one entity. There is at most one per `key` at a time: this is the
 * lock that makes identical concurrent requests run the provider's handler once.
 *
 * - `running`: a process is executing the handler now. It holds a lease (`leaseExpiresAt`) that it
 *   renews while it works; a process that crashes stops renewing, so the lease lapses and a retry
 *   takes the operation over. A crash therefore never leaves an operation reported as done.
 * - `pending`: the handler answered 202; the operation waits for the provider to complete it (and
 *   the callback to be sent). It stays until completed or until `deadlineAt` (24 h) passes.
 */
export interface OperationRecord {
  /** `resource:<id>` or `credential:<id>`. */
  key: string;
  kind: OperationKind;
  /** The resource or credential id the operation acts on. */
  targetId: string;
  /** Canonical text of the request's compared properties: equal fingerprints are the same request. */
  fingerprint: string;
  state: 'running' | 'pending';
  /** Fencing token, fresh on every claim; every later step must present it. */
  token: string;
  /** Identifies the claiming process (for logs and diagnostics). */
  owner: string;
  /** When a `running` claim lapses. */
  leaseExpiresAt: number;
  request: OperationRequest;
  createdAt: number;
  /** Set once `pending`: the 202 message replayed to identical repeats. */
  message?: string;
  /** Set once `pending` when the marketplace sent callback headers. */
  callbackId?: string;
  callbackUrl?: string;
  /** Set once `pending`: after this the operation is abandoned and a repeat may start it afresh. */
  deadlineAt?: number;
}

export interface ClaimInput {
  key: string;
  kind: OperationKind;
  targetId: string;
  fingerprint: string;
  request: OperationRequest;
  owner: string;
  now: number;
  leaseMs: number;
  /**
   * The parent resource of a credential operation. Credential PUT: the body's `resource_id`.
   * Credential DELETE: omitted; the store uses the stored credential's `resourceId`.
   * Resource operations: omitted (the target is the resource).
   */
  parentId?: string;
  /**
   * The signed request's own signature (the first X-Signature field). When a replay record holds it,
   * the claim answers `replayed` with the recorded answer and claims nothing.
   */
  requestId?: string;
  /**
   * With `requestId`: when an answer the claim itself records (a `conflict` or `pending` refusal,
   * see ClaimResult) expires. Without it the claim records nothing.
   */
  replayExpiresAt?: number;
}

/** An answer as it was sent. Durable stores seal bodies that hold credentials. */
export interface RecordedAnswer {
  status: number;
  body?: unknown;
}

/**
 * The answer to one executed signed request, keyed by its signature, so that the same request sent
 * again (captured and replayed within the Date window) answers the same and changes nothing.
 */
export interface ReplayRecord {
  requestId: string;
  answer: RecordedAnswer;
  /** Kept at least until then (at least twice the signature tolerance); pruned after. */
  expiresAt: number;
}

/**
 * What the operation table decides from, read by the claim in the same atomic step that takes the
 * operation, so the decision and the commit see the same state.
 */
export interface EntitySnapshot {
  /** Resource operations: the target resource. Credential operations: the parent resource. */
  resource: ResourceRecord | undefined;
  /** Whether that resource id has a tombstone. */
  resourceDeleted: boolean;
  /** Credential operations only: the target credential set. */
  credential: CredentialRecord | undefined;
  /** Credential operations only: whether the target credential id has a tombstone. */
  credentialDeleted: boolean;
  /** `deprovision` only (empty otherwise): every credential set of the resource when the claim is taken. */
  credentials: CredentialRecord[];
}

/**
 * What a claim found, as the one claim rule (src/idempotency/claim-rule.ts) decides it. A store
 * reports it; only the engine turns it into an answer, a wait or an error.
 *
 * - `replayed`: `requestId` was already answered; nothing is claimed; `answer` is what it got.
 * - `claimed`: the caller now holds the operation (a new record, or one whose running lease lapsed
 *   or whose pending deadline passed, replaced whole by the caller's), with the entities it decides from.
 * - `busy`: a live `running` operation with the same fingerprint holds the key (an identical
 *   request is running): the caller waits for it.
 * - `blocked`: the key is free but a `running` operation of its family holds it back (parent/child
 *   exclusion): a credential operation while `resource:<parent>` runs a `deprovision`, or a
 *   `deprovision` while a credential operation of the resource runs. The caller waits.
 * - `pending`: a live `pending` (202) operation with the same fingerprint holds the key: `answer`
 *   is its 202, recorded against `requestId` (when given with `replayExpiresAt`) in the same step.
 * - `conflict`: refused: a live operation with another fingerprint holds the key, or a `pending`
 *   `deprovision` holds the credential operation's resource. `answer` is the 409, recorded like
 *   `pending`'s.
 * - `unavailable`: the key kept changing hands during the claim (PostgreSQL under a storm of
 *   lapsing claims): nothing was written; retrying later is safe.
 *
 * `operation` is always the holder (for `claimed`, the caller's new record).
 */
export type ClaimResult =
  | { outcome: 'replayed'; answer: RecordedAnswer }
  | { outcome: 'claimed'; operation: OperationRecord; snapshot: EntitySnapshot }
  | { outcome: 'busy'; operation: OperationRecord }
  | { outcome: 'blocked'; operation: OperationRecord }
  | { outcome: 'pending'; operation: OperationRecord; answer: RecordedAnswer }
  | { outcome: 'conflict'; operation: OperationRecord; answer: RecordedAnswer }
  | { outcome: 'unavailable' };

/**
 * What a commit did. Only `committed` wrote anything; on every other outcome nothing was written
 * and the operation is still as it was (held by the caller, unless `lease_lost`).
 *
 * - `lease_lost`: the token no longer holds the key (the lease lapsed and another process took it).
 * - `parent_missing`: a `putCredential` whose resource does not exist.
 * - `tombstoned`: a `putResource` or `putCredential` for an id that has a tombstone.
 */
export type CommitResult =
  | { outcome: 'committed' }
  | { outcome: 'lease_lost' }
  | { outcome: 'parent_missing' }
  | { outcome: 'tombstoned'; entity: EntityKind };

/**
 * The entity change an operation commits, applied atomically with releasing the operation.
 *
 * Deletions leave a **tombstone** (entity kind, id, `deletedAt`): marketplace ids are globally
 * unique and never reused, so a PUT for a deleted id can only be a replay of a captured request,
 * and the store refuses to re-create the entity (see {@link Store.isDeleted}).
 */
export type Mutation =
  | { type: 'none' }
  /** Commits nothing and answers `tombstoned` when the resource id has a tombstone. */
  | { type: 'putResource'; resource: ResourceRecord }
  /**
   * Removes the resource and every credential of it, and records a tombstone for the resource and
   * for each of those credentials, at `deletedAt`. A missing resource is no error (its tombstone is
   * still recorded); an existing tombstone keeps its first `deletedAt`.
   */
  | { type: 'deleteResource'; id: string; deletedAt: number }
  /**
   * Commits nothing and answers `parent_missing` when the resource does not exist (checked first),
   * or `tombstoned` when the credential id has a tombstone.
   */
  | { type: 'putCredential'; credential: CredentialRecord }
  /** Removes the set and records its tombstone at `deletedAt`, as `deleteResource` does. */
  | { type: 'deleteCredential'; id: string; deletedAt: number };

/** What a completed long-running operation reports to the marketplace (gaps.md, callbacks). */
export interface CallbackPayload {
  state: 'done' | 'error';
  message: string;
  credentials?: CredentialValues;
}

/** A callback to deliver, enqueued in the same transaction as the state change it reports. */
export interface NewDelivery {
  id: string;
  callbackId: string;
  url: string;
  payload: CallbackPayload;
  createdAt: number;
  /** The 24 h callback deadline of section 8, counted from the 202. */
  deadlineAt: number;
}

export interface DeliveryRecord extends NewDelivery {
  state: 'pending' | 'failed';
  attempts: number;
  nextAttemptAt: number;
  lastError?: string;
  /** The process holding the delivery and until when; another may claim it after that. */
  claimedBy?: string;
  claimExpiresAt?: number;
}

export interface CommitInput {
  mutation: Mutation;
  /** The callback reporting this commit (long-running operations). */
  delivery?: NewDelivery;
  /** The answer to record for the signed request that ran the operation. */
  replay?: ReplayRecord;
  /**
   * With a `deleteResource` mutation: every *pending* credential operation of that resource is
   * removed in the same transaction, and each that carried callback headers gets an `error`
   * delivery with this message (the engine passes "The resource was deprovisioned"), created at
   * the deletion time with the operation's own deadline.
   */
  orphanMessage?: string;
}

export interface PendingInput {
  message: string;
  callbackId?: string;
  callbackUrl?: string;
  deadlineAt: number;
  /** The 202 to record for the signed request: the same request again answers 202 again. */
  replay?: ReplayRecord;
}

export interface UsageEntry {
  resourceId: string;
  feature: string;
  quantity: number;
  at: number;
}

export interface DeliveryClaimInput {
  owner: string;
  now: number;
  leaseMs: number;
  limit: number;
}

export interface DeliveryRetryInput {
  attempts: number;
  nextAttemptAt: number;
  lastError: string;
}

/** A delivery as operators see it: never a credential value, never needs the encryption key. */
export interface DeliverySummary {
  id: string;
  callbackId: string;
  url: string;
  state: 'pending' | 'failed';
  attempts: number;
  nextAttemptAt: number;
  lastError?: string;
  createdAt: number;
  deadlineAt: number;
  claimedBy?: string;
  claimExpiresAt?: number;
}

export interface OutboxStats {
  pending: number;
  failed: number;
  oldestPendingCreatedAt: number | undefined;
}

/** Reads of provisioned entities (the measures route and the tests read them directly). */
export interface EntityReads {
  getResource(id: string): Promise<ResourceRecord | undefined>;
  getCredential(id: string): Promise<CredentialRecord | undefined>;
  /** Credential sets of a resource, oldest first. */
  listCredentials(resourceId: string): Promise<CredentialRecord[]>;
}

/**
 * The operation lock, entity changes, tombstones and replay records. Every rule of
 * {@link ClaimResult} (replay, liveness, refusals, parent/child exclusion) is applied inside
 * `claimOperation`, atomically, in one round trip. Methods answer outcomes, never HTTP errors: they
 * reject only when the database cannot be reached (ServiceUnavailableError) or on a bug.
 */
export interface OperationStore {
  /** Take the operation for `input.key`, reading what the decision needs (see ClaimResult). One round trip. */
  claimOperation(input: ClaimInput): Promise<ClaimResult>;
  getOperation(key: string): Promise<OperationRecord | undefined>;
  /** Extend a running claim. False when the token no longer holds the key (lease lost). */
  renewOperation(key: string, token: string, leaseExpiresAt: number): Promise<boolean>;
  /** Drop a claim without any change. No-op when the token lost the key. */
  releaseOperation(key: string, token: string): Promise<void>;
  /**
   * Turn a running claim into a pending operation (the handler answered 202), writing
   * `pending.replay` in the same transaction. Answers the pending record, or `undefined` (nothing
   * written) when the token lost the key.
   */
  markOperationPending(key: string, token: string, pending: PendingInput): Promise<OperationRecord | undefined>;
  /**
   * In one transaction and one round trip: apply the mutation (deletions with their tombstones, and
   * for `deleteResource` the orphaned pending credential operations, see CommitInput), delete the
   * operation, enqueue the delivery and write the replay record. Answers `committed`, or the reason
   * nothing was written (see CommitResult).
   */
  commitOperation(key: string, token: string, commit: CommitInput): Promise<CommitResult>;
  /**
   * Record the answer to a signed request that no claim or commit recorded (a refusal before any
   * claim, a 503 while waiting), unless a live record for `replay.requestId` exists already (the
   * first answer stays; an expired one is replaced). Answers the record that stands: the one given,
   * or the earlier one.
   */
  recordReplay(replay: ReplayRecord, now: number): Promise<RecordedAnswer>;
  /**
   * Whether a tombstone exists for this entity: it was deleted by a committed `deleteResource` or
   * `deleteCredential` (a resource's deletion tombstones its credentials too). False for an id never
   * seen, for one that exists, and for one whose provisioning failed (nothing was ever written).
   */
  isDeleted(entity: EntityKind, id: string): Promise<boolean>;
  /** Delete replay records with `expiresAt < now`; answers how many. */
  pruneReplays(now: number): Promise<number>;
}

/**
 * The outbox's queue of callbacks: all that `createOutbox` takes.
 *
 * @example
 * ```ts
 * import { createOutbox, type DeliveryStore } from 'embedded-marketplace';
 * const deliveries: DeliveryStore = store; // any Store fits
 * const outbox = createOutbox({ store: deliveries, send });
 * ```
 */
export interface DeliveryStore {
  /** Claim up to `limit` deliveries that are due and not held by a live claim. */
  claimDeliveries(input: DeliveryClaimInput): Promise<DeliveryRecord[]>;
  /** The delivery was answered as expected: remove it. */
  completeDelivery(id: string, owner: string): Promise<void>;
  /** Schedule another attempt and release the claim. */
  retryDelivery(id: string, owner: string, retry: DeliveryRetryInput): Promise<void>;
  /** Give up (a final 4xx, or past the deadline): kept with state `failed` for inspection. */
  failDelivery(id: string, owner: string, reason: string): Promise<void>;
}

/**
 * Usage for the measures route: entries are appended, never changed; totals are a function of the
 * entries alone.
 *
 * @example
 * ```ts
 * await store.recordUsage([{ resourceId: 'r1', feature: 'requests', quantity: 1, at: Date.now() }]);
 * const totals = await store.sumUsage('r1', Date.UTC(2026, 0, 1), Date.UTC(2026, 1, 1));
 * ```
 */
export interface UsageStore {
  recordUsage(entries: readonly UsageEntry[]): Promise<void>;
  /** Totals by feature for `from <= at < to`. */
  sumUsage(resourceId: string, from: number, to: number): Promise<Record<string, number>>;
  /** Whether any usage exists for the resource (to tell 204 from a 200 with zeros). */
  hasUsage(resourceId: string, from: number, to: number): Promise<boolean>;
}

/**
 * Optional methods (express-session style): operator tools, health checks and tests use them when
 * present. None of them decrypts anything.
 */
export interface StoreDiagnostics {
  /** Oldest first. */
  listDeliverySummaries(filter?: { state?: 'pending' | 'failed'; limit?: number }): Promise<DeliverySummary[]>;
  getDeliverySummary(id: string): Promise<DeliverySummary | undefined>;
  /** Make a pending or failed delivery due at `now` (state pending, claim cleared). False if unknown. */
  makeDeliveryDue(id: string, now: number): Promise<boolean>;
  /** Delete a delivery. False if unknown. */
  dropDelivery(id: string): Promise<boolean>;
  outboxStats(): Promise<OutboxStats>;
  /** Pending (202) operations, oldest first. */
  listPendingOperations(limit: number): Promise<OperationRecord[]>;
  countPendingOperations(): Promise<number>;
  /** A trivial round trip (SELECT 1), for health checks. */
  ping(): Promise<void>;
  /** Deliveries in any state with their payloads (credentials included): for tests. */
  listDeliveries(): Promise<DeliveryRecord[]>;
  /**
   * Delete tombstones with `deletedAt < before`; answers how many. Only safe beyond the signature
   * replay window: a captured PUT for a pruned id would provision it again. A signed Date may run
   * `toleranceMs` ahead and stays valid `toleranceMs` after, so `before` must be at most
   * `now - 2 * toleranceMs` (10 minutes by default); keeping a day or more costs little.
   */
  pruneTombstones(before: number): Promise<number>;
  /** Delete usage entries with `at < before`; answers how many. */
  pruneUsage(before: number): Promise<number>;
}

/**
 * Persistence for the provider side: entity reads, operations, deliveries and usage are required;
 * diagnostics are optional. Every method may reject with ServiceUnavailableError when the backing
 * database cannot be reached; the router answers 503 and nothing partial is left behind.
 */
export interface Store extends EntityReads, OperationStore, DeliveryStore, UsageStore, Partial<StoreDiagnostics> {
  /** `memory`, `sqlite`, `postgres`, …: for logs. */
  readonly kind: string;
  close(): Promise<void>;
}

/** A store with every diagnostic method. */
export type DiagnosableStore = Store & StoreDiagnostics;

/**
 * The narrow parts consumers take instead of the whole {@link Store}: each names the methods its
 * consumer calls, so a store, a fake or a wrapper offering only those fits. Any `Store` fits each.
 *
 * What the usage ledger (`recordUsage` and its pruning) takes: {@link UsageStore}, and `pruneUsage`
 * when the store has it (without it, nothing is pruned).
 *
 * @example
 * ```ts
 * import type { UsageLedgerStore } from 'embedded-marketplace';
 * const ledgerOnly: UsageLedgerStore = { recordUsage, sumUsage, hasUsage };
 * ```
 */
export type UsageLedgerStore = UsageStore & Partial<Pick<StoreDiagnostics, 'pruneUsage'>>;

/**
 * What the measures route reads: the resource (404 when unknown) and the usage totals.
 *
 * @example
 * ```ts
 * import type { MeasuresStore } from 'embedded-marketplace';
 * const reads: MeasuresStore = store; // any Store fits
 * ```
 */
export type MeasuresStore = Pick<EntityReads, 'getResource'> & UsageStore;

/**
 * What a health check reads: `ping()` (else a lookup of an id that cannot exist with `getResource`)
 * and `outboxStats()` when present (else the outbox is reported as unknown, `null`).
 *
 * @example
 * ```ts
 * import { createHealthCheck, type HealthProbeStore } from 'embedded-marketplace';
 * const probe: HealthProbeStore = { ping: () => pool.query('SELECT 1').then(() => undefined) };
 * const health = createHealthCheck({ store: probe });
 * ```
 */
export type HealthProbeStore = Partial<Pick<StoreDiagnostics, 'ping' | 'outboxStats'>> & Partial<Pick<EntityReads, 'getResource'>> & { readonly kind?: string };

/** A store with the listing and pruning diagnostics the bundled adapters have always had. */
export type ListingStore = Store & Pick<StoreDiagnostics, 'listDeliveries' | 'listPendingOperations' | 'pruneTombstones' | 'pruneUsage'>;
