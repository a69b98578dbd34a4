/**
 * The store conformance suite: every rule of the Store contract (src/store/types.ts, explained in
 * docs/stores.md), checked against one adapter. An adapter written outside this package (MySQL,
 * DynamoDB, …) runs it from one test file:
 *
 * ```ts
 * import { describe, it } from 'node:test';
 * import { storeConformance } from 'embedded-marketplace/testkit';
 *
 * storeConformance({
 *   name: 'my store',
 *   describe,
 *   it,
 *   async makeStore() {
 *     const store = await openMyStore(); // empty
 *     return { store, cleanup: () => store.close() };
 *   },
 * });
 * ```
 *
 * `makeStore` is called once per case and must hand back an empty store. The optional diagnostics
 * (StoreDiagnostics) are checked only when the store has them.
 */
import assert from 'node:assert/strict';
import { ConflictError, LeaseLostError, NotFoundError } from '../errors.js';
import type {
  ClaimInput,
  ClaimResult,
  CredentialRecord,
  DeliveryRecord,
  NewDelivery,
  OperationRecord,
  OperationRequest,
  ResourceRecord,
  ListingStore,
} from '../store/types.js';

export interface StoreUnderTest {
  store: ListingStore;
  cleanup(): Promise<void>;
}

/**
 * The test functions the suite registers its cases with: `node:test`'s `describe` and `it` (or any
 * runner's with the same shapes: `it(title, { skip }, fn)`).
 */
export interface TestFunctions {
  describe(name: string, fn: () => void): unknown;
  it(name: string, options: { skip?: string | boolean }, fn: () => Promise<void>): unknown;
}

export interface StoreContractOptions {
  /** A reason to skip the whole suite (e.g. the database server is absent), or false. */
  skip?: string | false;
}

/** What {@link storeConformance} runs. */
export interface StoreConformanceOptions extends StoreContractOptions, TestFunctions {
  /** Names the suite in the runner's report. */
  name: string;
  /** Called once per case: a new, empty store, and how to dispose of it. */
  makeStore(): Promise<StoreUnderTest>;
}

const T0 = 1_700_000_000_000;
const LEASE = 30_000;
const FOREVER = Number.MAX_SAFE_INTEGER;

const provisionRequest: OperationRequest = {
  kind: 'provision',
  product: 'bonnets',
  plan: 'small',
  region: 'aws::us-east-1',
  features: { seats: 3, sso: true, tier: 'gold' },
};

function claimInput(overrides: Partial<ClaimInput> = {}): ClaimInput {
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

function resource(id: string, overrides: Partial<ResourceRecord> = {}): ResourceRecord {
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

function credential(id: string, resourceId: string, overrides: Partial<CredentialRecord> = {}): CredentialRecord {
  return {
    id,
    resourceId,
    values: { BONNETS_URL: `https://user-${id}:secret-${id}@bonnets.example/${resourceId}` },
    message: `Credentials ${id} ready`,
    createdAt: T0,
    ...overrides,
  };
}

function delivery(id: string, overrides: Partial<NewDelivery> = {}): NewDelivery {
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

async function claimed(store: ListingStore, input: ClaimInput): Promise<OperationRecord> {
  const result = await store.claimOperation(input);
  if (result.outcome !== 'claimed') assert.fail(`expected to claim ${input.key}, got ${result.outcome}`);
  return result.operation;
}

/** The operation a claim result names: the claimed one, or the live holder (busy or blocked). */
export function heldBy(result: ClaimResult): OperationRecord {
  if (result.outcome === 'replayed') assert.fail('expected a claim, got a replayed answer');
  return result.operation;
}

async function putResource(store: ListingStore, record: ResourceRecord): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:${record.id}`, targetId: record.id, now: record.updatedAt }));
  await store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: record } });
}

async function putCredential(store: ListingStore, record: CredentialRecord): Promise<void> {
  const op = await claimed(
    store,
    claimInput({ key: `credential:${record.id}`, kind: 'provisionCredentials', targetId: record.id, request: { kind: 'provisionCredentials', resourceId: record.resourceId } }),
  );
  await store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: record } });
}

async function deleteResource(store: ListingStore, id: string, deletedAt: number): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:${id}`, kind: 'deprovision', targetId: id, request: { kind: 'deprovision' }, now: deletedAt }));
  await store.commitOperation(op.key, op.token, { mutation: { type: 'deleteResource', id, deletedAt } });
}

async function deleteCredential(store: ListingStore, id: string, deletedAt: number): Promise<void> {
  const op = await claimed(
    store,
    claimInput({ key: `credential:${id}`, kind: 'deprovisionCredentials', targetId: id, request: { kind: 'deprovisionCredentials' }, now: deletedAt }),
  );
  await store.commitOperation(op.key, op.token, { mutation: { type: 'deleteCredential', id, deletedAt } });
}

/** A refusal of a put for a tombstoned id: 409 with its own code. */
const refusedAsDeleted = (error: unknown): boolean => error instanceof ConflictError && error.status === 409 && error.code === 'ERR_ENTITY_DELETED';

async function enqueue(store: ListingStore, record: NewDelivery): Promise<void> {
  const op = await claimed(store, claimInput({ key: `resource:for-${record.id}`, targetId: `for-${record.id}` }));
  await store.commitOperation(op.key, op.token, { mutation: { type: 'none' }, delivery: record });
}

const ids = (records: readonly { id: string }[]): string[] => records.map((r) => r.id);
const sortedIds = (records: readonly { id: string }[]): string[] => ids(records).sort();

/** One test of a suite on a fresh store, skipped test by test (so the runner's summary counts them as skipped). */
function suiteTest(makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions) {
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

/** Runs the conformance suite against the store `makeStore` opens (a fresh, empty one per test). */
export function storeContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions): void {
  const { describe } = options;
  const test = suiteTest(makeStore, options);

  describe(`store contract: ${name}`, () => {
    describe('reads', () => {
      test('an empty store finds nothing', async (store) => {
        assert.equal(typeof store.kind, 'string');
        assert.equal(await store.getResource('r1'), undefined);
        assert.equal(await store.getCredential('c1'), undefined);
        assert.deepEqual(await store.listCredentials('r1'), []);
        assert.equal(await store.getOperation('resource:r1'), undefined);
        assert.deepEqual(await store.listPendingOperations(10), []);
        assert.deepEqual(await store.listDeliveries(), []);
        assert.deepEqual({ ...(await store.sumUsage('r1', 0, FOREVER)) }, {});
        assert.equal(await store.hasUsage('r1', 0, FOREVER), false);
        assert.equal(await store.pruneUsage(FOREVER), 0);
      });
    });

    describe('operations: claim', () => {
      test('a first claim takes the key with a fresh running record', async (store) => {
        const result = await store.claimOperation(claimInput());
        assert.equal(result.outcome, 'claimed');
        const op = result.operation;
        assert.equal(typeof op.token, 'string');
        assert.ok(op.token.length >= 16, 'the fencing token is not guessable');
        assert.deepEqual(op, {
          key: 'resource:r1',
          kind: 'provision',
          targetId: 'r1',
          fingerprint: 'bonnets|small|aws::us-east-1',
          state: 'running',
          token: op.token,
          owner: 'owner-a',
          leaseExpiresAt: T0 + LEASE,
          request: provisionRequest,
          createdAt: T0,
        });
        assert.deepEqual(await store.getOperation('resource:r1'), op);
      });

      test('a live running claim makes any other claim busy, whatever its fingerprint', async (store) => {
        const first = await claimed(store, claimInput());
        for (const fingerprint of [first.fingerprint, 'something|else']) {
          const again = await store.claimOperation(claimInput({ fingerprint, owner: 'owner-b', now: T0 + LEASE - 1 }));
          assert.equal(again.outcome, 'busy');
          assert.deepEqual(again.operation, first);
        }
        assert.deepEqual(await store.getOperation('resource:r1'), first);
      });

      test('keys are independent', async (store) => {
        const a = await claimed(store, claimInput());
        const b = await claimed(store, claimInput({ key: 'credential:r1', kind: 'provisionCredentials', request: { kind: 'provisionCredentials', resourceId: 'r0' } }));
        assert.notEqual(a.token, b.token);
      });

      test('a lapsed lease is taken over with a new token; the old token then holds nothing', async (store) => {
        const old = await claimed(store, claimInput());
        // Live while leaseExpiresAt > now: at exactly leaseExpiresAt it has lapsed.
        assert.equal((await store.claimOperation(claimInput({ now: old.leaseExpiresAt - 1 }))).outcome, 'busy');
        const takeover = await store.claimOperation(
          claimInput({ owner: 'owner-b', fingerprint: 'bonnets|large|aws::us-east-1', now: old.leaseExpiresAt, leaseMs: 5_000 }),
        );
        assert.equal(takeover.outcome, 'claimed');
        const fresh = takeover.operation;
        assert.notEqual(fresh.token, old.token);
        assert.equal(fresh.owner, 'owner-b');
        assert.equal(fresh.fingerprint, 'bonnets|large|aws::us-east-1');
        assert.equal(fresh.createdAt, old.leaseExpiresAt);
        assert.equal(fresh.leaseExpiresAt, old.leaseExpiresAt + 5_000);

        assert.equal(await store.renewOperation(old.key, old.token, T0 + 10 * LEASE), false);
        await assert.rejects(store.markOperationPending(old.key, old.token, { message: 'Working on it', deadlineAt: FOREVER }), LeaseLostError);
        await assert.rejects(store.commitOperation(old.key, old.token, { mutation: { type: 'putResource', resource: resource('r1') } }), LeaseLostError);
        await store.releaseOperation(old.key, old.token);
        assert.deepEqual(await store.getOperation('resource:r1'), fresh, 'the new holder is untouched by the old token');
        assert.equal(await store.getResource('r1'), undefined);
      });

      test('50 concurrent claims of one key: exactly one is claimed, the others see it busy', async (store) => {
        const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.claimOperation(claimInput({ owner: `owner-${i}` }))));
        const winners = results.filter((r) => r.outcome === 'claimed');
        assert.equal(winners.length, 1);
        const token = winners[0]!.operation.token;
        for (const result of results) assert.equal(heldBy(result).token, token);
        assert.equal((await store.getOperation('resource:r1'))?.token, token);
      });
    });

    describe('operations: renew and release', () => {
      test('renew extends a running claim and answers false for a token that does not hold it', async (store) => {
        const op = await claimed(store, claimInput());
        assert.equal(await store.renewOperation(op.key, op.token, T0 + 2 * LEASE), true);
        assert.equal((await store.getOperation(op.key))?.leaseExpiresAt, T0 + 2 * LEASE);
        assert.equal((await store.claimOperation(claimInput({ now: T0 + LEASE }))).outcome, 'busy', 'the renewed lease still holds');
        assert.equal(await store.renewOperation(op.key, 'not-the-token', FOREVER), false);
        assert.equal(await store.renewOperation('resource:nobody', op.token, FOREVER), false);
        assert.equal((await store.getOperation(op.key))?.leaseExpiresAt, T0 + 2 * LEASE);
        assert.equal((await store.claimOperation(claimInput({ now: T0 + 2 * LEASE }))).outcome, 'claimed');
      });

      test('renew does not apply to a pending operation', async (store) => {
        const op = await claimed(store, claimInput());
        await store.markOperationPending(op.key, op.token, { message: 'Provisioning started', deadlineAt: T0 + 1000 });
        assert.equal(await store.renewOperation(op.key, op.token, FOREVER), false);
      });

      test('release drops the claim; a wrong token is a no-op', async (store) => {
        const op = await claimed(store, claimInput());
        await store.releaseOperation(op.key, 'not-the-token');
        await store.releaseOperation('resource:nobody', op.token);
        assert.deepEqual(await store.getOperation(op.key), op);
        await store.releaseOperation(op.key, op.token);
        assert.equal(await store.getOperation(op.key), undefined);
        assert.equal((await store.claimOperation(claimInput({ now: T0 + 1 }))).outcome, 'claimed');
      });
    });

    describe('operations: pending', () => {
      test('markOperationPending turns the claim pending with its 202 message, callback and deadline', async (store) => {
        const op = await claimed(store, claimInput());
        const pending = await store.markOperationPending(op.key, op.token, {
          message: 'Provisioning started — we will call back',
          callbackId: 'cb1',
          callbackUrl: 'https://connector.example/v1/callbacks/cb1',
          deadlineAt: T0 + 86_400_000,
        });
        assert.deepEqual(pending, {
          ...op,
          state: 'pending',
          message: 'Provisioning started — we will call back',
          callbackId: 'cb1',
          callbackUrl: 'https://connector.example/v1/callbacks/cb1',
          deadlineAt: T0 + 86_400_000,
        });
        assert.deepEqual(await store.getOperation(op.key), pending);
      });

      test('without callback headers the callback fields stay absent', async (store) => {
        const op = await claimed(store, claimInput());
        const pending = await store.markOperationPending(op.key, op.token, { message: 'Provisioning started', deadlineAt: T0 + 1000 });
        assert.equal('callbackId' in pending, false);
        assert.equal('callbackUrl' in pending, false);
        const stored = await store.getOperation(op.key);
        assert.equal(stored !== undefined && 'callbackId' in stored, false);
      });

      test('a stale token cannot mark pending', async (store) => {
        await assert.rejects(store.markOperationPending('resource:r1', 'nobody', { message: 'Provisioning started', deadlineAt: FOREVER }), LeaseLostError);
        const op = await claimed(store, claimInput());
        await assert.rejects(store.markOperationPending(op.key, 'wrong', { message: 'Provisioning started', deadlineAt: FOREVER }), LeaseLostError);
        assert.equal((await store.getOperation(op.key))?.state, 'running');
      });

      test('a pending operation holds the key past its lease until its deadline, then a claim replaces it whole', async (store) => {
        const op = await claimed(store, claimInput());
        const deadlineAt = T0 + 10 * LEASE;
        await store.markOperationPending(op.key, op.token, { message: 'Provisioning started', callbackId: 'cb1', callbackUrl: 'https://c.example/cb1', deadlineAt });
        const busy = await store.claimOperation(claimInput({ now: deadlineAt - 1 }));
        assert.equal(busy.outcome, 'busy');
        assert.equal(busy.operation.state, 'pending');
        assert.equal(busy.operation.message, 'Provisioning started');

        const again = await store.claimOperation(claimInput({ now: deadlineAt, owner: 'owner-b', fingerprint: 'fresh' }));
        assert.equal(again.outcome, 'claimed');
        assert.deepEqual(again.operation, {
          key: op.key,
          kind: 'provision',
          targetId: 'r1',
          fingerprint: 'fresh',
          state: 'running',
          token: again.operation.token,
          owner: 'owner-b',
          leaseExpiresAt: deadlineAt + LEASE,
          request: provisionRequest,
          createdAt: deadlineAt,
        });
        assert.notEqual(again.operation.token, op.token);
        assert.deepEqual(await store.getOperation(op.key), again.operation);
      });

      test('the token of a pending operation completes it (commit) or abandons it (release)', async (store) => {
        const a = await claimed(store, claimInput());
        await store.markOperationPending(a.key, a.token, { message: 'Provisioning started', deadlineAt: FOREVER });
        await store.commitOperation(a.key, a.token, { mutation: { type: 'putResource', resource: resource('r1') } });
        assert.equal(await store.getOperation(a.key), undefined);
        assert.deepEqual(await store.getResource('r1'), resource('r1'));

        const b = await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
        await store.markOperationPending(b.key, b.token, { message: 'Provisioning started', deadlineAt: FOREVER });
        await store.releaseOperation(b.key, b.token);
        assert.equal(await store.getOperation(b.key), undefined);
      });

      test('listPendingOperations lists pending ones only, oldest first, up to the limit', async (store) => {
        for (const [id, at] of [['p2', T0 + 2], ['p0', T0], ['p1', T0 + 1]] as const) {
          const op = await claimed(store, claimInput({ key: `resource:${id}`, targetId: id, now: at }));
          await store.markOperationPending(op.key, op.token, { message: `Pending ${id}`, deadlineAt: FOREVER });
        }
        await claimed(store, claimInput({ key: 'resource:running', targetId: 'running', now: T0 - 5 }));
        const all = await store.listPendingOperations(10);
        assert.deepEqual(
          all.map((op) => op.targetId),
          ['p0', 'p1', 'p2'],
        );
        for (const op of all) assert.equal(op.state, 'pending');
        assert.deepEqual(
          (await store.listPendingOperations(2)).map((op) => op.targetId),
          ['p0', 'p1'],
        );
      });
    });

    describe('operations: commit', () => {
      test("'none' only releases the operation", async (store) => {
        const op = await claimed(store, claimInput());
        await store.commitOperation(op.key, op.token, { mutation: { type: 'none' } });
        assert.equal(await store.getOperation(op.key), undefined);
        assert.equal(await store.getResource('r1'), undefined);
        assert.deepEqual(await store.listDeliveries(), []);
      });

      test("'putResource' stores the record and replaces it on a later commit", async (store) => {
        await putResource(store, resource('r1'));
        assert.deepEqual(await store.getResource('r1'), resource('r1'));
        assert.equal(await store.getOperation('resource:r1'), undefined, 'the operation is released by the commit');

        const op = await claimed(store, claimInput({ kind: 'changePlan', request: { kind: 'changePlan', plan: 'large', features: { seats: 10 } }, now: T0 + 5 }));
        const changed = resource('r1', { plan: 'large', features: { seats: 10 }, updatedAt: T0 + 5 });
        await store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: changed } });
        assert.deepEqual(await store.getResource('r1'), changed);
      });

      test("'putCredential' stores a credential set under its resource", async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        assert.deepEqual(await store.getCredential('c1'), credential('c1', 'r1'));
        assert.deepEqual(await store.listCredentials('r1'), [credential('c1', 'r1')]);
        assert.equal(await store.getOperation('credential:c1'), undefined);
      });

      test("'putCredential' for a missing resource rejects with NotFoundError; nothing is written and the operation is still held", async (store) => {
        const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r-missing' } }));
        await assert.rejects(
          store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r-missing') }, delivery: delivery('d1') }),
          (error: unknown) => error instanceof NotFoundError && error.status === 404,
        );
        assert.equal(await store.getCredential('c1'), undefined);
        assert.deepEqual(await store.listDeliveries(), []);
        assert.deepEqual(await store.getOperation(op.key), op, 'the caller still holds the operation and releases it');
        await store.releaseOperation(op.key, op.token);
        assert.equal(await store.getOperation(op.key), undefined);
      });

      test("'putCredential' after the resource was deleted rejects with NotFoundError", async (store) => {
        await putResource(store, resource('r1'));
        const del = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
        await store.commitOperation(del.key, del.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
        const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1' }));
        await assert.rejects(store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') } }), NotFoundError);
        assert.equal(await store.getCredential('c1'), undefined);
      });

      test("'deleteResource' removes the resource and every credential of it, and only those", async (store) => {
        await putResource(store, resource('r1'));
        await putResource(store, resource('r2'));
        await putCredential(store, credential('c1', 'r1'));
        await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 1 }));
        await putCredential(store, credential('c3', 'r2'));
        const op = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
        await store.commitOperation(op.key, op.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
        assert.equal(await store.getResource('r1'), undefined);
        assert.equal(await store.getCredential('c1'), undefined);
        assert.equal(await store.getCredential('c2'), undefined);
        assert.deepEqual(await store.listCredentials('r1'), []);
        assert.deepEqual(await store.getResource('r2'), resource('r2'));
        assert.deepEqual(await store.getCredential('c3'), credential('c3', 'r2'));
      });

      test("'deleteCredential' removes one credential set; deleting a missing one is harmless", async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        await putCredential(store, credential('c2', 'r1'));
        for (const id of ['c1', 'c-missing']) {
          const op = await claimed(store, claimInput({ key: `credential:${id}`, kind: 'deprovisionCredentials', targetId: id, request: { kind: 'deprovisionCredentials' } }));
          await store.commitOperation(op.key, op.token, { mutation: { type: 'deleteCredential', id, deletedAt: T0 + 10 } });
          assert.equal(await store.getOperation(op.key), undefined);
        }
        assert.equal(await store.getCredential('c1'), undefined);
        assert.deepEqual(ids(await store.listCredentials('r1')), ['c2']);
        assert.deepEqual(await store.getResource('r1'), resource('r1'));
      });

      test("'deleteResource' of a missing resource is harmless", async (store) => {
        const op = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
        await store.commitOperation(op.key, op.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
        assert.equal(await store.getOperation(op.key), undefined);
      });

      test('a stale token rejects with LeaseLostError and writes nothing', async (store) => {
        const old = await claimed(store, claimInput());
        const fresh = await claimed(store, claimInput({ now: old.leaseExpiresAt, owner: 'owner-b' }));
        await assert.rejects(
          store.commitOperation(old.key, old.token, { mutation: { type: 'putResource', resource: resource('r1') }, delivery: delivery('d1') }),
          LeaseLostError,
        );
        await assert.rejects(store.commitOperation('resource:never', 'nobody', { mutation: { type: 'none' } }), LeaseLostError);
        assert.equal(await store.getResource('r1'), undefined);
        assert.deepEqual(await store.listDeliveries(), []);
        assert.deepEqual(await store.getOperation(old.key), fresh);
      });

      test('two concurrent commits with one token: exactly one applies', async (store) => {
        const op = await claimed(store, claimInput());
        const outcomes = await Promise.allSettled([
          store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1', { plan: 'small' }) }, delivery: delivery('d1') }),
          store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1', { plan: 'large' }) }, delivery: delivery('d2') }),
        ]);
        const fulfilled = outcomes.filter((o) => o.status === 'fulfilled');
        assert.equal(fulfilled.length, 1);
        const rejected = outcomes.find((o) => o.status === 'rejected');
        assert.ok(rejected?.status === 'rejected' && rejected.reason instanceof LeaseLostError);
        const winner = outcomes[0]!.status === 'fulfilled' ? { plan: 'small', delivery: 'd1' } : { plan: 'large', delivery: 'd2' };
        assert.equal((await store.getResource('r1'))?.plan, winner.plan);
        assert.deepEqual(ids(await store.listDeliveries()), [winner.delivery]);
      });

      test('a commit enqueues its delivery in the same step', async (store) => {
        const record = delivery('d1', { payload: { state: 'done', message: 'Credentials ready', credentials: { BONNETS_URL: 'https://u:p@b.example/r1' } } });
        await enqueue(store, record);
        assert.deepEqual(await store.listDeliveries(), [{ ...record, state: 'pending', attempts: 0, nextAttemptAt: record.createdAt }]);
      });
    });

    describe('tombstones', () => {
      test('isDeleted is false for ids never seen, for live entities, and after a release or a \'none\' commit', async (store) => {
        for (const entity of ['resource', 'credential'] as const) assert.equal(await store.isDeleted(entity, 'never-seen'), false);
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        assert.equal(await store.isDeleted('resource', 'r1'), false);
        assert.equal(await store.isDeleted('credential', 'c1'), false);
        // A provisioning that failed (released) or completed with an error ('none') leaves nothing.
        const failed = await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
        await store.releaseOperation(failed.key, failed.token);
        const errored = await claimed(store, claimInput({ key: 'resource:r3', targetId: 'r3' }));
        await store.markOperationPending(errored.key, errored.token, { message: 'Provisioning started', deadlineAt: FOREVER });
        await store.commitOperation(errored.key, errored.token, { mutation: { type: 'none' } });
        for (const id of ['r2', 'r3']) assert.equal(await store.isDeleted('resource', id), false);
        await putResource(store, resource('r2'));
        assert.deepEqual(await store.getResource('r2'), resource('r2'));
        assert.equal(await store.pruneTombstones(FOREVER), 0);
      });

      test("'deleteResource' tombstones the resource and every credential of it, and only those", async (store) => {
        await putResource(store, resource('r1'));
        await putResource(store, resource('r2'));
        await putCredential(store, credential('c1', 'r1'));
        await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 1 }));
        await putCredential(store, credential('c3', 'r2'));
        await deleteResource(store, 'r1', T0 + 10);
        assert.equal(await store.isDeleted('resource', 'r1'), true);
        assert.equal(await store.isDeleted('credential', 'c1'), true);
        assert.equal(await store.isDeleted('credential', 'c2'), true);
        assert.equal(await store.isDeleted('resource', 'r2'), false);
        assert.equal(await store.isDeleted('credential', 'c3'), false);
        // Kinds are separate namespaces.
        assert.equal(await store.isDeleted('credential', 'r1'), false);
        assert.equal(await store.isDeleted('resource', 'c1'), false);
      });

      test("'deleteCredential' tombstones the credential only", async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        await putCredential(store, credential('c2', 'r1'));
        await deleteCredential(store, 'c1', T0 + 10);
        assert.equal(await store.isDeleted('credential', 'c1'), true);
        assert.equal(await store.isDeleted('credential', 'c2'), false);
        assert.equal(await store.isDeleted('resource', 'r1'), false);
      });

      test("'putResource' of a deleted id rejects with ConflictError; nothing is written and the operation is still held", async (store) => {
        await putResource(store, resource('r1'));
        await deleteResource(store, 'r1', T0 + 10);
        const op = await claimed(store, claimInput({ now: T0 + 20 }));
        await assert.rejects(
          store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1', { createdAt: T0 + 20, updatedAt: T0 + 20 }) }, delivery: delivery('d1') }),
          refusedAsDeleted,
        );
        assert.equal(await store.getResource('r1'), undefined);
        assert.deepEqual(await store.listDeliveries(), []);
        assert.deepEqual(await store.getOperation(op.key), op, 'the caller still holds the operation and releases it');
        await store.releaseOperation(op.key, op.token);
        assert.equal(await store.isDeleted('resource', 'r1'), true);
      });

      test("'putCredential' of a deleted credential id rejects with ConflictError; nothing is written", async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        await deleteCredential(store, 'c1', T0 + 10);
        const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' } }));
        await assert.rejects(
          store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') }, delivery: delivery('d1') }),
          refusedAsDeleted,
        );
        assert.equal(await store.getCredential('c1'), undefined);
        assert.deepEqual(await store.listCredentials('r1'), []);
        assert.deepEqual(await store.listDeliveries(), []);
        assert.deepEqual(await store.getOperation(op.key), op);
      });

      test("'putCredential' of a credential deleted with its resource rejects with NotFoundError (the resource is checked first)", async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        await deleteResource(store, 'r1', T0 + 10);
        const op = await claimed(store, claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' } }));
        await assert.rejects(store.commitOperation(op.key, op.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') } }), NotFoundError);
        assert.equal(await store.getCredential('c1'), undefined);
      });

      test('a delete with a stale token writes no tombstone', async (store) => {
        await putResource(store, resource('r1'));
        const old = await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
        await claimed(store, claimInput({ kind: 'deprovision', request: { kind: 'deprovision' }, now: old.leaseExpiresAt, owner: 'owner-b' }));
        await assert.rejects(store.commitOperation(old.key, old.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } }), LeaseLostError);
        assert.equal(await store.isDeleted('resource', 'r1'), false);
        assert.deepEqual(await store.getResource('r1'), resource('r1'));
      });

      test('deleting a missing entity still tombstones it; a tombstone keeps its first deletedAt; pruneTombstones drops those before the bound', async (store) => {
        await deleteResource(store, 'r1', T0);
        await deleteCredential(store, 'c1', T0 + 5);
        assert.equal(await store.isDeleted('resource', 'r1'), true);
        assert.equal(await store.isDeleted('credential', 'c1'), true);
        await deleteResource(store, 'r1', T0 + 100);
        // The bound is exclusive: deletedAt < before.
        assert.equal(await store.pruneTombstones(T0), 0);
        assert.equal(await store.pruneTombstones(T0 + 1), 1, 'the second deletion did not move r1\'s tombstone');
        assert.equal(await store.isDeleted('resource', 'r1'), false);
        assert.equal(await store.isDeleted('credential', 'c1'), true);
        assert.equal(await store.pruneTombstones(T0 + 1), 0);
        assert.equal(await store.pruneTombstones(FOREVER), 1);
        assert.equal(await store.isDeleted('credential', 'c1'), false);
        // Which is why pruning is only safe beyond the replay window: the id can be provisioned again.
        await putResource(store, resource('r1'));
        assert.deepEqual(await store.getResource('r1'), resource('r1'));
      });
    });

    describe('credentials', () => {
      test('listCredentials: the resource’s sets only, oldest first, ties by id', async (store) => {
        await putResource(store, resource('r1'));
        await putResource(store, resource('r2'));
        await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 5 }));
        await putCredential(store, credential('c3', 'r1', { createdAt: T0 + 1 }));
        await putCredential(store, credential('c1', 'r1', { createdAt: T0 + 5 }));
        await putCredential(store, credential('c0', 'r2', { createdAt: T0 }));
        assert.deepEqual(ids(await store.listCredentials('r1')), ['c3', 'c1', 'c2']);
        assert.deepEqual(ids(await store.listCredentials('r2')), ['c0']);
        assert.deepEqual(await store.listCredentials('r-missing'), []);
      });
    });

    describe('deliveries', () => {
      test('claimDeliveries takes due ones, oldest first, up to the limit, and marks the claim', async (store) => {
        await enqueue(store, delivery('d1', { createdAt: T0 }));
        await enqueue(store, delivery('d2', { createdAt: T0 + 10 }));
        await enqueue(store, delivery('d3', { createdAt: T0 + 20 }));
        const first = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 10, leaseMs: LEASE, limit: 1 });
        assert.deepEqual(ids(first), ['d1']);
        assert.equal(first[0]!.claimedBy, 'owner-a');
        assert.equal(first[0]!.claimExpiresAt, T0 + 10 + LEASE);
        const next = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 10, leaseMs: LEASE, limit: 10 });
        assert.deepEqual(ids(next), ['d2'], 'd3 is not due yet and d1 is held');
        const listed = await store.listDeliveries();
        assert.deepEqual(sortedIds(listed), ['d1', 'd2', 'd3']);
        const d3 = listed.find((d) => d.id === 'd3')!;
        assert.equal('claimedBy' in d3, false);
      });

      test('a live claim is exclusive; after it lapses another owner takes the delivery', async (store) => {
        await enqueue(store, delivery('d1'));
        const mine = await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
        assert.deepEqual(ids(mine), ['d1']);
        assert.deepEqual(await store.claimDeliveries({ owner: 'owner-b', now: T0 + LEASE - 1, leaseMs: LEASE, limit: 10 }), []);
        const theirs = await store.claimDeliveries({ owner: 'owner-b', now: T0 + LEASE, leaseMs: LEASE, limit: 10 });
        assert.deepEqual(ids(theirs), ['d1']);
        assert.equal(theirs[0]!.claimedBy, 'owner-b');
        // The first owner lost it: its completion changes nothing.
        await store.completeDelivery('d1', 'owner-a');
        assert.deepEqual(ids(await store.listDeliveries()), ['d1']);
      });

      test('two owners claiming at the same moment never get the same delivery', async (store) => {
        for (let i = 0; i < 12; i++) await enqueue(store, delivery(`d${String(i).padStart(2, '0')}`, { createdAt: T0 + i }));
        const [a, b] = await Promise.all([
          store.claimDeliveries({ owner: 'owner-a', now: T0 + 100, leaseMs: LEASE, limit: 8 }),
          store.claimDeliveries({ owner: 'owner-b', now: T0 + 100, leaseMs: LEASE, limit: 8 }),
        ]);
        const taken = [...ids(a), ...ids(b)];
        assert.equal(new Set(taken).size, taken.length, 'no delivery went to both owners');
        assert.equal(taken.length, 12);
        for (const d of a) assert.equal(d.claimedBy, 'owner-a');
        for (const d of b) assert.equal(d.claimedBy, 'owner-b');
      });

      test('completeDelivery removes it, only for the owner', async (store) => {
        await enqueue(store, delivery('d1'));
        await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
        await store.completeDelivery('d1', 'owner-b');
        assert.deepEqual(ids(await store.listDeliveries()), ['d1']);
        await store.completeDelivery('d1', 'owner-a');
        assert.deepEqual(await store.listDeliveries(), []);
        await store.completeDelivery('d-missing', 'owner-a');
      });

      test('retryDelivery reschedules and releases the claim, only for the owner', async (store) => {
        const record = delivery('d1');
        await enqueue(store, record);
        await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
        await store.retryDelivery('d1', 'owner-b', { attempts: 9, nextAttemptAt: T0 + 1, lastError: 'not mine' });
        assert.equal((await store.listDeliveries())[0]!.attempts, 0);

        await store.retryDelivery('d1', 'owner-a', { attempts: 1, nextAttemptAt: T0 + 5_000, lastError: 'connector answered 500' });
        assert.deepEqual(await store.listDeliveries(), [
          { ...record, state: 'pending', attempts: 1, nextAttemptAt: T0 + 5_000, lastError: 'connector answered 500' },
        ]);
        assert.deepEqual(await store.claimDeliveries({ owner: 'owner-b', now: T0 + 4_999, leaseMs: LEASE, limit: 10 }), [], 'not due before nextAttemptAt');
        const again = await store.claimDeliveries({ owner: 'owner-b', now: T0 + 5_000, leaseMs: LEASE, limit: 10 });
        assert.deepEqual(ids(again), ['d1']);
        assert.equal(again[0]!.attempts, 1);
        assert.equal(again[0]!.lastError, 'connector answered 500');
      });

      test('failDelivery keeps it as failed, never claimed again, only for the owner', async (store) => {
        const record = delivery('d1');
        await enqueue(store, record);
        await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 10 });
        await store.failDelivery('d1', 'owner-b', 'not mine');
        assert.equal((await store.listDeliveries())[0]!.state, 'pending');
        await store.failDelivery('d1', 'owner-a', 'connector answered 409');
        assert.deepEqual(await store.listDeliveries(), [
          { ...record, state: 'failed', attempts: 0, nextAttemptAt: record.createdAt, lastError: 'connector answered 409' },
        ]);
        assert.deepEqual(await store.claimDeliveries({ owner: 'owner-b', now: FOREVER - LEASE, leaseMs: LEASE, limit: 10 }), []);
      });
    });

    describe('usage', () => {
      test('sumUsage totals by feature over [from, to), per resource', async (store) => {
        await store.recordUsage([
          { resourceId: 'r1', feature: 'requests', quantity: 1, at: T0 },
          { resourceId: 'r1', feature: 'requests', quantity: 2, at: T0 + 999 },
          { resourceId: 'r1', feature: 'requests', quantity: 4, at: T0 + 1000 },
          { resourceId: 'r1', feature: 'storage_gb', quantity: 0.5, at: T0 + 500 },
          { resourceId: 'r1', feature: 'constructor', quantity: 3, at: T0 + 1 },
          { resourceId: 'r2', feature: 'requests', quantity: 100, at: T0 },
        ]);
        await store.recordUsage([]);
        assert.deepEqual({ ...(await store.sumUsage('r1', T0, T0 + 1000)) }, { requests: 3, storage_gb: 0.5, constructor: 3 });
        assert.deepEqual({ ...(await store.sumUsage('r1', T0 + 1, T0 + 1001)) }, { requests: 6, storage_gb: 0.5, constructor: 3 });
        assert.deepEqual({ ...(await store.sumUsage('r1', T0 + 1000, T0 + 1000)) }, {});
        assert.deepEqual({ ...(await store.sumUsage('r2', 0, FOREVER)) }, { requests: 100 });
        assert.deepEqual({ ...(await store.sumUsage('r3', 0, FOREVER)) }, {});
      });

      test('hasUsage answers for [from, to) and the resource only', async (store) => {
        await store.recordUsage([{ resourceId: 'r1', feature: 'requests', quantity: 0, at: T0 }]);
        assert.equal(await store.hasUsage('r1', T0, T0 + 1), true, 'a zero quantity still counts as usage');
        assert.equal(await store.hasUsage('r1', T0 - 10, T0), false, 'to is exclusive');
        assert.equal(await store.hasUsage('r1', T0 + 1, FOREVER), false);
        assert.equal(await store.hasUsage('r2', 0, FOREVER), false);
      });

      test('pruneUsage deletes entries before the bound and answers how many', async (store) => {
        await store.recordUsage([
          { resourceId: 'r1', feature: 'requests', quantity: 1, at: T0 - 1 },
          { resourceId: 'r1', feature: 'requests', quantity: 2, at: T0 },
          { resourceId: 'r2', feature: 'requests', quantity: 5, at: T0 - 100 },
        ]);
        assert.equal(await store.pruneUsage(T0), 2);
        assert.equal(await store.pruneUsage(T0), 0);
        assert.deepEqual({ ...(await store.sumUsage('r1', 0, FOREVER)) }, { requests: 2 });
        assert.equal(await store.hasUsage('r2', 0, FOREVER), false);
      });
    });

    describe('values', () => {
      test('records are copies: changing what went in or came out changes nothing stored', async (store) => {
        const input = resource('r1');
        await putResource(store, input);
        input.features.seats = 99;
        input.plan = 'mutated';
        const read = (await store.getResource('r1'))!;
        read.features.tier = 'mutated';
        read.message = 'mutated';
        assert.deepEqual(await store.getResource('r1'), resource('r1'));

        const cred = credential('c1', 'r1');
        await putCredential(store, cred);
        cred.values.BONNETS_URL = 'mutated';
        const readCred = (await store.getCredential('c1'))!;
        readCred.values.BONNETS_URL = 'mutated';
        (await store.listCredentials('r1'))[0]!.values.BONNETS_URL = 'mutated';
        assert.deepEqual(await store.getCredential('c1'), credential('c1', 'r1'));

        const request: OperationRequest = { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 } };
        const claim = await claimed(store, claimInput({ key: 'resource:r9', targetId: 'r9', request }));
        (request.features as Record<string, unknown>).seats = 2;
        (claim.request as { features: Record<string, unknown> }).features.seats = 3;
        claim.state = 'pending';
        const readOp = (await store.getOperation('resource:r9'))!;
        readOp.fingerprint = 'mutated';
        const stored = (await store.getOperation('resource:r9'))!;
        assert.deepEqual(stored.request, { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 } });
        assert.equal(stored.state, 'running');
        assert.equal(stored.fingerprint, claim.fingerprint);
        (await store.listPendingOperations(10)).forEach((op) => (op.message = 'mutated'));

        const newDelivery = delivery('d1', { payload: { state: 'done', message: 'Credentials ready', credentials: { KEY: 'v' } } });
        await enqueue(store, newDelivery);
        newDelivery.payload.credentials!.KEY = 'mutated';
        const [claimedDelivery] = await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 1 });
        claimedDelivery!.payload.credentials!.KEY = 'mutated';
        claimedDelivery!.attempts = 42;
        const [listed] = await store.listDeliveries();
        assert.deepEqual(listed!.payload, { state: 'done', message: 'Credentials ready', credentials: { KEY: 'v' } });
        assert.equal(listed!.attempts, 0);
        listed!.state = 'failed';
        assert.equal((await store.listDeliveries())[0]!.state, 'pending');

        const entries = [{ resourceId: 'r1', feature: 'requests', quantity: 1, at: T0 }];
        await store.recordUsage(entries);
        entries[0]!.quantity = 1000;
        const totals = await store.sumUsage('r1', 0, FOREVER);
        totals.requests = 5000;
        assert.deepEqual({ ...(await store.sumUsage('r1', 0, FOREVER)) }, { requests: 1 });
      });

      test('values round-trip exactly: feature scalars, unicode, long and empty strings', async (store) => {
        const features = {
          int: 42,
          negative: -7,
          zero: 0,
          fraction: 0.1,
          large: 2 ** 53 - 1,
          tiny: 5e-324,
          yes: true,
          no: false,
          text: 'small',
          empty: '',
          unicode: 'ünïcødé ✓ 雪 🔑',
          escapes: 'quote " backslash \\ newline \n tab \t nul \u0000',
        };
        const record = resource('r1', { features, message: 'Prêt — ready ✓' });
        await putResource(store, record);
        assert.deepEqual(await store.getResource('r1'), record);

        const values = {
          BONNETS_URL: 'https://us3r:pässwörd🔑@bonnets.example/r1?x=1&y=%20',
          EMPTY: '',
          LONG: 'x'.repeat(20_000),
          SPECIAL: '\'";--\\\u0000\u2028',
        };
        const cred = credential('c1', 'r1', { values, message: 'Identifiants prêts ✓' });
        await putCredential(store, cred);
        assert.deepEqual(await store.getCredential('c1'), cred);

        const request: OperationRequest = { kind: 'changePlan', plan: 'large', features };
        const op = await claimed(store, claimInput({ kind: 'changePlan', request, fingerprint: 'large|ünï' }));
        assert.deepEqual(op.request, request);
        assert.deepEqual((await store.getOperation(op.key))!.request, request);
        assert.equal((await store.getOperation(op.key))!.fingerprint, 'large|ünï');

        const payload = { state: 'done' as const, message: 'Fertig ✓ 🔑', credentials: values };
        await enqueue(store, delivery('d1', { payload }));
        assert.deepEqual((await store.listDeliveries())[0]!.payload, payload);
        const [taken] = await store.claimDeliveries({ owner: 'owner-a', now: T0, leaseMs: LEASE, limit: 1 });
        assert.deepEqual(taken!.payload, payload);

        await store.recordUsage([{ resourceId: 'r1', feature: 'bytes', quantity: 2 ** 40, at: T0 }]);
        assert.equal((await store.sumUsage('r1', 0, FOREVER)).bytes, 2 ** 40);
      });

      test('every delivery record field survives the store', async (store) => {
        const record = delivery('d1', { createdAt: T0 + 7, deadlineAt: T0 + 86_400_007 });
        await enqueue(store, record);
        const [taken] = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 7, leaseMs: LEASE, limit: 5 });
        const expected: DeliveryRecord = { ...record, state: 'pending', attempts: 0, nextAttemptAt: T0 + 7, claimedBy: 'owner-a', claimExpiresAt: T0 + 7 + LEASE };
        assert.deepEqual(taken, expected);
        assert.deepEqual(await store.listDeliveries(), [expected]);
      });
    });
  });
}

const credentialClaim = (id: string, resourceId: string | undefined, overrides: Partial<ClaimInput> = {}): ClaimInput =>
  claimInput({
    key: `credential:${id}`,
    targetId: id,
    ...(resourceId === undefined
      ? { kind: 'deprovisionCredentials', request: { kind: 'deprovisionCredentials' }, fingerprint: '["deprovisionCredentials"]' }
      : { kind: 'provisionCredentials', request: { kind: 'provisionCredentials', resourceId }, fingerprint: `["provisionCredentials","${resourceId}"]`, parentId: resourceId }),
    ...overrides,
  });

const deprovisionClaim = (id: string, overrides: Partial<ClaimInput> = {}): ClaimInput =>
  claimInput({ key: `resource:${id}`, kind: 'deprovision', targetId: id, request: { kind: 'deprovision' }, fingerprint: '["deprovision"]', ...overrides });

async function pendingWith(store: ListingStore, input: ClaimInput, callback: boolean): Promise<OperationRecord> {
  const op = await claimed(store, input);
  return store.markOperationPending(op.key, op.token, {
    message: 'Working on it',
    deadlineAt: T0 + 86_400_000,
    ...(callback ? { callbackId: `cb-${op.targetId}`, callbackUrl: `https://connector.example/v1/callbacks/cb-${op.targetId}` } : {}),
  });
}

/**
 * The rules the operation table relies on (issue #11): the claim's snapshot, replay records, the
 * parent/child exclusion and orphaned pending credential operations, and the optional diagnostics
 * when the store has them. Part of the conformance suite: {@link storeConformance} runs it after
 * {@link storeContract}.
 */
export function operationTableContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions): void {
  const { describe } = options;
  const test = suiteTest(makeStore, options);

  describe(`store contract, operation table: ${name}`, () => {
    describe('claim snapshot', () => {
      test('a resource claim reads the resource and its tombstone', async (store) => {
        await putResource(store, resource('r1'));
        const claim = await store.claimOperation(claimInput({ key: 'resource:r1', kind: 'changePlan', request: { kind: 'changePlan', plan: 'large' }, now: T0 + 1 }));
        assert.equal(claim.outcome, 'claimed');
        if (claim.outcome !== 'claimed') return;
        assert.deepEqual(claim.snapshot, { resource: resource('r1'), resourceDeleted: false, credential: undefined, credentialDeleted: false, credentials: [] });

        await deleteResource(store, 'r2', T0);
        const gone = await store.claimOperation(claimInput({ key: 'resource:r2', targetId: 'r2', now: T0 + 1 }));
        assert.equal(gone.outcome, 'claimed');
        if (gone.outcome === 'claimed') assert.deepEqual(gone.snapshot, { resource: undefined, resourceDeleted: true, credential: undefined, credentialDeleted: false, credentials: [] });
      });

      test('a deprovision claim reads every credential set of the resource, oldest first', async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c2', 'r1', { createdAt: T0 + 2 }));
        await putCredential(store, credential('c1', 'r1', { createdAt: T0 + 1 }));
        await putResource(store, resource('other'));
        await putCredential(store, credential('x1', 'other'));
        const claim = await store.claimOperation(deprovisionClaim('r1', { now: T0 + 5 }));
        assert.equal(claim.outcome, 'claimed');
        if (claim.outcome === 'claimed') {
          assert.deepEqual(claim.snapshot.resource, resource('r1'));
          assert.deepEqual(claim.snapshot.credentials, [credential('c1', 'r1', { createdAt: T0 + 1 }), credential('c2', 'r1', { createdAt: T0 + 2 })]);
        }
      });

      test('a credential PUT claim reads its parent (parentId) and the credential; a DELETE finds the parent from the stored credential', async (store) => {
        await putResource(store, resource('r1'));
        const put = await store.claimOperation(credentialClaim('c1', 'r1'));
        assert.equal(put.outcome, 'claimed');
        if (put.outcome !== 'claimed') return;
        assert.deepEqual(put.snapshot, { resource: resource('r1'), resourceDeleted: false, credential: undefined, credentialDeleted: false, credentials: [] });
        await store.commitOperation(put.operation.key, put.operation.token, { mutation: { type: 'putCredential', credential: credential('c1', 'r1') } });

        const del = await store.claimOperation(credentialClaim('c1', undefined, { now: T0 + 1 }));
        assert.equal(del.outcome, 'claimed');
        if (del.outcome === 'claimed') {
          assert.deepEqual(del.snapshot, { resource: resource('r1'), resourceDeleted: false, credential: credential('c1', 'r1'), credentialDeleted: false, credentials: [] });
          await store.commitOperation(del.operation.key, del.operation.token, { mutation: { type: 'deleteCredential', id: 'c1', deletedAt: T0 + 1 } });
        }
        const again = await store.claimOperation(credentialClaim('c1', 'r1', { now: T0 + 2 }));
        assert.equal(again.outcome, 'claimed');
        if (again.outcome === 'claimed') assert.equal(again.snapshot.credentialDeleted, true);
      });
    });

    describe('replay records', () => {
      test('a committed replay record answers a claim with that request id, and nothing is claimed', async (store) => {
        const op = await claimed(store, claimInput());
        const answer = { status: 201, body: { message: 'Resource r1 is ready' } };
        await store.commitOperation(op.key, op.token, { mutation: { type: 'putResource', resource: resource('r1') }, replay: { requestId: 'sig-1', answer, expiresAt: T0 + 600_000 } });
        assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-1', now: T0 + 1 })), { outcome: 'replayed', answer });
        assert.equal(await store.getOperation('resource:r1'), undefined, 'a replay claims nothing');
        assert.equal((await store.claimOperation(claimInput({ requestId: 'sig-2', now: T0 + 1 }))).outcome, 'claimed', 'another signature claims');
      });

      test('a replay record written with a 202 answers 202 again; records keep credential values', async (store) => {
        const op = await claimed(store, credentialClaim('c1', 'r1'));
        await store.markOperationPending(op.key, op.token, { message: 'Issuing', deadlineAt: T0 + 86_400_000, replay: { requestId: 'sig-p', answer: { status: 202, body: { message: 'Issuing' } }, expiresAt: T0 + 600_000 } });
        assert.deepEqual(await store.claimOperation(credentialClaim('c1', 'r1', { requestId: 'sig-p', now: T0 + 1 })), { outcome: 'replayed', answer: { status: 202, body: { message: 'Issuing' } } });

        const other = await claimed(store, claimInput({ key: 'resource:r9', targetId: 'r9' }));
        const body = { message: 'Ready', credentials: { BONNETS_URL: 'https://u:p@bonnets.example' } };
        await store.commitOperation(other.key, other.token, { mutation: { type: 'none' }, replay: { requestId: 'sig-c', answer: { status: 201, body }, expiresAt: T0 + 600_000 } });
        const replayed = await store.claimOperation(claimInput({ key: 'resource:r9', targetId: 'r9', requestId: 'sig-c', now: T0 + 1 }));
        assert.deepEqual(replayed, { outcome: 'replayed', answer: { status: 201, body } });
      });

      test('pruneReplays deletes records past their time and answers how many', async (store) => {
        for (const [requestId, expiresAt] of [['old', T0 + 10], ['edge', T0 + 20], ['new', T0 + 30]] as const) {
          const op = await claimed(store, claimInput({ key: `resource:${requestId}`, targetId: requestId }));
          await store.commitOperation(op.key, op.token, { mutation: { type: 'none' }, replay: { requestId, answer: { status: 204 }, expiresAt } });
        }
        assert.equal(await store.pruneReplays(T0 + 20), 1);
        assert.equal((await store.claimOperation(claimInput({ key: 'resource:old', targetId: 'old', requestId: 'old', now: T0 + 21 }))).outcome, 'claimed');
        assert.equal((await store.claimOperation(claimInput({ key: 'resource:edge', targetId: 'edge', requestId: 'edge', now: T0 + 20 }))).outcome, 'replayed');
        assert.equal(await store.pruneReplays(T0 + 31), 2);
      });
    });

    describe('parent/child exclusion', () => {
      test('a credential claim is blocked while its resource holds a live deprovision, running or pending', async (store) => {
        await putResource(store, resource('r1'));
        const deprovision = await claimed(store, deprovisionClaim('r1'));
        const blocked = await store.claimOperation(credentialClaim('c1', 'r1'));
        assert.equal(blocked.outcome, 'blocked');
        assert.equal(heldBy(blocked).key, 'resource:r1');
        assert.equal(await store.getOperation('credential:c1'), undefined, 'nothing claimed');

        await store.markOperationPending(deprovision.key, deprovision.token, { message: 'Unravelling', deadlineAt: T0 + 86_400_000 });
        assert.equal((await store.claimOperation(credentialClaim('c1', 'r1', { now: T0 + 1 }))).outcome, 'blocked');
        assert.equal((await store.claimOperation(credentialClaim('c2', 'other', { now: T0 + 1 }))).outcome, 'claimed', 'other resources are free');
      });

      test('a credential DELETE is blocked through its stored credential; other resource operations do not block', async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        const change = await claimed(store, claimInput({ key: 'resource:r1', kind: 'changePlan', request: { kind: 'changePlan', plan: 'large' } }));
        assert.equal((await store.claimOperation(credentialClaim('c1', undefined))).outcome, 'claimed', 'a plan change does not block credentials');
        await store.releaseOperation('credential:c1', heldBy(await store.claimOperation(credentialClaim('c1', undefined))).token);
        await store.releaseOperation(change.key, change.token);
        await claimed(store, deprovisionClaim('r1', { now: T0 + 1 }));
        assert.equal((await store.claimOperation(credentialClaim('c1', undefined, { now: T0 + 1 }))).outcome, 'blocked');
      });

      test('a deprovision claim is blocked while a credential operation of the resource runs, not while one is pending', async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        const running = await claimed(store, credentialClaim('c2', 'r1'));
        const blocked = await store.claimOperation(deprovisionClaim('r1'));
        assert.equal(blocked.outcome, 'blocked');
        assert.equal(heldBy(blocked).key, 'credential:c2');
        await store.releaseOperation(running.key, running.token);

        const deleting = await claimed(store, credentialClaim('c1', undefined));
        assert.equal((await store.claimOperation(deprovisionClaim('r1'))).outcome, 'blocked', 'a running credential DELETE blocks too');
        await store.markOperationPending(deleting.key, deleting.token, { message: 'Revoking', deadlineAt: T0 + 86_400_000 });
        assert.equal((await store.claimOperation(deprovisionClaim('r1'))).outcome, 'claimed', 'a pending one does not');
      });

      test('a lapsed holder blocks nothing', async (store) => {
        await claimed(store, deprovisionClaim('r1'));
        assert.equal((await store.claimOperation(credentialClaim('c1', 'r1', { now: T0 + LEASE + 1 }))).outcome, 'claimed');
      });
    });

    describe('orphaned pending credential operations', () => {
      test('deleting a resource removes its pending credential operations and enqueues an error callback for those with callback headers', async (store) => {
        await putResource(store, resource('r1'));
        await putCredential(store, credential('c1', 'r1'));
        const withCallback = await pendingWith(store, credentialClaim('c2', 'r1'), true);
        await pendingWith(store, credentialClaim('c1', undefined), false);
        const elsewhere = await pendingWith(store, credentialClaim('c9', 'other'), true);

        const op = await claimed(store, deprovisionClaim('r1', { now: T0 + 5 }));
        await store.commitOperation(op.key, op.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 5 }, orphanMessage: 'The resource was deprovisioned' });

        assert.equal(await store.getOperation('credential:c2'), undefined);
        assert.equal(await store.getOperation('credential:c1'), undefined);
        assert.deepEqual(await store.getOperation('credential:c9'), elsewhere, 'other resources keep theirs');
        const deliveries = await store.listDeliveries();
        assert.equal(deliveries.length, 1);
        const [sent] = deliveries;
        assert.equal(sent!.callbackId, withCallback.callbackId);
        assert.equal(sent!.url, withCallback.callbackUrl);
        assert.deepEqual(sent!.payload, { state: 'error', message: 'The resource was deprovisioned' });
        assert.equal(sent!.deadlineAt, withCallback.deadlineAt);
        assert.equal(sent!.state, 'pending');
        assert.equal(sent!.nextAttemptAt, T0 + 5);
      });

      test('a failed deleteResource commit leaves the pending credential operations alone', async (store) => {
        await putResource(store, resource('r1'));
        const pending = await pendingWith(store, credentialClaim('c2', 'r1'), true);
        const op = await claimed(store, deprovisionClaim('r1', { now: T0 + 5 }));
        await assert.rejects(store.commitOperation(op.key, 'not-the-token', { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 5 }, orphanMessage: 'The resource was deprovisioned' }), LeaseLostError);
        assert.deepEqual(await store.getOperation('credential:c2'), pending);
        assert.deepEqual(await store.listDeliveries(), []);
      });
    });

    describe('diagnostics (optional methods)', () => {
      test('delivery summaries, due-making, dropping and stats never carry payloads', async (store) => {
        if (store.listDeliverySummaries === undefined) return;
        await enqueue(store, delivery('d1', { createdAt: T0 }));
        await enqueue(store, delivery('d2', { createdAt: T0 + 1 }));
        const [taken] = await store.claimDeliveries({ owner: 'owner-a', now: T0 + 1, leaseMs: LEASE, limit: 1 });
        await store.failDelivery(taken!.id, 'owner-a', 'rejected with status 409');

        const summaries = await store.listDeliverySummaries();
        assert.deepEqual(summaries.map((s) => [s.id, s.state]), [['d1', 'failed'], ['d2', 'pending']]);
        for (const summary of summaries) assert.equal('payload' in summary, false);
        assert.deepEqual((await store.listDeliverySummaries({ state: 'pending' })).map((s) => s.id), ['d2']);
        assert.deepEqual((await store.listDeliverySummaries({ limit: 1 })).map((s) => s.id), ['d1']);
        assert.equal((await store.getDeliverySummary!('d1'))?.lastError, 'rejected with status 409');
        assert.equal(await store.getDeliverySummary!('nope'), undefined);
        assert.deepEqual(await store.outboxStats!(), { pending: 1, failed: 1, oldestPendingCreatedAt: T0 + 1 });

        assert.equal(await store.makeDeliveryDue!('d1', T0 + 50), true);
        const due = await store.getDeliverySummary!('d1');
        assert.deepEqual([due?.state, due?.nextAttemptAt, due?.claimedBy], ['pending', T0 + 50, undefined]);
        assert.equal(await store.makeDeliveryDue!('nope', T0), false);
        assert.equal(await store.dropDelivery!('d2'), true);
        assert.equal(await store.dropDelivery!('d2'), false);
        assert.deepEqual(await store.outboxStats!(), { pending: 1, failed: 0, oldestPendingCreatedAt: T0 });
      });

      test('pending operations are counted, and ping answers', async (store) => {
        if (store.countPendingOperations === undefined) return;
        assert.equal(await store.countPendingOperations(), 0);
        await pendingWith(store, claimInput(), false);
        await claimed(store, claimInput({ key: 'resource:r2', targetId: 'r2' }));
        assert.equal(await store.countPendingOperations(), 1);
        await store.ping!();
      });
    });
  });
}

/**
 * Runs the whole conformance suite (the contract's rules, then the operation table's: claim
 * snapshot, replay records, parent/child exclusion, orphaned credential operations, diagnostics).
 */
export function storeConformance(options: StoreConformanceOptions): void {
  const { name, makeStore, ...rest } = options;
  storeContract(name, makeStore, rest);
  operationTableContract(name, makeStore, rest);
}
