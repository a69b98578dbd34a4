import { decideClaim, decideRecord, type ClaimReads } from '../idempotency/claim-rule.js';
import { COMMITTED, isOperationLive, LEASE_LOST, newToken, orphanDelivery, parentOf, summarizeDelivery, withImmediate } from './common.js';
import type {
  ClaimInput,
  ClaimResult,
  CommitInput,
  CommitResult,
  CredentialRecord,
  DeliveryClaimInput,
  DeliveryRecord,
  DeliveryRetryInput,
  DiagnosableStore,
  EntityKind,
  EntitySnapshot,
  OperationRecord,
  PendingInput,
  RecordedAnswer,
  ReplayRecord,
  ResourceRecord,
  UsageEntry,
} from './types.js';
import { operationKey } from './types.js';

/**
 * The reference store: everything in this process's memory, lost on exit. Right for tests and
 * demos; a provider in production wants `sqliteStore` or `postgresStore`. Every method completes
 * synchronously inside its promise, which is what makes each one atomic within the process.
 *
 * Records are deep-copied in and out (their free-form parts with structuredClone's result) so
 * callers can never mutate stored state by accident, the same guarantee a database gives.
 *
 * @example
 * ```ts
 * import { marketplaceRouter, memoryStore } from 'embedded-marketplace';
 * app.use(marketplaceRouter({ store: memoryStore(), handlers }));
 * ```
 */
export function memoryStore(): DiagnosableStore {
  const resources = new Map<string, ResourceRecord>();
  const credentials = new Map<string, CredentialRecord>();
  const credentialsByResource = new Map<string, Set<string>>();
  const operations = new Map<string, OperationRecord>();
  const deliveries = new Map<string, DeliveryRecord>();
  const usage = new Map<string, UsageEntry[]>();
  // `<entity>:<id>` → deletedAt. Kept for good: ids are never reused (see Store.isDeleted).
  const tombstones = new Map<string, number>();
  // Signature → recorded answer (see ClaimInput.requestId).
  const replays = new Map<string, ReplayRecord>();

  function bury(entity: EntityKind, id: string, deletedAt: number): void {
    const key = operationKey(entity, id);
    if (!tombstones.has(key)) tombstones.set(key, deletedAt);
  }

  function holding(key: string, token: string): OperationRecord | undefined {
    const operation = operations.get(key);
    return operation !== undefined && operation.token === token ? operation : undefined;
  }

  function deleteCredential(id: string): void {
    const credential = credentials.get(id);
    if (credential === undefined) return;
    credentials.delete(id);
    credentialsByResource.get(credential.resourceId)?.delete(id);
  }

  /** The resource a credential operation belongs to (see parentOf), from this store's state. */
  function parentOfOperation(operation: Pick<OperationRecord, 'key' | 'targetId' | 'request'>): string | undefined {
    return parentOf(operation, (id) => credentials.get(id)?.resourceId);
  }

  function listOf(resourceId: string): CredentialRecord[] {
    const ids = credentialsByResource.get(resourceId) ?? new Set<string>();
    return [...ids].map((id) => copyCredential(credentials.get(id)!)).sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  // The state the claim rule reads (src/idempotency/claim-rule.ts); records go out as copies.
  const reads: ClaimReads = {
    replay(requestId, now) {
      const replay = replays.get(requestId);
      return replay !== undefined && replay.expiresAt >= now ? copyAnswer(replay.answer) : undefined;
    },
    operation(key) {
      const operation = operations.get(key);
      return operation === undefined ? undefined : copyOperation(operation);
    },
    credentialParent: (id) => credentials.get(id)?.resourceId,
    runningChild(resourceId, now) {
      let oldest: OperationRecord | undefined;
      for (const operation of operations.values()) {
        if (!operation.key.startsWith('credential:') || operation.state !== 'running' || !isOperationLive(operation, now)) continue;
        if (parentOfOperation(operation) !== resourceId) continue;
        if (oldest === undefined || operation.createdAt < oldest.createdAt || (operation.createdAt === oldest.createdAt && operation.key < oldest.key)) oldest = operation;
      }
      return oldest === undefined ? undefined : copyOperation(oldest);
    },
    snapshot(scope): EntitySnapshot {
      const resource = scope.resourceId === undefined ? undefined : resources.get(scope.resourceId);
      const credential = scope.credentialId === undefined ? undefined : credentials.get(scope.credentialId);
      return {
        resource: resource === undefined ? undefined : copyResource(resource),
        resourceDeleted: scope.resourceId !== undefined && tombstones.has(operationKey('resource', scope.resourceId)),
        credential: credential === undefined ? undefined : copyCredential(credential),
        credentialDeleted: scope.credentialId !== undefined && tombstones.has(operationKey('credential', scope.credentialId)),
        credentials: scope.listCredentials && scope.resourceId !== undefined ? listOf(scope.resourceId) : [],
      };
    },
  };

  /** Removes the pending credential operations of a deleted resource and reports each as an error. */
  function orphan(resourceId: string, deletedAt: number, message: string | undefined): void {
    for (const operation of [...operations.values()]) {
      if (operation.state !== 'pending' || !operation.key.startsWith('credential:') || parentOfOperation(operation) !== resourceId) continue;
      operations.delete(operation.key);
      const delivery = orphanDelivery(operation, deletedAt, message);
      if (delivery !== undefined) deliveries.set(delivery.id, { ...delivery, state: 'pending', attempts: 0, nextAttemptAt: delivery.createdAt });
    }
  }

  /** Writes `replay` unless its signature has a record (the first answer stands); answers (a copy of) the one that stands. */
  function record(replay: ReplayRecord, now: number): RecordedAnswer {
    return copyAnswer(keep(replay, now));
  }

  /** {@link record} for callers that do not use the answer: no copy of it is made. */
  function keep(replay: ReplayRecord, now: number): RecordedAnswer {
    const { write, standing } = decideRecord(replays.get(replay.requestId), replay, now);
    if (write) replays.set(replay.requestId, copyReplay(replay));
    return standing;
  }

  /** The claim (src/idempotency/claim-rule.ts): the rule's reads and its writes in one synchronous step. */
  function claimNow(input: ClaimInput): ClaimResult {
    const { result, writes } = decideClaim(input, reads, newToken);
    for (const write of writes) {
      if (write.type === 'claim') operations.set(write.operation.key, copyOperation(write.operation));
      else keep(write.replay, input.now);
    }
    return result;
  }

  /** The commit (see OperationStore.commitOperation), whole or not at all, in one synchronous step. */
  function commitNow(key: string, token: string, commit: CommitInput): CommitResult {
    if (holding(key, token) === undefined) return LEASE_LOST;
    const { mutation } = commit;
    // Check every precondition before the first write: a commit applies whole or not at all.
    if (mutation.type === 'putCredential' && !resources.has(mutation.credential.resourceId)) return { outcome: 'parent_missing' };
    if (mutation.type === 'putResource' && tombstones.has(operationKey('resource', mutation.resource.id))) return { outcome: 'tombstoned', entity: 'resource' };
    if (mutation.type === 'putCredential' && tombstones.has(operationKey('credential', mutation.credential.id))) return { outcome: 'tombstoned', entity: 'credential' };
    switch (mutation.type) {
      case 'none':
        break;
      case 'putResource':
        resources.set(mutation.resource.id, copyResource(mutation.resource));
        break;
      case 'deleteResource': {
        orphan(mutation.id, mutation.deletedAt, commit.orphanMessage);
        resources.delete(mutation.id);
        bury('resource', mutation.id, mutation.deletedAt);
        for (const credentialId of credentialsByResource.get(mutation.id) ?? []) {
          credentials.delete(credentialId);
          bury('credential', credentialId, mutation.deletedAt);
        }
        credentialsByResource.delete(mutation.id);
        break;
      }
      case 'putCredential': {
        const credential = copyCredential(mutation.credential);
        credentials.set(credential.id, credential);
        let ids = credentialsByResource.get(credential.resourceId);
        if (ids === undefined) credentialsByResource.set(credential.resourceId, (ids = new Set()));
        ids.add(credential.id);
        break;
      }
      case 'deleteCredential':
        deleteCredential(mutation.id);
        bury('credential', mutation.id, mutation.deletedAt);
        break;
    }
    operations.delete(key);
    if (commit.delivery !== undefined) {
      deliveries.set(commit.delivery.id, { ...copy(commit.delivery), state: 'pending', attempts: 0, nextAttemptAt: commit.delivery.createdAt });
    }
    if (commit.replay !== undefined) keep(commit.replay, Number.NEGATIVE_INFINITY);
    return COMMITTED;
  }

  function ownedDelivery(id: string, owner: string): DeliveryRecord | undefined {
    const delivery = deliveries.get(id);
    return delivery !== undefined && delivery.claimedBy === owner ? delivery : undefined;
  }

  return {
    kind: 'memory',

    async getResource(id) {
      const record = resources.get(id);
      return record === undefined ? undefined : copyResource(record);
    },

    async getCredential(id) {
      const record = credentials.get(id);
      return record === undefined ? undefined : copyCredential(record);
    },

    async listCredentials(resourceId) {
      return listOf(resourceId);
    },

    async getOperation(key) {
      const operation = operations.get(key);
      return operation === undefined ? undefined : copyOperation(operation);
    },

    async listPendingOperations(limit) {
      return [...operations.values()]
        .filter((operation) => operation.state === 'pending')
        .sort((a, b) => a.createdAt - b.createdAt)
        .slice(0, limit)
        .map(copyOperation);
    },

    // Both complete in the calling turn: the engine calls the synchronous forms (see IMMEDIATE).
    claimOperation: withImmediate(claimNow),

    async renewOperation(key, token, leaseExpiresAt) {
      const operation = holding(key, token);
      if (operation === undefined || operation.state !== 'running') return false;
      operation.leaseExpiresAt = leaseExpiresAt;
      return true;
    },

    async releaseOperation(key, token) {
      if (holding(key, token) !== undefined) operations.delete(key);
    },

    async markOperationPending(key, token, pending: PendingInput) {
      const operation = holding(key, token);
      if (operation === undefined) return undefined;
      operation.state = 'pending';
      operation.message = pending.message;
      operation.deadlineAt = pending.deadlineAt;
      if (pending.callbackId !== undefined) operation.callbackId = pending.callbackId;
      if (pending.callbackUrl !== undefined) operation.callbackUrl = pending.callbackUrl;
      if (pending.replay !== undefined) keep(pending.replay, Number.NEGATIVE_INFINITY);
      return copyOperation(operation);
    },

    commitOperation: withImmediate(commitNow),

    async recordReplay(replay, now) {
      return record(replay, now);
    },

    async pruneReplays(now) {
      let removed = 0;
      for (const [requestId, replay] of replays) {
        if (replay.expiresAt < now) {
          replays.delete(requestId);
          removed += 1;
        }
      }
      return removed;
    },

    async isDeleted(entity, id) {
      return tombstones.has(operationKey(entity, id));
    },

    async pruneTombstones(before) {
      let removed = 0;
      for (const [key, deletedAt] of tombstones) {
        if (deletedAt < before) {
          tombstones.delete(key);
          removed += 1;
        }
      }
      return removed;
    },

    async claimDeliveries(input: DeliveryClaimInput) {
      const due = [...deliveries.values()]
        .filter((d) => d.state === 'pending' && d.nextAttemptAt <= input.now && (d.claimExpiresAt === undefined || d.claimExpiresAt <= input.now))
        .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt)
        .slice(0, input.limit);
      for (const delivery of due) {
        delivery.claimedBy = input.owner;
        delivery.claimExpiresAt = input.now + input.leaseMs;
      }
      return due.map(copy);
    },

    async completeDelivery(id, owner) {
      if (ownedDelivery(id, owner) !== undefined) deliveries.delete(id);
    },

    async retryDelivery(id, owner, retry: DeliveryRetryInput) {
      const delivery = ownedDelivery(id, owner);
      if (delivery === undefined) return;
      delivery.attempts = retry.attempts;
      delivery.nextAttemptAt = retry.nextAttemptAt;
      delivery.lastError = retry.lastError;
      delete delivery.claimedBy;
      delete delivery.claimExpiresAt;
    },

    async failDelivery(id, owner, reason) {
      const delivery = ownedDelivery(id, owner);
      if (delivery === undefined) return;
      delivery.state = 'failed';
      delivery.lastError = reason;
      delete delivery.claimedBy;
      delete delivery.claimExpiresAt;
    },

    async listDeliveries() {
      return [...deliveries.values()].map(copy);
    },

    async listDeliverySummaries(filter = {}) {
      return [...deliveries.values()]
        .filter((d) => filter.state === undefined || d.state === filter.state)
        .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
        .slice(0, filter.limit ?? Number.POSITIVE_INFINITY)
        .map(summarizeDelivery);
    },

    async getDeliverySummary(id) {
      const delivery = deliveries.get(id);
      return delivery === undefined ? undefined : summarizeDelivery(delivery);
    },

    async makeDeliveryDue(id, now) {
      const delivery = deliveries.get(id);
      if (delivery === undefined) return false;
      delivery.state = 'pending';
      delivery.nextAttemptAt = now;
      delete delivery.claimedBy;
      delete delivery.claimExpiresAt;
      return true;
    },

    async dropDelivery(id) {
      return deliveries.delete(id);
    },

    async outboxStats() {
      let pending = 0;
      let failed = 0;
      let oldestPendingCreatedAt: number | undefined;
      for (const delivery of deliveries.values()) {
        if (delivery.state === 'failed') failed += 1;
        else {
          pending += 1;
          if (oldestPendingCreatedAt === undefined || delivery.createdAt < oldestPendingCreatedAt) oldestPendingCreatedAt = delivery.createdAt;
        }
      }
      return { pending, failed, oldestPendingCreatedAt };
    },

    async countPendingOperations() {
      let count = 0;
      for (const operation of operations.values()) if (operation.state === 'pending') count += 1;
      return count;
    },

    async ping() {
      // Nothing to reach.
    },

    async recordUsage(entries) {
      for (const entry of entries) {
        let list = usage.get(entry.resourceId);
        if (list === undefined) usage.set(entry.resourceId, (list = []));
        list.push({ ...entry });
      }
    },

    async sumUsage(resourceId, from, to) {
      const totals: Record<string, number> = Object.create(null) as Record<string, number>;
      for (const entry of usage.get(resourceId) ?? []) {
        if (entry.at >= from && entry.at < to) totals[entry.feature] = (totals[entry.feature] ?? 0) + entry.quantity;
      }
      return totals;
    },

    async hasUsage(resourceId, from, to) {
      return (usage.get(resourceId) ?? []).some((entry) => entry.at >= from && entry.at < to);
    },

    async pruneUsage(before) {
      let removed = 0;
      for (const [resourceId, list] of usage) {
        const kept = list.filter((entry) => entry.at >= before);
        removed += list.length - kept.length;
        if (kept.length === 0) usage.delete(resourceId);
        else usage.set(resourceId, kept);
      }
      return removed;
    },

    async close() {
      // Nothing to release; kept for the contract.
    },
  };
}

// The records' own copies: their fields are primitives but for one free-form part each (a
// resource's features, a credential's values, an operation's request, an answer's body, a replay
// record's answer), which gets the deep copy. A spread copies the rest in one step where the
// generic walk below visits every key: the operation and replay records are copied on every
// request.

function copyResource(resource: ResourceRecord): ResourceRecord {
  return { ...resource, features: copy(resource.features) };
}

function copyCredential(credential: CredentialRecord): CredentialRecord {
  return { ...credential, values: copy(credential.values) };
}

function copyOperation(operation: OperationRecord): OperationRecord {
  return { ...operation, request: copy(operation.request) };
}

function copyAnswer(answer: RecordedAnswer): RecordedAnswer {
  return answer.body === undefined ? { ...answer } : { ...answer, body: copy(answer.body) };
}

function copyReplay(replay: ReplayRecord): ReplayRecord {
  return { ...replay, answer: copyAnswer(replay.answer) };
}

/** Thrown inside {@link copyPlain} when a value needs structuredClone's full algorithm. */
const UNUSUAL = Symbol('unusual');

/**
 * Deep copy with structuredClone's result. Records are small trees of plain objects and
 * primitives, which a direct walk copies several times faster than structuredClone's
 * serialize-then-deserialize (it showed in the request profile); anything else (arrays, class
 * instances, shared or cyclic references, a `__proto__` key) goes to structuredClone whole.
 */
function copy<T>(value: T): T {
  try {
    return copyPlain(value) as T;
  } catch (error) {
    if (error !== UNUSUAL) throw error;
    return structuredClone(value);
  } finally {
    seen.length = 0;
  }
}

/**
 * The objects met by the copy in progress (copies never nest: copyPlain calls nothing that copies),
 * reused so that a copy allocates nothing but the copy: the stores' records are copied several
 * times per request, and what a request allocates is what the garbage collector pays for.
 */
const seen: object[] = [];
const hasOwn = Object.prototype.hasOwnProperty;

function copyPlain(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'function' || typeof value === 'symbol') throw UNUSUAL;
    return value;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if ((proto !== Object.prototype && proto !== null) || seen.includes(value) || seen.length > 64) throw UNUSUAL;
  seen.push(value);
  const out: Record<string, unknown> = {};
  // for…in walks the enumerable keys without an array of them; inherited ones are skipped (the
  // prototype is Object.prototype or null, so only a polluted Object.prototype has any).
  for (const key in value) {
    if (!hasOwn.call(value, key)) continue;
    if (key === '__proto__') throw UNUSUAL;
    out[key] = copyPlain((value as Record<string, unknown>)[key]);
  }
  return out;
}
