/**
 * `embedded-marketplace/stores`: the store contract (the interfaces an adapter implements and the
 * records it keeps), the reference adapter `memoryStore`, and the pieces every durable adapter
 * shares (sealing secrets, their errors). It loads no database driver; the bundled adapters live at
 * `embedded-marketplace/stores/sqlite` and `embedded-marketplace/stores/postgres`, and the
 * conformance suite at `embedded-marketplace/testkit` (`storeConformance`). docs/stores.md explains
 * every method.
 *
 * @example
 * ```ts
 * import type { Store, ResourceRecord } from 'embedded-marketplace/stores';
 * import { memoryStore } from 'embedded-marketplace/stores';
 *
 * const store: Store = memoryStore();
 * const resource: ResourceRecord | undefined = await store.getResource('r1');
 * ```
 */

// ---- The contract: the parts an adapter implements -------------------------------------------------
export type { Store, EntityReads, OperationStore, DeliveryStore, UsageStore, StoreDiagnostics, DiagnosableStore, ListingStore } from './types.js';
// The narrow parts one consumer needs: the usage ledger, the measures route, the health check.
export type { UsageLedgerStore, MeasuresStore, HealthProbeStore } from './types.js';

// ---- What the methods take and answer -------------------------------------------------------------
export type {
  CallbackPayload,
  ClaimInput,
  ClaimResult,
  CommitInput,
  DeliveryClaimInput,
  DeliveryRecord,
  DeliveryRetryInput,
  DeliverySummary,
  EntitySnapshot,
  Mutation,
  NewDelivery,
  OperationRecord,
  OutboxStats,
  PendingInput,
  RecordedAnswer,
  ReplayRecord,
  UsageEntry,
} from './types.js';

// ---- The records (shared with the handlers) ----------------------------------------------------------
export { operationKey } from './types.js';
export type { CredentialRecord, CredentialValues, EntityKind, Features, OperationKind, OperationRequest, ResourceRecord, Scalar } from './types.js';

// ---- The one claim rule: what an adapter's claimOperation decides, over its own reads (docs/stores.md) ----
export { decideClaim, decideRecord } from '../idempotency/claim-rule.js';
export type { ClaimDecision, ClaimReads, ClaimWrite, SnapshotScope } from '../idempotency/claim-rule.js';

// ---- The reference adapter ---------------------------------------------------------------------------
export { memoryStore } from './memory.js';

// ---- Secrets at rest: the cipher of the bundled adapters, its key and its errors ----------------------
export { createCipher, generateEncryptionKey, DecryptionError, MissingEncryptionKeyError } from './crypto.js';
export type { EncryptionKeyOption, EncryptionKeyring, SecretCipher } from './crypto.js';
