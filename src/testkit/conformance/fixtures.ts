/** Store conformance: the records, claims and helpers every group of cases builds on. */
import assert from 'node:assert/strict';
import type { ClaimInput, ClaimResult, CommitInput, CommitResult, CredentialRecord, ListingStore, NewDelivery, OperationRecord, OperationRequest, ResourceRecord } from '../../store/types.js';
import type { StoreContractOptions, StoreUnderTest, TestFunctions } from './types.js';

/** Registers one case on a fresh store. */
export type Case = (title: string, body: (store: ListingStore) => Promise<void>) => void;

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

export async function claimed(store: ListingStore, input: ClaimInput): Promise<OperationRecord> {
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
export async function commit(store: ListingStore, op: Pick<OperationRecord, 'key' | 'token'>, input: CommitInput): Promise<void> {
  assert.deepEqual(await store.commitOperation(op.key, op.token, input), COMMITTED);
}

/** Marks a claim pending and asserts that it still held the key. */
export async function markPending(store: ListingStore, op: Pick<OperationRecord, 'key' | 'token'>, pending: Parameters<ListingStore['markOperationPending']>[2]): Promise<OperationRecord> {
  const marked = await store.markOperationPending(op.key, op.token, pending);
  if (marked === undefined) assert.fail(`markOperationPending answered undefined (lease lost) for ${op.key}`);
  return marked;
}

export async function putResource(store: ListingStore, record: ResourceRecord): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:${record.id}`, targetId: record.id, now: record.updatedAt }));
  await commit(store, op, { mutation: { type: 'putResource', resource: record } });
}

export async function putCredential(store: ListingStore, record: CredentialRecord): Promise<void> {
  const op = await claimed(
    store,
    claimInput({ key: `credential:${record.id}`, kind: 'provisionCredentials', targetId: record.id, request: { kind: 'provisionCredentials', resourceId: record.resourceId } }),
  );
  await commit(store, op, { mutation: { type: 'putCredential', credential: record } });
}

export async function deleteResource(store: ListingStore, id: string, deletedAt: number): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:${id}`, kind: 'deprovision', targetId: id, request: { kind: 'deprovision' }, now: deletedAt }));
  await commit(store, op, { mutation: { type: 'deleteResource', id, deletedAt } });
}

export async function deleteCredential(store: ListingStore, id: string, deletedAt: number): Promise<void> {
  const op = await claimed(
    store,
    claimInput({ key: `credential:${id}`, kind: 'deprovisionCredentials', targetId: id, request: { kind: 'deprovisionCredentials' }, now: deletedAt }),
  );
  await commit(store, op, { mutation: { type: 'deleteCredential', id, deletedAt } });
}

export async function enqueue(store: ListingStore, record: NewDelivery): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:for-${record.id}`, targetId: `for-${record.id}` }));
  await commit(store, op, { mutation: { type: 'none' }, delivery: record });
}

export const ids = (records: readonly { id: string }[]): string[] => records.map((r) => r.id);
export const sortedIds = (records: readonly { id: string }[]): string[] => ids(records).sort();

/** One test of a suite on a fresh store, skipped test by test (so the runner's summary counts them as skipped). */
export function suiteTest(makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions): Case {
  const skip = options.skip ?? false;
  return (title: string, body: (store: ListingStore) => Promise<void>): void => {
    options.it(title, { skip }, async () => {
      const { store, cleanup } = await makeStore();
      try {
        await body(store as ListingStore);
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

export async function pendingWith(store: ListingStore, input: ClaimInput, callback: boolean): Promise<OperationRecord> {
  const op = await claimed(store, input);
  return markPending(store, op, {
    message: 'Working on it',
    deadlineAt: T0 + 86_400_000,
    ...(callback ? { callbackId: `cb-${op.targetId}`, callbackUrl: `https://connector.example/v1/callbacks/cb-${op.targetId}` } : {}),
  });
}
