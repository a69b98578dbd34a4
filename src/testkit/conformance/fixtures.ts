/** Store conformance: the records, claims and helpers every group of cases builds on. */
import assert from 'node:assert/strict';
import type { ClaimInput, ClaimResult, CommitInput, CommitResult, CredentialRecord, NewDelivery, OperationRecord, OperationRequest, ResourceRecord, Store, StoreDiagnostics } from '../../store/types.js';
import type { StoreContractOptions, StoreUnderTest, TestFunctions } from './types.js';

/** An optional method of the contract (StoreDiagnostics). */
export type OptionalMethod = keyof StoreDiagnostics;

/** What a case needs beyond the required contract: it is reported skipped on a store without them. */
export interface CaseOptions<K extends OptionalMethod> {
  needs: readonly K[];
}

/** Registers one case on a fresh store; `needs` names the optional methods the case calls. */
export type Case = <K extends OptionalMethod = never>(title: string, body: (store: Store & Pick<StoreDiagnostics, K>) => Promise<void>, options?: CaseOptions<K>) => void;

/** What a group of cases registers with: the runner's `describe`, and {@link Case} on a fresh store. */
export interface Suite {
  describe: TestFunctions['describe'];
  test: Case;
}

export const T0 = 1_700_000_000_000;
export const LEASE = 30_000;
export const FOREVER = Number.MAX_SAFE_INTEGER;

export const provisionRequest: OperationRequest = {
  kind: 'provision',
  product: 'bonnets',
  plan: 'small',
  region: 'aws::us-east-1',
  features: { seats: 3, sso: true, tier: 'gold' },
};

export function claimInput(overrides: Partial<ClaimInput> = {}): ClaimInput {
  return {
    key: 'resource:r1',
    kind: 'provision',
    targetId: 'r1',
    fingerprint: 'bonnets|small|aws::us-east-1',
    request: provisionRequest,
    owner: 'owner-a',
    now: T0,
    leaseMs: LEASE,
    ...overrides,
  };
}

export function resource(id: string, overrides: Partial<ResourceRecord> = {}): ResourceRecord {
  return {
    id,
    product: 'bonnets',
    plan: 'small',
    region: 'aws::us-east-1',
    features: { seats: 3, sso: true, tier: 'gold' },
    message: `Resource ${id} is ready`,
    createdAt: T0,
    updatedAt: T0,
    ...overrides,
  };
}

export function credential(id: string, resourceId: string, overrides: Partial<CredentialRecord> = {}): CredentialRecord {
  return {
    id,
    resourceId,
    values: { BONNETS_URL: `https://user-${id}:secret-${id}@bonnets.example/${resourceId}` },
    message: `Credentials ${id} ready`,
    createdAt: T0,
    ...overrides,
  };
}

export function delivery(id: string, overrides: Partial<NewDelivery> = {}): NewDelivery {
  return {
    id,
    callbackId: `cb-${id}`,
    url: `https://connector.example/v1/callbacks/cb-${id}`,
    payload: { state: 'done', message: `Operation ${id} finished` },
    createdAt: T0,
    deadlineAt: T0 + 86_400_000,
    ...overrides,
  };
}

export async function claimed(store: Store, input: ClaimInput): Promise<OperationRecord> {
  const result = await store.claimOperation(input);
  if (result.outcome !== 'claimed') assert.fail(`expected to claim ${input.key}, got ${result.outcome}`);
  return result.operation;
}

/** The operation a claim result names: the claimed one, or the live holder (busy, blocked, pending, conflict). */
export function heldBy(result: ClaimResult): OperationRecord {
  if (result.outcome === 'replayed' || result.outcome === 'unavailable') assert.fail(`expected a claim or a holder, got ${result.outcome}`);
  return result.operation;
}

export const COMMITTED: CommitResult = { outcome: 'committed' };
export const LEASE_LOST: CommitResult = { outcome: 'lease_lost' };
export const PARENT_MISSING: CommitResult = { outcome: 'parent_missing' };
export const tombstoned = (entity: 'resource' | 'credential'): CommitResult => ({ outcome: 'tombstoned', entity });

/** Commits and asserts that the commit answered `committed`. */
export async function commit(store: Store, op: Pick<OperationRecord, 'key' | 'token'>, input: CommitInput): Promise<void> {
  assert.deepEqual(await store.commitOperation(op.key, op.token, input), COMMITTED);
}

/** Marks a claim pending and asserts that it still held the key. */
export async function markPending(store: Store, op: Pick<OperationRecord, 'key' | 'token'>, pending: Parameters<Store['markOperationPending']>[2]): Promise<OperationRecord> {
  const marked = await store.markOperationPending(op.key, op.token, pending);
  if (marked === undefined) assert.fail(`markOperationPending answered undefined (lease lost) for ${op.key}`);
  return marked;
}

export async function putResource(store: Store, record: ResourceRecord): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:${record.id}`, targetId: record.id, now: record.updatedAt }));
  await commit(store, op, { mutation: { type: 'putResource', resource: record } });
}

export async function putCredential(store: Store, record: CredentialRecord): Promise<void> {
  const op = await claimed(
    store,
    claimInput({ key: `credential:${record.id}`, kind: 'provisionCredentials', targetId: record.id, request: { kind: 'provisionCredentials', resourceId: record.resourceId } }),
  );
  await commit(store, op, { mutation: { type: 'putCredential', credential: record } });
}

export async function deleteResource(store: Store, id: string, deletedAt: number): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:${id}`, kind: 'deprovision', targetId: id, request: { kind: 'deprovision' }, now: deletedAt }));
  await commit(store, op, { mutation: { type: 'deleteResource', id, deletedAt } });
}

export async function deleteCredential(store: Store, id: string, deletedAt: number): Promise<void> {
  const op = await claimed(
    store,
    claimInput({ key: `credential:${id}`, kind: 'deprovisionCredentials', targetId: id, request: { kind: 'deprovisionCredentials' }, now: deletedAt }),
  );
  await commit(store, op, { mutation: { type: 'deleteCredential', id, deletedAt } });
}

export async function enqueue(store: Store, record: NewDelivery): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:for-${record.id}`, targetId: `for-${record.id}` }));
  await commit(store, op, { mutation: { type: 'none' }, delivery: record });
}

export const ids = (records: readonly { id: string }[]): string[] => records.map((r) => r.id);
export const sortedIds = (records: readonly { id: string }[]): string[] => ids(records).sort();

/** One test of a suite on a fresh store, skipped test by test (so the runner's summary counts them as skipped). */
export function suiteTest(makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions): Case {
  const skip = options.skip ?? false;
  return <K extends OptionalMethod = never>(title: string, body: (store: Store & Pick<StoreDiagnostics, K>) => Promise<void>, caseOptions?: CaseOptions<K>): void => {
    const needs: readonly OptionalMethod[] = caseOptions?.needs ?? [];
    options.it(title, { skip }, async (context) => {
      const { store, cleanup } = await makeStore();
      try {
        const missing = needs.filter((method) => typeof (store as Partial<StoreDiagnostics>)[method] !== 'function');
        if (missing.length > 0) {
          // Never reported as passed: the rule was not checked.
          const reason = `NOT CHECKED: the store has no ${missing.map((m) => `${m}()`).join(', ')} (optional, StoreDiagnostics), which this case needs`;
          if (typeof context?.skip !== 'function') throw new Error(`${reason}; this test runner gives no way to report a skipped case (node:test and vitest do)`);
          context.skip(reason);
          return;
        }
        await body(store as Store & Pick<StoreDiagnostics, K>);
      } finally {
        await cleanup();
      }
    });
  };
}

export const credentialClaim = (id: string, resourceId: string | undefined, overrides: Partial<ClaimInput> = {}): ClaimInput =>
  claimInput({
    key: `credential:${id}`,
    targetId: id,
    ...(resourceId === undefined
      ? { kind: 'deprovisionCredentials', request: { kind: 'deprovisionCredentials' }, fingerprint: '["deprovisionCredentials"]' }
      : { kind: 'provisionCredentials', request: { kind: 'provisionCredentials', resourceId }, fingerprint: `["provisionCredentials","${resourceId}"]`, parentId: resourceId }),
    ...overrides,
  });

export const deprovisionClaim = (id: string, overrides: Partial<ClaimInput> = {}): ClaimInput =>
  claimInput({ key: `resource:${id}`, kind: 'deprovision', targetId: id, request: { kind: 'deprovision' }, fingerprint: '["deprovision"]', ...overrides });

export async function pendingWith(store: Store, input: ClaimInput, callback: boolean): Promise<OperationRecord> {
  const op = await claimed(store, input);
  return markPending(store, op, {
    message: 'Working on it',
    deadlineAt: T0 + 86_400_000,
    ...(callback ? { callbackId: `cb-${op.targetId}`, callbackUrl: `https://connector.example/v1/callbacks/cb-${op.targetId}` } : {}),
  });
}
