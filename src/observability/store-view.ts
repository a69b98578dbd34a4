/**
 * What the observability tools (metrics gauges, health, the `outbox` and `operations` commands)
 * read from a store: the optional diagnostics methods of the store contract. Nothing here ever
 * needs the store's encryption key or a credential value.
 */
import type { StoreDiagnostics } from '../store/types.js';

export type { DeliverySummary, OutboxStats, StoreDiagnostics } from '../store/types.js';

/** A store as the observability tools take it: any store, with whichever diagnostics it has (declared here, not in store/types.ts, where DiagnosableStore means a store with all of them). */
export type StoreView = Partial<StoreDiagnostics> & { readonly kind?: string };
