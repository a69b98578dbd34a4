/**
 * What the observability tools (metrics gauges, health, the `outbox` and `operations` commands)
 * read from a store: the diagnostics methods of the store contract (contracts section 2).
 *
 * Declared here until `src/store/types.ts` carries them; when it does, this file becomes
 * `export type { DeliverySummary, OutboxStats, StoreDiagnostics } from '../store/types.js'` and
 * nothing else changes. Nothing here ever needs the store's encryption key or a credential value.
 */
import type { OperationRecord } from '../store/types.js';

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

/** The outbox in three numbers, read in one query. */
export interface OutboxStats {
  pending: number;
  failed: number;
  oldestPendingCreatedAt: number | undefined;
}

/** Optional store methods (express-session style): tools and health checks use them when present. */
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
}

/** A store as the observability tools take it: any store, with whichever diagnostics it has (declared here, not in store/types.ts, where DiagnosableStore means a store with all of them). */
export type StoreView = Partial<StoreDiagnostics> & { readonly kind?: string };
