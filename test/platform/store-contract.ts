/**
 * The conformance cases every platform store passes: the OAuth store (atomic redemption, revoked
 * grants consulted at save and at use, bounded codes, sweeping) and the seen-event store (one claim
 * wins, lapsed claims are taken over, done deliveries expire). Run against the memory stores and
 * PostgreSQL with the same cases.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { OAuthRecord, OAuthStore, SeenEventStore } from '../../src/platform/index.js';

export interface StoreFactory<T> {
  /** A fresh, empty store; `close` ends whatever it holds. */
  open(): Promise<{ store: T; close(): Promise<void> }>;
}

const T0 = 1_700_000_000_000;
const LIMITS = { perUser: 3, total: 5 };
const alice = { sub: 'u-alice', name: 'Alice', email: 'alice@example.com' };
const bob = { sub: 'u-bob', name: 'Bob', email: 'bob@example.com' };

function record(overrides: Partial<OAuthRecord> = {}): OAuthRecord {
  return { grantId: 'g-1', clientId: 'client-a', user: alice, expiresAt: T0 + 60_000, scope: 'id email name', ...overrides };
}

async function withStore<T>(factory: StoreFactory<T>, run: (store: T) => Promise<void>): Promise<void> {
  const { store, close } = await factory.open();
  try {
    await run(store);
  } finally {
    await close();
  }
}

export function oauthStoreContract(name: string, factory: StoreFactory<OAuthStore>, options: { skip?: string | false } = {}): void {
  describe(`OAuthStore contract: ${name}`, { skip: options.skip }, () => {
    const use = (run: (store: OAuthStore) => Promise<void>) => withStore(factory, run);

    it('keeps every field of a record and finds it until it expires', () =>
      use(async (store) => {
        const full = record({ redirectUri: 'https://m.test/cb', codeChallenge: 'c'.repeat(43), codeChallengeMethod: 'S256' });
        assert.equal(await store.saveCode('h1', full, LIMITS, T0), 'saved');
        assert.deepEqual(await store.find('code', 'h1', T0), full);
        assert.equal(await store.find('code', 'h1', T0 + 60_000), undefined, 'expired');
        assert.equal(await store.find('access', 'h1', T0), undefined, 'kinds are separate');
        const token = record({ rotationSeed: 'seed' });
        assert.equal(await store.saveToken('refresh', 'r1', token, T0), 'saved');
        assert.deepEqual(await store.find('refresh', 'r1', T0), token);
      }));

    it('redeems once: of 20 concurrent redemptions exactly one wins, the others see a replay', () =>
      use(async (store) => {
        await store.saveCode('h1', record(), LIMITS, T0);
        const results = await Promise.all(Array.from({ length: 20 }, () => store.redeem('code', 'h1', { clientId: 'client-a', now: T0 + 1 })));
        assert.equal(results.filter((r) => r.outcome === 'redeemed').length, 1);
        assert.equal(results.filter((r) => r.outcome === 'replayed').length, 19);
        const replay = results.find((r) => r.outcome === 'replayed');
        assert.equal(replay?.outcome === 'replayed' ? replay.usedAt : undefined, T0 + 1);
        assert.equal(await store.find('code', 'h1', T0 + 2), undefined, 'a used record is not found');
      }));

    it('leaves a record presented by another client untouched', () =>
      use(async (store) => {
        await store.saveCode('h1', record(), LIMITS, T0);
        assert.deepEqual(await store.redeem('code', 'h1', { clientId: 'client-b', now: T0 }), { outcome: 'wrong-client' });
        assert.equal((await store.redeem('code', 'h1', { clientId: 'client-a', now: T0 })).outcome, 'redeemed');
      }));

    it('answers invalid for unknown and expired records', () =>
      use(async (store) => {
        assert.deepEqual(await store.redeem('code', 'nope', { clientId: 'client-a', now: T0 }), { outcome: 'invalid' });
        await store.saveToken('refresh', 'r1', record(), T0);
        assert.deepEqual(await store.redeem('refresh', 'r1', { clientId: 'client-a', now: T0 + 60_000 }), { outcome: 'invalid' });
      }));

    it('revokes a grant: its records go, and a token saved afterwards is refused at save and never usable', () =>
      use(async (store) => {
        await store.saveCode('c1', record(), LIMITS, T0);
        await store.saveToken('access', 'a1', record(), T0);
        await store.saveToken('access', 'other', record({ grantId: 'g-2' }), T0);
        await store.revokeGrant('g-1', T0 + 120_000);
        assert.equal(await store.find('access', 'a1', T0), undefined);
        assert.deepEqual(await store.redeem('code', 'c1', { clientId: 'client-a', now: T0 }), { outcome: 'invalid' });
        assert.equal(await store.saveToken('access', 'late', record(), T0 + 1), 'revoked');
        assert.equal(await store.find('access', 'late', T0 + 1), undefined);
        assert.ok(await store.find('access', 'other', T0), 'other grants are untouched');
      }));

    it('saving an existing token hash again changes nothing', () =>
      use(async (store) => {
        const first = record({ scope: 'id' });
        await store.saveToken('access', 'a1', first, T0);
        assert.equal(await store.saveToken('access', 'a1', record({ scope: 'id email' }), T0), 'saved');
        assert.deepEqual(await store.find('access', 'a1', T0), first);
      }));

    it('revokes every grant of a subject', () =>
      use(async (store) => {
        await store.saveToken('access', 'a1', record({ grantId: 'g-1' }), T0);
        await store.saveToken('refresh', 'r2', record({ grantId: 'g-2' }), T0);
        await store.saveToken('access', 'b1', record({ grantId: 'g-3', user: bob }), T0);
        assert.equal(await store.revokeSubject('u-alice', T0 + 120_000), 2);
        assert.equal(await store.find('access', 'a1', T0), undefined);
        assert.equal(await store.find('refresh', 'r2', T0), undefined);
        assert.ok(await store.find('access', 'b1', T0));
        assert.equal(await store.saveToken('access', 'late', record({ grantId: 'g-2' }), T0), 'revoked');
      }));

    it('bounds outstanding codes per user and in total; redeemed and expired codes do not count', () =>
      use(async (store) => {
        for (let i = 0; i < 3; i += 1) assert.equal(await store.saveCode(`a${i}`, record({ grantId: `ga${i}` }), LIMITS, T0), 'saved');
        assert.equal(await store.saveCode('a3', record({ grantId: 'ga3' }), LIMITS, T0), 'user-limit');
        await store.redeem('code', 'a0', { clientId: 'client-a', now: T0 });
        assert.equal(await store.saveCode('a3', record({ grantId: 'ga3' }), LIMITS, T0), 'saved', 'a redeemed code frees a place');
        assert.equal(await store.saveCode('b0', record({ grantId: 'gb0', user: bob }), LIMITS, T0), 'saved');
        assert.equal(await store.saveCode('b1', record({ grantId: 'gb1', user: bob }), LIMITS, T0), 'saved');
        assert.equal(await store.saveCode('b2', record({ grantId: 'gb2', user: bob }), LIMITS, T0), 'total-limit');
        assert.equal(await store.saveCode('b2', record({ grantId: 'gb2', user: bob, expiresAt: T0 + 120_000 }), LIMITS, T0 + 60_000), 'saved', 'expired codes do not count');
        assert.equal(await store.saveCode('b3', record({ grantId: 'gb3', user: bob, expiresAt: T0 + 120_000 }), LIMITS, T0 + 60_000), 'saved');
        // Tokens never count against, and are never evicted by, codes.
        assert.equal(await store.saveToken('access', 't1', record({ grantId: 'ga3', expiresAt: T0 + 999_999 }), T0 + 60_000), 'saved');
        assert.ok(await store.find('access', 't1', T0 + 60_000));
      }));

    it('sweeps expired records and lapsed revocations, and nothing live', () =>
      use(async (store) => {
        await store.saveToken('access', 'old', record({ grantId: 'g-old', expiresAt: T0 + 10 }), T0);
        await store.saveToken('access', 'live', record({ grantId: 'g-live', expiresAt: T0 + 10_000 }), T0);
        await store.revokeGrant('g-gone', T0 + 20);
        assert.equal(await store.sweep(T0 + 100), 2);
        assert.ok(await store.find('access', 'live', T0 + 100));
        assert.equal(await store.saveToken('access', 'again', record({ grantId: 'g-gone', expiresAt: T0 + 10_000 }), T0 + 100), 'saved', 'the lapsed revocation is gone');
      }));
  });
}

export function seenStoreContract(name: string, factory: StoreFactory<SeenEventStore>, options: { skip?: string | false } = {}): void {
  describe(`SeenEventStore contract: ${name}`, { skip: options.skip }, () => {
    const use = (run: (store: SeenEventStore) => Promise<void>) => withStore(factory, run);
    const claim = (owner: string, now: number, leaseMs = 1000) => ({ owner, now, leaseExpiresAt: now + leaseMs });

    it('one of 30 concurrent claims wins; the others see busy with the lease end', () =>
      use(async (store) => {
        const results = await Promise.all(Array.from({ length: 30 }, (_, i) => store.claim('k', claim(`o${i}`, T0))));
        assert.equal(results.filter((r) => r.outcome === 'claimed').length, 1);
        for (const r of results.filter((r) => r.outcome !== 'claimed')) assert.deepEqual(r, { outcome: 'busy', leaseExpiresAt: T0 + 1000 });
      }));

    it('a completed delivery answers done until it expires, then can be claimed again', () =>
      use(async (store) => {
        assert.deepEqual(await store.claim('k', claim('a', T0)), { outcome: 'claimed' });
        await store.complete('k', 'a', T0 + 5000);
        assert.deepEqual(await store.claim('k', claim('b', T0 + 4999)), { outcome: 'done' });
        assert.deepEqual(await store.claim('k', claim('b', T0 + 5000)), { outcome: 'claimed' });
      }));

    it('a released claim (failed handler) can be claimed at once; a lapsed one once its lease ended', () =>
      use(async (store) => {
        await store.claim('k', claim('a', T0));
        await store.release('k', 'a');
        assert.deepEqual(await store.claim('k', claim('b', T0)), { outcome: 'claimed' });
        assert.deepEqual(await store.claim('k', claim('c', T0 + 999)), { outcome: 'busy', leaseExpiresAt: T0 + 1000 });
        assert.deepEqual(await store.claim('k', claim('c', T0 + 1000)), { outcome: 'claimed' }, 'lapsed');
        await store.release('k', 'b');
        assert.deepEqual(await store.claim('k', claim('d', T0 + 1001)), { outcome: 'busy', leaseExpiresAt: T0 + 2000 }, "another owner's release changes nothing");
      }));

    it('keys are independent', () =>
      use(async (store) => {
        await store.claim('k1', claim('a', T0));
        assert.deepEqual(await store.claim('k2', claim('b', T0)), { outcome: 'claimed' });
      }));
  });
}
