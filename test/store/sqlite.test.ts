import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database, { type Database as BetterSqlite3Database } from 'better-sqlite3';
import { InvalidOptionsError, ServiceUnavailableError } from '../../src/errors.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { DecryptionError, generateEncryptionKey } from '../../src/store/crypto.js';
import { SQLITE_MIGRATIONS } from '../../src/store/migrations/sqlite.js';
import { isTransientSqliteError, sqliteStore, type SqliteStoreOptions } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { heldBy, operationTableContract, storeContract } from './contract.js';
import { durableCases } from './durable-cases.js';

const KEY = generateEncryptionKey();
const root = mkdtempSync(join(tmpdir(), 'em-sqlite-'));
after(() => rmSync(root, { recursive: true, force: true }));

let counter = 0;
const freshPath = (): string => join(root, `store-${++counter}`, 'provider.db');
const open = (path: string, extra: Partial<SqliteStoreOptions> = {}) => sqliteStore({ path, encryptionKey: KEY, logger: false, ...extra });

const makeSqlite = async () => {
  const store = open(freshPath());
  return { store, cleanup: () => store.close() };
};
storeContract('sqlite', makeSqlite);
operationTableContract('sqlite', makeSqlite);

durableCases('sqlite', async () => {
  const path = freshPath();
  return { open: async (key) => open(path, { encryptionKey: key === 'key' ? KEY : false }), cleanup: async () => undefined };
});

const T0 = 1_700_000_000_000;

async function provisionWithCredential(store: Store, secret: string): Promise<void> {
  const claim = await store.claimOperation({
    key: 'resource:r1',
    kind: 'provision',
    targetId: 'r1',
    fingerprint: 'f',
    request: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: {} },
    owner: 'test',
    now: T0,
    leaseMs: 30_000,
  });
  assert.equal(claim.outcome, 'claimed');
  await store.commitOperation(heldBy(claim).key, heldBy(claim).token, {
    mutation: { type: 'putResource', resource: { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 2 }, message: 'Ready', createdAt: T0, updatedAt: T0 } },
  });
  const credClaim = await store.claimOperation({
    key: 'credential:c1',
    kind: 'provisionCredentials',
    targetId: 'c1',
    fingerprint: 'r1',
    request: { kind: 'provisionCredentials', resourceId: 'r1' },
    owner: 'test',
    now: T0,
    leaseMs: 30_000,
  });
  assert.equal(credClaim.outcome, 'claimed');
  await store.commitOperation(credClaim.operation.key, credClaim.operation.token, {
    mutation: { type: 'putCredential', credential: { id: 'c1', resourceId: 'r1', values: { BONNETS_URL: secret }, message: 'Credentials ready', createdAt: T0 } },
    delivery: {
      id: 'd1',
      callbackId: 'cb1',
      url: 'https://connector.example/v1/callbacks/cb1',
      payload: { state: 'done', message: 'Credentials ready', credentials: { BONNETS_URL: secret } },
      createdAt: T0,
      deadlineAt: T0 + 86_400_000,
    },
    // The answer recorded against the request's signature carries the credentials too: sealed.
    replay: { requestId: 'sig-c1', answer: { status: 201, body: { message: 'Credentials ready', credentials: { BONNETS_URL: secret } } }, expiresAt: T0 + 600_000 },
  });
}

describe('sqliteStore', () => {
  it('keeps everything across a restart of the process', async () => {
    const path = freshPath();
    const first = open(path);
    await provisionWithCredential(first, 'https://u:p@bonnets.example/r1');
    await first.recordUsage([{ resourceId: 'r1', feature: 'requests', quantity: 7, at: T0 }]);
    await first.close();

    const second = open(path);
    try {
      assert.equal((await second.getResource('r1'))?.features.seats, 2);
      assert.deepEqual((await second.getCredential('c1'))?.values, { BONNETS_URL: 'https://u:p@bonnets.example/r1' });
      assert.equal((await second.listDeliveries())[0]?.payload.credentials?.BONNETS_URL, 'https://u:p@bonnets.example/r1');
      assert.deepEqual({ ...(await second.sumUsage('r1', 0, T0 + 1)) }, { requests: 7 });
      assert.equal(second.schemaVersion, SQLITE_MIGRATIONS.length);
    } finally {
      await second.close();
    }
  });

  it('encrypts credential values and callback payloads at rest', async () => {
    const path = freshPath();
    const secret = 'https://bonnet-user:sup3r-s3cr3t-Pässwörd@bonnets.example/r1';
    const store = open(path);
    await provisionWithCredential(store, secret);
    // While the store is open, committed data sits in the -wal file: search both.
    const files = [path, `${path}-wal`].filter(existsSync).map((file) => readFileSync(file));
    assert.ok(files.length > 0);
    for (const bytes of files) {
      assert.equal(bytes.includes(Buffer.from('sup3r-s3cr3t')), false, 'the secret is not in the database files');
      assert.equal(bytes.includes(Buffer.from('bonnet-user')), false);
    }
    await store.close();

    const raw = new Database(path, { readonly: true });
    try {
      const credential = raw.prepare('SELECT * FROM credentials').get() as Record<string, unknown>;
      const delivery = raw.prepare('SELECT * FROM deliveries').get() as Record<string, unknown>;
      const replay = raw.prepare('SELECT * FROM replays').get() as Record<string, unknown>;
      assert.equal(replay.body, null, 'an answer with credentials is not kept plain');
      for (const row of [credential, delivery, replay]) {
        for (const value of Object.values(row)) {
          const text = Buffer.isBuffer(value) ? value.toString('latin1') : String(value);
          assert.equal(text.includes('sup3r-s3cr3t'), false);
        }
      }
      assert.ok(Buffer.isBuffer(credential.sealed_values));
    } finally {
      raw.close();
    }
    const whole = readFileSync(path);
    assert.equal(whole.includes(Buffer.from('sup3r-s3cr3t')), false, 'not after the checkpoint either');
  });

  it('refuses to open stored secrets with the wrong key, and says why without the secret', async () => {
    const path = freshPath();
    const store = open(path);
    await provisionWithCredential(store, 'https://u:hunter2@bonnets.example/r1');
    await store.close();
    const wrong = open(path, { encryptionKey: generateEncryptionKey() });
    try {
      assert.ok(await wrong.getResource('r1'), 'what is not secret still reads');
      await assert.rejects(wrong.getCredential('c1'), (error: unknown) => {
        assert.ok(error instanceof DecryptionError);
        assert.equal(error.status, 500);
        assert.doesNotMatch(error.message, /hunter2/);
        return true;
      });
    } finally {
      await wrong.close();
    }
  });

  it('expires running claims left by a crashed predecessor on open, keeps pending ones', async () => {
    const path = freshPath();
    const before = open(path);
    const request = { kind: 'deprovision' as const };
    const base = { kind: 'deprovision' as const, fingerprint: 'f', request, owner: 'crashed', now: T0, leaseMs: 60_000 };
    const running = await before.claimOperation({ ...base, key: 'resource:running', targetId: 'running' });
    const pending = await before.claimOperation({ ...base, key: 'resource:pending', targetId: 'pending' });
    await before.markOperationPending(heldBy(pending).key, heldBy(pending).token, { message: 'Working on it', deadlineAt: T0 + 86_400_000 });
    await before.close(); // as if the process had died: the claims were never released

    const messages: string[] = [];
    const after = open(path, { logger: createRedactingLogger({ write: (line: string) => void messages.push(line) }) });
    try {
      assert.equal((await after.getOperation('resource:running'))?.leaseExpiresAt, 0);
      const retry = await after.claimOperation({ ...base, owner: 'restarted', now: T0 + 1, key: 'resource:running', targetId: 'running' });
      assert.equal(retry.outcome, 'claimed', 'a retry takes over at once, without waiting for the lease');
      assert.notEqual(heldBy(retry).token, heldBy(running).token);
      const stillPending = await after.claimOperation({ ...base, owner: 'restarted', now: T0 + 1, key: 'resource:pending', targetId: 'pending' });
      // An identical claim of a pending operation answers its 202 (`pending`, issue 19).
      assert.equal(stillPending.outcome, 'pending', 'a pending operation waits for its completion, not for a process');
      assert.ok(messages.some((line) => line.includes('expired 1 running operation')));
    } finally {
      await after.close();
    }
  });

  it('uses WAL, full sync, foreign keys, versioned migrations and owner-only file permissions', async () => {
    const path = freshPath();
    const store = open(path);
    await store.close();
    assert.equal(statSync(path).mode & 0o777, 0o600);
    const raw = new Database(path);
    try {
      assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
      const versions = raw.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
      assert.deepEqual(
        versions,
        SQLITE_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })),
      );
    } finally {
      raw.close();
    }
    // Re-opening applies nothing twice.
    const again = open(path);
    await again.close();
    const check = new Database(path, { readonly: true });
    try {
      assert.equal((check.prepare('SELECT count(*) AS n FROM schema_migrations').get() as { n: number }).n, SQLITE_MIGRATIONS.length);
    } finally {
      check.close();
    }
  });

  it('answers ServiceUnavailableError when another connection holds the write lock', async () => {
    const path = freshPath();
    const store = open(path, { busyTimeoutMs: 0 });
    const other = new Database(path);
    try {
      other.exec('BEGIN IMMEDIATE');
      await assert.rejects(
        store.claimOperation({ key: 'resource:r1', kind: 'deprovision', targetId: 'r1', fingerprint: 'f', request: { kind: 'deprovision' }, owner: 'a', now: T0, leaseMs: 1000 }),
        (error: unknown) => error instanceof ServiceUnavailableError && error.status === 503 && (error.cause as { code?: string }).code === 'SQLITE_BUSY',
      );
      assert.equal(await store.getOperation('resource:r1'), undefined, 'reads still work under WAL');
      other.exec('ROLLBACK');
      const claim = await store.claimOperation({ key: 'resource:r1', kind: 'deprovision', targetId: 'r1', fingerprint: 'f', request: { kind: 'deprovision' }, owner: 'a', now: T0, leaseMs: 1000 });
      assert.equal(claim.outcome, 'claimed', 'works again once the lock is gone');
    } finally {
      other.close();
      await store.close();
    }
  });

  it('tells transient SQLite errors from statement errors', () => {
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_LOCKED', 'SQLITE_READONLY', 'SQLITE_READONLY_DBMOVED', 'SQLITE_IOERR', 'SQLITE_IOERR_FSYNC', 'SQLITE_FULL', 'SQLITE_CANTOPEN']) {
      assert.equal(isTransientSqliteError(Object.assign(new Error('x'), { code })), true, code);
    }
    for (const code of ['SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_ERROR', 'SQLITE_MISMATCH', 'SQLITE_FULLX', undefined]) {
      assert.equal(isTransientSqliteError(Object.assign(new Error('x'), { code })), false, String(code));
    }
  });

  it('answers ServiceUnavailableError once closed', async () => {
    const store = open(freshPath());
    await store.close();
    await store.close();
    await assert.rejects(store.getResource('r1'), ServiceUnavailableError);
  });

  it('validates its options at construction', () => {
    const path = freshPath();
    assert.throws(() => sqliteStore({ path } as SqliteStoreOptions), (error: unknown) => {
      assert.ok(error instanceof InvalidOptionsError);
      assert.match(error.message, /option "encryptionKey" is required/);
      assert.match(error.message, /randomBytes\(32\)/, 'says how to generate a key');
      return true;
    });
    assert.throws(() => sqliteStore({ path, encryptionKey: 'too-short' }), /not 32 bytes/);
    assert.throws(() => sqliteStore({ encryptionKey: KEY } as SqliteStoreOptions), /"path" is required/);
    assert.throws(() => sqliteStore({ path, encryptionKey: KEY, busyTimeout: 10 } as unknown as SqliteStoreOptions), /unknown option "busyTimeout".*did you mean "busyTimeoutMs"/);
    assert.throws(() => sqliteStore({ path, encryptionKey: KEY, busyTimeoutMs: -1 }), InvalidOptionsError);
    assert.equal(existsSync(path), false, 'nothing is created when the options are wrong');
  });

  it('never echoes a malformed key in its error', () => {
    const almost = KEY.slice(0, -3);
    assert.throws(
      () => sqliteStore({ path: freshPath(), encryptionKey: almost }),
      (error: unknown) => error instanceof InvalidOptionsError && !error.message.includes(almost),
    );
  });

  /** A database as release `version` of the schema left it: its migrations only, applied by hand. */
  function legacyDatabase(path: string, version: number): BetterSqlite3Database {
    mkdirSync(dirname(path), { recursive: true });
    const raw = new Database(path);
    raw.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const migration of SQLITE_MIGRATIONS.filter((m) => m.version <= version)) {
      raw.exec(migration.sql);
      raw.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.version, migration.name, T0);
    }
    return raw;
  }

  it('upgrades a database of schema 1: data kept, tombstones recorded and kept across a restart', async () => {
    const path = freshPath();
    const raw = legacyDatabase(path, 1);
    try {
      raw.prepare("INSERT INTO resources VALUES ('r1', 'bonnets', 'small', 'all::global', '{}', 'Ready', ?, ?)").run(T0, T0);
    } finally {
      raw.close();
    }
    const upgraded = open(path);
    try {
      assert.equal(upgraded.schemaVersion, SQLITE_MIGRATIONS.length);
      assert.equal((await upgraded.getResource('r1'))?.message, 'Ready');
      const claim = await upgraded.claimOperation({ key: 'resource:r1', kind: 'deprovision', targetId: 'r1', fingerprint: 'f', request: { kind: 'deprovision' }, owner: 'test', now: T0, leaseMs: 1000 });
      assert.equal(claim.outcome, 'claimed');
      await upgraded.commitOperation(heldBy(claim).key, heldBy(claim).token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 1 } });
    } finally {
      await upgraded.close();
    }
    const reopened = open(path);
    try {
      assert.equal(await reopened.isDeleted('resource', 'r1'), true);
      assert.equal(await reopened.getResource('r1'), undefined);
    } finally {
      await reopened.close();
    }
  });

  it('upgrades a database of the previous release (schema 2): its pending credential operations block and are orphaned by a deletion', async () => {
    const path = freshPath();
    const raw = legacyDatabase(path, 2);
    try {
      raw.prepare("INSERT INTO resources VALUES ('r1', 'bonnets', 'small', 'all::global', '{}', 'Ready', ?, ?)").run(T0, T0);
      // A credential PUT the previous release left pending (202) with callback headers.
      raw
        .prepare(
          `INSERT INTO operations (key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at, message, callback_id, callback_url, deadline_at)
           VALUES ('credential:c1', 'provisionCredentials', 'c1', 'r1', 'pending', 'old-token', 'old', ?, '{"kind":"provisionCredentials","resourceId":"r1"}', ?, 'Working', 'cb1', 'https://connector.example/v1/callbacks/cb1', ?)`,
        )
        .run(T0, T0, T0 + 86_400_000);
    } finally {
      raw.close();
    }
    const upgraded = open(path);
    try {
      const claim = await upgraded.claimOperation({ key: 'resource:r1', kind: 'deprovision', targetId: 'r1', fingerprint: 'f', request: { kind: 'deprovision' }, owner: 'test', now: T0 + 5, leaseMs: 1000 });
      assert.equal(claim.outcome, 'claimed');
      await upgraded.commitOperation(heldBy(claim).key, heldBy(claim).token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 6 }, orphanMessage: 'The resource was deprovisioned' });
      assert.equal(await upgraded.getOperation('credential:c1'), undefined);
      const [report] = await upgraded.listDeliveries();
      assert.equal(report?.callbackId, 'cb1');
      assert.deepEqual(report?.payload, { state: 'error', message: 'The resource was deprovisioned' });
      assert.equal(report?.deadlineAt, T0 + 86_400_000);
    } finally {
      await upgraded.close();
    }
  });

  it('opens an in-memory database', async () => {
    const store = open(':memory:');
    assert.equal(store.kind, 'sqlite');
    await provisionWithCredential(store, 'x');
    assert.equal((await store.listCredentials('r1')).length, 1);
    await store.close();
  });
});
