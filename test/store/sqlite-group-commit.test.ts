/**
 * SQLite group commit: writes queued in the same tick share one transaction (one disk flush), each
 * in its own savepoint, and every promise settles only once that transaction committed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LeaseLostError } from '../../src/errors.js';
import { generateEncryptionKey } from '../../src/store/crypto.js';
import { groupCommit } from '../../src/store/sql/group-commit.js';
import { sqliteStore } from '../../src/store/sqlite.js';
import { heldBy } from './contract.js';

const root = mkdtempSync(join(tmpdir(), 'em-group-'));
after(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;

function database(): Database.Database {
  const db = new Database(join(root, `g-${++counter}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE t (v TEXT PRIMARY KEY)');
  return db;
}

const values = (db: Database.Database): string[] => (db.prepare('SELECT v FROM t ORDER BY v').all() as { v: string }[]).map((row) => row.v);

describe('groupCommit', () => {
  it('runs the writes of one tick in one transaction, and a later tick in the next', async () => {
    const db = database();
    const commits: number[] = [];
    const group = groupCommit(db, (error) => error, { onCommit: (writes) => commits.push(writes) });
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const first = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((v) => group.write(() => insert.run(v).changes)));
    assert.deepEqual(first, [1, 1, 1, 1, 1]);
    assert.deepEqual(commits, [5], 'five writes, one transaction');
    await group.write(() => insert.run('f'));
    assert.deepEqual(commits, [5, 1]);
    assert.deepEqual(values(db), ['a', 'b', 'c', 'd', 'e', 'f']);
    db.close();
  });

  it('flushes a group to disk when one of its writes needs it, and only then', async () => {
    const db = database();
    const commits: [number, boolean][] = [];
    const group = groupCommit(db, (error) => error, { onCommit: (writes, flushed) => commits.push([writes, flushed]) });
    // The setting the COMMIT will use, as seen from inside the transaction: 2 = FULL, 1 = NORMAL.
    const synchronous = () => db.pragma('synchronous', { simple: true }) as number;
    const light = await Promise.all([group.write(synchronous, false), group.write(synchronous, false)]);
    const mixed = await Promise.all([group.write(synchronous, false), group.write(synchronous)]);
    assert.deepEqual(light, [1, 1], 'claims alone: no flush of their own');
    assert.deepEqual(mixed, [2, 2], 'one durable write: the whole group is flushed');
    assert.deepEqual(commits, [[2, false], [2, true]]);
    db.close();
  });

  it('runs a light group again, flushed, when one of its writes asks for the flush', async () => {
    const db = database();
    const commits: [number, boolean][] = [];
    const group = groupCommit(db, (error) => error, { onCommit: (writes, flushed) => commits.push([writes, flushed]) });
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const synchronous = () => db.pragma('synchronous', { simple: true }) as number;
    let runs = 0;
    const results = await Promise.all([
      group.write(() => (insert.run('a'), synchronous()), false),
      group.write(() => {
        runs += 1;
        insert.run('b');
        group.requireFlush();
        return synchronous();
      }, false),
    ]);
    assert.deepEqual(results, [2, 2], 'both writes see the flushed run');
    assert.equal(runs, 2, 'planned light, rolled back, run again flushed');
    assert.deepEqual(commits, [[2, true]], 'one commit, flushed');
    assert.deepEqual(values(db), ['a', 'b'], 'each write applied once');
    db.close();
  });

  it('settles every promise only after the commit', async () => {
    const db = database();
    let committed = false;
    const group = groupCommit(db, (error) => error, { onCommit: () => (committed = true) });
    const results = await Promise.all([1, 2, 3].map((n) => group.write(() => n).then((value) => ({ value, committed }))));
    assert.deepEqual(results, [1, 2, 3].map((value) => ({ value, committed: true })));
    db.close();
  });

  it('a write that throws rolls back only its own changes and rejects only its own promise', async () => {
    const db = database();
    const commits: number[] = [];
    const group = groupCommit(db, (error) => error, { onCommit: (writes) => commits.push(writes) });
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const settled = await Promise.allSettled([
      group.write(() => insert.run('a')),
      group.write(() => {
        insert.run('b');
        throw new LeaseLostError();
      }),
      group.write(() => insert.run('a')), // a constraint violation: also only its own
      group.write(() => insert.run('c')),
    ]);
    assert.deepEqual(settled.map((s) => s.status), ['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    assert.ok((settled[1] as PromiseRejectedResult).reason instanceof LeaseLostError);
    assert.deepEqual(values(db), ['a', 'c']);
    assert.deepEqual(commits, [4]);
    db.close();
  });

  it('runs a group once when no write throws, and again write by write (each in a savepoint) when one does', async () => {
    const db = database();
    const commits: number[] = [];
    const group = groupCommit(db, (error) => error, { onCommit: (writes) => commits.push(writes) });
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const runs = { a: 0, b: 0, c: 0 };
    const clean = await Promise.all((['a', 'b'] as const).map((v) => group.write(() => (runs[v] += 1, insert.run(v).changes))));
    assert.deepEqual(clean, [1, 1]);
    assert.deepEqual(runs, { a: 1, b: 1, c: 0 }, 'no write threw: each ran once');
    const settled = await Promise.allSettled([
      group.write(() => (runs.c += 1, insert.run('c').changes)),
      group.write(() => insert.run('a').changes), // a constraint violation
    ]);
    assert.deepEqual(settled.map((s) => s.status), ['fulfilled', 'rejected']);
    assert.equal(runs.c, 2, 'rolled back with the group, then run again in its own savepoint');
    assert.deepEqual(values(db), ['a', 'b', 'c'], 'each write applied once');
    assert.deepEqual(commits, [2, 2]);
    db.close();
  });

  it('when the commit itself fails, every write of the group rejects and none is kept', async () => {
    const db = database();
    // A deferred constraint is checked at COMMIT: the group's commit fails as a disk error would.
    db.exec('PRAGMA foreign_keys = ON; CREATE TABLE parent (id TEXT PRIMARY KEY); CREATE TABLE child (p TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)');
    const group = groupCommit(db, (error) => new Error(`mapped: ${(error as Error).message}`));
    const settled = await Promise.allSettled([
      group.write(() => db.prepare("INSERT INTO t (v) VALUES ('a')").run()),
      group.write(() => db.prepare("INSERT INTO child (p) VALUES ('missing')").run()),
    ]);
    assert.deepEqual(settled.map((s) => s.status), ['rejected', 'rejected']);
    assert.match(String((settled[0] as PromiseRejectedResult).reason), /mapped: FOREIGN KEY/);
    assert.deepEqual(values(db), []);
    assert.equal(db.inTransaction, false);
    // The committer keeps working afterwards.
    await group.write(() => db.prepare("INSERT INTO t (v) VALUES ('b')").run());
    assert.deepEqual(values(db), ['b']);
    db.close();
  });
});

describe('sqliteStore group commit', () => {
  it('commits arriving together: a lost lease is refused alone, the others are durable', async () => {
    const path = join(root, `store-${++counter}.db`);
    const key = generateEncryptionKey();
    const store = sqliteStore({ path, encryptionKey: key, logger: false });
    const claim = (id: string) =>
      store.claimOperation({
        key: `resource:${id}`,
        kind: 'provision',
        targetId: id,
        fingerprint: 'f',
        request: { kind: 'provision', product: 'p', plan: 'small', region: 'all::global', features: {} },
        owner: 'o',
        now: 1000,
        leaseMs: 30_000,
      });
    const ops = (await Promise.all(['r1', 'r2', 'r3'].map(claim))).map(heldBy);
    const put = (id: string) => ({ mutation: { type: 'putResource' as const, resource: { id, product: 'p', plan: 'small', region: 'all::global', features: {}, message: 'Ready', createdAt: 1, updatedAt: 1 } } });
    const settled = await Promise.all([
      store.commitOperation(ops[0]!.key, ops[0]!.token, put('r1')),
      store.commitOperation(ops[1]!.key, 'stale-token', put('r2')),
      store.commitOperation(ops[2]!.key, ops[2]!.token, put('r3')),
    ]);
    // Stores answer outcomes (issue 19): the stale token's commit answers lease_lost, writing nothing.
    assert.deepEqual(settled.map((s) => s.outcome), ['committed', 'lease_lost', 'committed']);
    await store.close();
    const reopened = sqliteStore({ path, encryptionKey: key, logger: false });
    assert.deepEqual(
      await Promise.all(['r1', 'r2', 'r3'].map(async (id) => (await reopened.getResource(id))?.id)),
      ['r1', undefined, 'r3'],
    );
    await reopened.close();
  });
});
