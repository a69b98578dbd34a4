import type { DeliverySummary, StoreDiagnostics } from '../../src/observability/store-view.js';
import type { OperationRecord } from '../../src/store/types.js';

/**
 * A store that has only the diagnostics methods (`StoreDiagnostics`), kept in memory, with call
 * counts and switches to fail or hang: what the metrics, health and CLI tests drive until the real
 * stores implement the same methods.
 */
export function fakeDiagnostics(options: { now?: () => number } = {}) {
  const now = options.now ?? Date.now;
  const deliveries = new Map<string, DeliverySummary>();
  const operations: OperationRecord[] = [];
  const calls: Record<string, number> = {};
  let failure: Error | undefined;
  let pingGate: Promise<void> | undefined;
  let closed = false;

  async function enter(name: string): Promise<void> {
    calls[name] = (calls[name] ?? 0) + 1;
    if (failure !== undefined) throw failure;
  }
  const oldestFirst = (a: DeliverySummary, b: DeliverySummary) => a.createdAt - b.createdAt;

  const store: Omit<StoreDiagnostics, 'listDeliveries' | 'pruneTombstones' | 'pruneUsage'> & { kind: string } = {
    kind: 'fake',
    async listDeliverySummaries(filter = {}) {
      await enter('listDeliverySummaries');
      const all = [...deliveries.values()].filter((d) => filter.state === undefined || d.state === filter.state).sort(oldestFirst);
      return all.slice(0, filter.limit ?? all.length).map((d) => ({ ...d }));
    },
    async getDeliverySummary(id) {
      await enter('getDeliverySummary');
      const found = deliveries.get(id);
      return found === undefined ? undefined : { ...found };
    },
    async makeDeliveryDue(id, at) {
      await enter('makeDeliveryDue');
      const found = deliveries.get(id);
      if (found === undefined) return false;
      deliveries.set(id, { ...found, state: 'pending', nextAttemptAt: at, claimedBy: undefined, claimExpiresAt: undefined });
      return true;
    },
    async dropDelivery(id) {
      await enter('dropDelivery');
      return deliveries.delete(id);
    },
    async outboxStats() {
      await enter('outboxStats');
      const pending = [...deliveries.values()].filter((d) => d.state === 'pending');
      return {
        pending: pending.length,
        failed: deliveries.size - pending.length,
        oldestPendingCreatedAt: pending.length === 0 ? undefined : Math.min(...pending.map((d) => d.createdAt)),
      };
    },
    async listPendingOperations(limit) {
      await enter('listPendingOperations');
      return [...operations].sort((a, b) => a.createdAt - b.createdAt).slice(0, limit);
    },
    async countPendingOperations() {
      await enter('countPendingOperations');
      return operations.length;
    },
    async ping() {
      await enter('ping');
      await pingGate;
    },
  };

  return Object.assign(store, {
    calls,
    isClosed(): boolean {
      return closed;
    },
    async close() {
      closed = true;
    },
    addDelivery(partial: Partial<DeliverySummary> & { id: string }): DeliverySummary {
      const createdAt = partial.createdAt ?? now();
      const delivery: DeliverySummary = {
        callbackId: `cb${partial.id}`,
        url: 'https://connector.example/v1/callbacks/cb',
        state: 'pending',
        attempts: 0,
        nextAttemptAt: createdAt,
        deadlineAt: createdAt + 24 * 3_600_000,
        ...partial,
        createdAt,
      };
      deliveries.set(delivery.id, delivery);
      return delivery;
    },
    addOperation(partial: Partial<OperationRecord> & { targetId: string }): OperationRecord {
      const createdAt = partial.createdAt ?? now();
      const operation: OperationRecord = {
        key: `resource:${partial.targetId}`,
        kind: 'provision',
        fingerprint: 'fp',
        state: 'pending',
        token: 'fencing-token-never-shown',
        owner: 'host:1:abcd',
        leaseExpiresAt: createdAt,
        request: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'aws::us-east-1', features: {} },
        message: 'Knitting',
        deadlineAt: createdAt + 24 * 3_600_000,
        ...partial,
        createdAt,
      };
      operations.push(operation);
      return operation;
    },
    delivery(id: string): DeliverySummary | undefined {
      return deliveries.get(id);
    },
    dropAll(): void {
      deliveries.clear();
      operations.length = 0;
    },
    failWith(error: Error | undefined): void {
      failure = error;
    },
    /** Until `release` is called, `ping` does not answer. */
    holdPing(): () => void {
      let release!: () => void;
      pingGate = new Promise<void>((resolve) => (release = resolve));
      return () => {
        pingGate = undefined;
        release();
      };
    },
  });
}

export type FakeDiagnostics = ReturnType<typeof fakeDiagnostics>;
