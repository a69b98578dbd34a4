/**
 * Batched PostgreSQL claims never deadlock across instances (issue 19). Two stores (two pools, two
 * "instances") on one schema send, round after round, one batch each over the same keys in
 * opposite orders: resources, credentials of shared parents and their deprovisions, so that both
 * the row locks of the operations table and the advisory locks of the parent/child exclusion are
 * taken. A batch takes every lock it needs in one global order, so:
 *
 * - pg_stat_database counts no deadlock for the database (a database of the test's own, so that no
 *   other test's deadlocks count; the count is read after both pools closed, which flushes the
 *   servers' statistics);
 * - no batch failed as a whole and fell back to single claims (the store logs each such fallback
 *   with the server's code: a deadlock would be 40P01);
 * - no claim took as long as a lease;
 * - and every key was claimed at most once.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { postgresStore, type PostgresStore } from '../../src/store/postgres/index.js';
import type { ClaimInput, ClaimResult } from '../../src/store/types.js';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';

const skip = await postgresSkipReason();
const KEY = Buffer.alloc(32, 3).toString('base64');
const LEASE_MS = 30_000;
const ROUNDS = 200;
const T0 = 1_700_000_000_000;

/** One round's claims: 4 provisions, 4 credential PUTs over 2 parents, and those parents' 2 deprovisions. */
function roundClaims(round: number, owner: string): ClaimInput[] {
  const base = { owner, now: T0 + round, leaseMs: LEASE_MS };
  const claims: ClaimInput[] = [];
  for (let i = 0; i < 4; i++) {
    const id = `r${round}-${i}`;
    claims.push({ ...base, key: `resource:${id}`, kind: 'provision', targetId: id, fingerprint: 'p', request: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: {} } });
  }
  for (let i = 0; i < 4; i++) {
    const id = `c${round}-${i}`;
    const parent = `p${round}-${i % 2}`;
    claims.push({ ...base, key: `credential:${id}`, kind: 'provisionCredentials', targetId: id, fingerprint: parent, request: { kind: 'provisionCredentials', resourceId: parent }, parentId: parent });
  }
  for (let i = 0; i < 2; i++) {
    const id = `p${round}-${i}`;
    claims.push({ ...base, key: `resource:${id}`, kind: 'deprovision', targetId: id, fingerprint: 'd', request: { kind: 'deprovision' } });
  }
  return claims;
}

describe('batched PostgreSQL claims across two instances', { skip }, () => {
  const database = `em_deadlock_${randomBytes(5).toString('hex')}`;
  const url = new URL(DATABASE_URL);
  url.pathname = `/${database}`;
  const admin = () => new pg.Client({ connectionString: DATABASE_URL });

  before(async () => {
    const client = admin();
    await client.connect();
    try {
      await client.query(`CREATE DATABASE "${database}"`);
    } finally {
      await client.end();
    }
  });

  after(async () => {
    const client = admin();
    await client.connect();
    try {
      await client.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    } finally {
      await client.end();
    }
  });

  async function deadlocks(): Promise<number> {
    const client = admin();
    await client.connect();
    try {
      await client.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await client.query<{ deadlocks: string }>('SELECT deadlocks FROM pg_stat_database WHERE datname = $1', [database]);
      return Number(rows[0]?.deadlocks ?? 0);
    } finally {
      await client.end();
    }
  }

  it(`${ROUNDS} rounds of batches in opposite orders: no deadlock, no fallback, no claim as slow as a lease, each key claimed once`, async () => {
    const schema = 'em_deadlock';
    const lines: string[] = [];
    const logger = createRedactingLogger({ write: (line: string) => void lines.push(line) }, 'warn');
    const open = (): PostgresStore => postgresStore({ connectionString: url.toString(), schema, encryptionKey: KEY, poolSize: 4, logger });
    const a = open();
    await a.ready();
    const b = open();
    await b.ready();
    const before = await deadlocks();

    let slowest = 0;
    const timed = async (store: PostgresStore, input: ClaimInput): Promise<ClaimResult> => {
      const started = performance.now();
      const result = await store.claimOperation(input);
      slowest = Math.max(slowest, performance.now() - started);
      return result;
    };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const claims = roundClaims(round, 'a');
        const reversed = roundClaims(round, 'b').reverse();
        // Each instance issues its claims in one turn of the event loop: one batch, one statement each.
        const [ofA, ofB] = await Promise.all([
          Promise.all(claims.map((input) => timed(a, input))),
          Promise.all(reversed.map((input) => timed(b, input))),
        ]);
        const claimed = new Map<string, number>();
        for (const result of [...ofA, ...ofB]) {
          assert.notEqual(result.outcome, 'unavailable', `round ${round}`);
          if (result.outcome === 'claimed') claimed.set(result.operation.key, (claimed.get(result.operation.key) ?? 0) + 1);
        }
        for (const [key, count] of claimed) assert.equal(count, 1, `round ${round}: ${key} claimed ${count} times`);
        // Every provision and credential key is taken by one of the two (the deprovisions may be
        // held back by a running credential claim of their resource).
        for (const input of claims.slice(0, 4)) assert.equal(claimed.get(input.key), 1, `round ${round}: ${input.key} claimed by one`);
      }
    } finally {
      // Closing the pools ends their server processes, which flushes their statistics.
      await a.close();
      await b.close();
    }
    const fallbacks = lines.filter((line) => line.includes('batch failed as a whole'));
    assert.deepEqual(fallbacks, [], 'no batch fell back to single claims (a deadlock would show as code 40P01)');
    assert.equal((await deadlocks()) - before, 0, 'pg_stat_database counts no deadlock');
    assert.ok(slowest < LEASE_MS, `the slowest claim took ${Math.round(slowest)} ms, less than the ${LEASE_MS} ms lease`);
  });
});
