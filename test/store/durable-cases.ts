/**
 * Cases the two durable adapters share beyond the conformance suite: the diagnostics view
 * (StoreDiagnostics) and a store opened without its encryption key, both against the same database
 * a keyed store wrote. Run from sqlite.test.ts and postgres.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DecryptionError, MissingEncryptionKeyError } from '../../src/store/crypto.js';
import type { ClaimInput, DiagnosableStore } from '../../src/store/types.js';
import { heldBy } from './contract.js';

/** Opens a store on one database; every call of `open` reaches the same data. */
export interface SharedDatabase {
  open(encryptionKey: 'key' | false): Promise<DiagnosableStore>;
  cleanup(): Promise<void>;
}

const T0 = 1_700_000_000_000;
const SECRET = 'https://user:hunter2-secret@bonnets.example/r1';

function claimInput(overrides: Partial<ClaimInput>): ClaimInput {
  return {
    key: 'resource:r1',
    kind: 'provision',
    targetId: 'r1',
    fingerprint: 'f',
    request: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: {} },
    owner: 'owner-a',
    now: T0,
    leaseMs: 30_000,
    ...overrides,
  };
}

/** A resource, a credential set (with its sealed callback), a failed delivery and a pending operation. */
async function seed(store: DiagnosableStore): Promise<void> {
  const r = heldBy(await store.claimOperation(claimInput({})));
  await store.commitOperation(r.key, r.token, {
    mutation: { type: 'putResource', resource: { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global', features: {}, message: 'Ready', createdAt: T0, updatedAt: T0 } },
  });
  const c = heldBy(
    await store.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' }, now: T0 + 1 })),
  );
  await store.commitOperation(c.key, c.token, {
    mutation: { type: 'putCredential', credential: { id: 'c1', resourceId: 'r1', values: { URL: SECRET }, message: 'Ready', createdAt: T0 + 1 } },
    delivery: { id: 'd1', callbackId: 'cb1', url: 'https://connector.example/v1/callbacks/cb1', payload: { state: 'done', message: 'Ready', credentials: { URL: SECRET } }, createdAt: T0 + 1, deadlineAt: T0 + 86_400_000 },
  });
  const e = heldBy(await store.claimOperation(claimInput({ key: 'resource:r2', targetId: 'r2', now: T0 + 2 })));
  await store.commitOperation(e.key, e.token, {
    mutation: { type: 'none' },
    delivery: { id: 'd2', callbackId: 'cb2', url: 'https://connector.example/v1/callbacks/cb2', payload: { state: 'error', message: 'No' }, createdAt: T0 + 2, deadlineAt: T0 + 86_400_000 },
  });
  const [claimed] = await store.claimDeliveries({ owner: 'outbox', now: T0 + 3, leaseMs: 10_000, limit: 1 });
  assert.equal(claimed?.id, 'd1');
  await store.failDelivery('d1', 'outbox', 'HTTP 410');
  const p = heldBy(await store.claimOperation(claimInput({ key: 'resource:r3', targetId: 'r3', now: T0 + 4 })));
  await store.markOperationPending(p.key, p.token, { message: 'Working on it', deadlineAt: T0 + 86_400_000, callbackId: 'cb3', callbackUrl: 'https://connector.example/v1/callbacks/cb3' });
}

export function durableCases(name: string, makeDatabase: () => Promise<SharedDatabase>, options: { skip?: string | false } = {}): void {
  const skip = options.skip ?? false;
  function test(title: string, body: (db: SharedDatabase) => Promise<void>): void {
    it(title, { skip }, async () => {
      const db = await makeDatabase();
      try {
        await body(db);
      } finally {
        await db.cleanup();
      }
    });
  }

  describe(`durable store cases: ${name}`, () => {
    test('diagnostics list, count, reschedule and drop deliveries and pending operations without any payload', async (db) => {
      const store = await db.open('key');
      await seed(store);
      await store.ping();
      assert.deepEqual(await store.outboxStats(), { pending: 1, failed: 1, oldestPendingCreatedAt: T0 + 2 });
      const all = await store.listDeliverySummaries();
      assert.deepEqual(all.map((d) => [d.id, d.state]), [['d1', 'failed'], ['d2', 'pending']]);
      assert.ok(all.every((d) => !('payload' in d)), 'a summary has no payload');
      assert.equal(JSON.stringify(all).includes('hunter2'), false);
      assert.deepEqual((await store.listDeliverySummaries({ state: 'failed' })).map((d) => d.id), ['d1']);
      assert.deepEqual((await store.listDeliverySummaries({ limit: 1 })).map((d) => d.id), ['d1']);
      const failed = await store.getDeliverySummary('d1');
      assert.equal(failed?.lastError, 'HTTP 410');
      assert.equal(failed?.attempts, 0);
      assert.equal(await store.getDeliverySummary('nope'), undefined);

      assert.equal(await store.makeDeliveryDue('d1', T0 + 100), true);
      assert.equal(await store.makeDeliveryDue('nope', T0 + 100), false);
      const due = await store.getDeliverySummary('d1');
      assert.deepEqual([due?.state, due?.nextAttemptAt, due?.claimedBy], ['pending', T0 + 100, undefined]);
      const [again] = await store.claimDeliveries({ owner: 'outbox', now: T0 + 100, leaseMs: 10_000, limit: 1 });
      assert.equal(again?.id, 'd2', 'oldest due first: d2 was due at T0 + 2');

      assert.equal(await store.dropDelivery('d2'), true);
      assert.equal(await store.dropDelivery('d2'), false);
      assert.deepEqual(await store.outboxStats(), { pending: 1, failed: 0, oldestPendingCreatedAt: T0 + 1 });

      assert.equal(await store.countPendingOperations(), 1);
      assert.deepEqual((await store.listPendingOperations(10)).map((o) => [o.key, o.callbackId]), [['resource:r3', 'cb3']]);
      await store.close();
    });

    test('an empty outbox has no oldest pending delivery', async (db) => {
      const store = await db.open('key');
      assert.deepEqual(await store.outboxStats(), { pending: 0, failed: 0, oldestPendingCreatedAt: undefined });
      assert.equal(await store.countPendingOperations(), 0);
      await store.close();
    });

    test('encryptionKey: false opens the same data for diagnostics only; every secret read or write rejects and says why', async (db) => {
      const keyed = await db.open('key');
      await seed(keyed);
      await keyed.close();
      const view = await db.open(false);
      try {
        assert.deepEqual((await view.listDeliverySummaries()).map((d) => d.id), ['d1', 'd2']);
        assert.deepEqual(await view.outboxStats(), { pending: 1, failed: 1, oldestPendingCreatedAt: T0 + 2 });
        assert.equal(await view.countPendingOperations(), 1);
        assert.equal((await view.getResource('r1'))?.message, 'Ready', 'a resource holds no secret');
        assert.equal(await view.makeDeliveryDue('d1', T0 + 100), true);
        const refusal = (error: unknown): boolean =>
          error instanceof MissingEncryptionKeyError &&
          error instanceof DecryptionError &&
          /without an encryption key/.test(error.message) &&
          !error.message.includes('hunter2');
        await assert.rejects(view.getCredential('c1'), refusal);
        await assert.rejects(view.listCredentials('r1'), refusal);
        await assert.rejects(view.listDeliveries(), refusal);
        await assert.rejects(view.claimDeliveries({ owner: 'o', now: T0 + 100, leaseMs: 1000, limit: 10 }), refusal);
        const c = heldBy(
          await view.claimOperation(claimInput({ key: 'credential:c2', kind: 'provisionCredentials', targetId: 'c2', request: { kind: 'provisionCredentials', resourceId: 'r1' }, now: T0 + 10 })),
        );
        await assert.rejects(
          view.commitOperation(c.key, c.token, { mutation: { type: 'putCredential', credential: { id: 'c2', resourceId: 'r1', values: { URL: 'x' }, message: 'm', createdAt: T0 } } }),
          refusal,
        );
        assert.equal(await view.getOperation('credential:c2').then((o) => o?.token), c.token, 'the refused commit left the claim held');
      } finally {
        await view.close();
      }
    });

    test('recorded answers are replayed until they expire, then pruned; a credential answer needs the key', async (db) => {
      const store = await db.open('key');
      const r = heldBy(await store.claimOperation(claimInput({ requestId: 'sig-1' })));
      const body = { message: 'Ready', credentials: { URL: SECRET } };
      await store.commitOperation(r.key, r.token, {
        mutation: { type: 'putResource', resource: { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global', features: {}, message: 'Ready', createdAt: T0, updatedAt: T0 } },
        replay: { requestId: 'sig-1', answer: { status: 201, body }, expiresAt: T0 + 600_000 },
      });
      const plain = heldBy(await store.claimOperation(claimInput({ key: 'resource:r4', targetId: 'r4', requestId: 'sig-plain' })));
      await store.markOperationPending(plain.key, plain.token, { message: 'Working', deadlineAt: T0 + 1000, replay: { requestId: 'sig-plain', answer: { status: 202, body: { message: 'Working' } }, expiresAt: T0 + 600_000 } });
      const replayed = await store.claimOperation(claimInput({ requestId: 'sig-1', now: T0 + 600_000 }));
      assert.deepEqual(replayed, { outcome: 'replayed', answer: { status: 201, body } });
      assert.deepEqual(await store.claimOperation(claimInput({ requestId: 'sig-plain', now: T0 + 10 })), { outcome: 'replayed', answer: { status: 202, body: { message: 'Working' } } });
      await store.close();
      const view = await db.open(false);
      try {
        // An answer without credentials is kept plain: a keyless store replays it and records one.
        assert.deepEqual(await view.claimOperation(claimInput({ requestId: 'sig-plain', now: T0 + 10 })), { outcome: 'replayed', answer: { status: 202, body: { message: 'Working' } } });
        // A credential answer is sealed: without the key it can be neither replayed nor recorded.
        await assert.rejects(view.claimOperation(claimInput({ requestId: 'sig-1', now: T0 + 10 })), MissingEncryptionKeyError);
        const p = heldBy(await view.claimOperation(claimInput({ key: 'resource:r9', targetId: 'r9', now: T0 })));
        await assert.rejects(
          view.markOperationPending(p.key, p.token, { message: 'Working', deadlineAt: T0 + 1000, replay: { requestId: 'sig-2', answer: { status: 202, body: { message: 'Working', credentials: { URL: SECRET } } }, expiresAt: T0 + 1000 } }),
          MissingEncryptionKeyError,
        );
        const q = heldBy(await view.claimOperation(claimInput({ key: 'resource:r8', targetId: 'r8', now: T0 })));
        await view.markOperationPending(q.key, q.token, { message: 'Working', deadlineAt: T0 + 1000, replay: { requestId: 'sig-3', answer: { status: 202, body: { message: 'Working' } }, expiresAt: T0 + 1000 } });
      } finally {
        await view.close();
      }
      const reopened = await db.open('key');
      try {
        assert.equal(await reopened.pruneReplays(T0 + 600_000), 1, 'only sig-3 (expired) goes; the others are kept until expiresAt');
        assert.equal(await reopened.pruneReplays(T0 + 600_001), 2);
        assert.equal((await reopened.claimOperation(claimInput({ requestId: 'sig-1', now: T0 + 600_001 }))).outcome, 'claimed');
      } finally {
        await reopened.close();
      }
    });
  });
}
