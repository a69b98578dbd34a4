import { closeSync, mkdirSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { InvalidOptionsError, LeaseLostError, NotFoundError, ServiceUnavailableError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, integerOption, optionalLogger, rejectUnknownKeys } from '../lib/options.js';
import { entityDeletedError, newToken } from './common.js';
import { createCipher, type EncryptionKeyOption, type SecretCipher } from './crypto.js';
import { readSnapshot } from './snapshot.js';
import { recordMappers, type CredentialRow, type DeliveryRow, type OperationRow, type ResourceRow } from './durable.js';
import { SQLITE_MIGRATIONS } from './migrations/sqlite.js';
import { latestVersion, type Migration } from './migrations/types.js';
import type {
  ClaimInput,
  ClaimResult,
  CommitInput,
  Mutation,
  NewDelivery,
  PendingInput,
  OperationRecord,
  ListingStore,
} from './types.js';

export { generateEncryptionKey, DecryptionError, type EncryptionKeyOption, type EncryptionKeyring } from './crypto.js';

const FACTORY = 'sqliteStore';
const OPTION_NAMES = ['path', 'encryptionKey', 'busyTimeoutMs', 'logger'] as const;

/** Options of {@link sqliteStore}. */
export interface SqliteStoreOptions {
  /** Database file. Created (mode 0600, parent directories 0700) when missing. `':memory:'` for a throwaway store. */
  path: string;
  /** Key that seals credential values and callback payloads at rest: 32 bytes, base64 or hex, or a keyring. */
  encryptionKey: EncryptionKeyOption;
  /** How long a write waits for a lock held by another connection before failing with 503. Default 5000. */
  busyTimeoutMs?: number;
  /** pino logger (a child is used), or `false` for silence. Default: the package's redacting logger. */
  logger?: Logger | false;
}

/** A store on one SQLite file: see {@link sqliteStore}. */
export interface SqliteStore extends ListingStore {
  readonly kind: 'sqlite';
  /** The schema version the database is at. */
  readonly schemaVersion: number;
}

// Codes meaning "the database cannot serve right now" rather than "the statement is wrong": a retry
// later may succeed, so the request answers 503 and leaves nothing behind (the transaction rolled back).
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|READONLY|IOERR|FULL|CANTOPEN|PROTOCOL|NOMEM|NOLFS)(_|$)/;

/**
 * Whether a better-sqlite3 error means "try again later" (a lock, I/O, a full disk, a read-only
 * file) rather than "this statement is wrong". Extended codes count with their primary one
 * (`SQLITE_BUSY_SNAPSHOT`, `SQLITE_IOERR_FSYNC`, `SQLITE_READONLY_DBMOVED`, …).
 */
export function isTransientSqliteError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE_CODES.test(code);
}

function mapError(error: unknown): unknown {
  if (isTransientSqliteError(error)) return new ServiceUnavailableError(undefined, undefined, { cause: error });
  return error;
}

function loadDriver(): typeof BetterSqlite3 {
  try {
    return createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  } catch (error) {
    throw new Error(`${FACTORY} needs the optional peer dependency better-sqlite3: run \`npm install better-sqlite3\``, { cause: error });
  }
}

/** Creates the file and its directory with owner-only permissions before SQLite does (it would use the umask). */
function prepareFile(path: string): void {
  if (path === ':memory:' || path === '' || path.startsWith('file:')) return;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // 'a' creates the file when missing and leaves an existing one untouched. SQLite gives the -wal and
  // -shm files the permissions of the database file, so they are owner-only too.
  closeSync(openSync(path, 'a', 0o600));
}

function migrate(db: BetterSqlite3.Database, migrations: readonly Migration[], logger: Logger): number {
  const run = db.transaction(() => {
    db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    const row = db.prepare('SELECT max(version) AS version FROM schema_migrations').get() as { version: number | null };
    const current = row.version ?? 0;
    const latest = latestVersion(migrations);
    if (current > latest) {
      logger.warn({ schemaVersion: current, supported: latest }, `${FACTORY}: the database was migrated by a newer release (schema ${current}, this release knows ${latest}); continuing, as migrations are additive`);
    }
    const insert = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      db.exec(migration.sql);
      insert.run(migration.version, migration.name, Date.now());
      logger.info({ version: migration.version, name: migration.name }, `${FACTORY}: applied migration`);
    }
    return Math.max(current, latest);
  });
  // IMMEDIATE takes the write lock up front, so two processes opening a new file at once cannot both
  // decide to apply the same migration.
  return run.immediate();
}

/**
 * A durable store in one SQLite file (better-sqlite3), for a provider running as a single instance.
 * Credential values and callback payloads are sealed with AES-256-GCM under `encryptionKey`.
 *
 * - WAL journal with `synchronous = FULL`: every commit is on disk before the marketplace is answered,
 *   so a power cut cannot lose a provisioned resource the marketplace was told about. WAL makes that
 *   one fsync per transaction, and writes here are rare (provisioning requests, usage batches).
 * - Versioned migrations in `schema_migrations`, applied in one transaction on open.
 * - Single instance: on open, `running` operations left by a crashed predecessor are expired at once
 *   (their process is gone), so a retry takes them over without waiting for the lease. Two processes
 *   must therefore never share the file; several instances want `postgresStore`.
 * - Locks, I/O errors, a full disk or a read-only file reject with ServiceUnavailableError (503).
 *
 * @example
 * ```ts
 * import { sqliteStore } from 'embedded-marketplace/stores/sqlite';
 * const store = sqliteStore({ path: './data/provider.db', encryptionKey: process.env.STORE_ENCRYPTION_KEY! });
 * app.use(marketplaceRouter({ store, handlers }));
 * ```
 */
export function sqliteStore(options: SqliteStoreOptions): SqliteStore {
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, OPTION_NAMES);
  const path = opts.path;
  if (typeof path !== 'string' || path.length === 0) {
    throw new InvalidOptionsError(`${FACTORY}: option "path" is required: the database file, e.g. './data/provider.db'`);
  }
  const busyTimeoutMs = integerOption(FACTORY, 'busyTimeoutMs', opts.busyTimeoutMs, 5000);
  const cipher: SecretCipher = createCipher(opts.encryptionKey as EncryptionKeyOption, `${FACTORY}: option "encryptionKey"`);
  const logger = createLogger(optionalLogger<Logger>(FACTORY, opts), { component: 'store', store: 'sqlite' });
  const Database = loadDriver();

  let db: BetterSqlite3.Database;
  let schemaVersion: number;
  try {
    prepareFile(path);
    db = new Database(path, { timeout: busyTimeoutMs });
  } catch (error) {
    throw new Error(`${FACTORY}: cannot open the database at ${path}: ${(error as Error).message}`, { cause: error });
  }
  try {
    const journal = db.pragma('journal_mode = WAL', { simple: true });
    if (journal !== 'wal' && path !== ':memory:') {
      logger.warn({ journal }, `${FACTORY}: the database did not switch to WAL mode (a network file system?); writes will block readers`);
    }
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    schemaVersion = migrate(db, SQLITE_MIGRATIONS, logger);
    const expired = db.prepare("UPDATE operations SET lease_expires_at = 0 WHERE state = 'running'").run().changes;
    if (expired > 0) {
      logger.warn({ operations: expired }, `${FACTORY}: expired ${expired} running operation claim(s) left by a previous process; retries take them over`);
    }
  } catch (error) {
    db.close();
    throw mapError(error);
  }

  const sql = {
    getResource: db.prepare<[string], ResourceRow>('SELECT * FROM resources WHERE id = ?'),
    getCredential: db.prepare<[string], CredentialRow>('SELECT * FROM credentials WHERE id = ?'),
    listCredentials: db.prepare<[string], CredentialRow>('SELECT * FROM credentials WHERE resource_id = ? ORDER BY created_at, id'),
    getOperation: db.prepare<[string], OperationRow>('SELECT * FROM operations WHERE key = ?'),
    listPending: db.prepare<[number], OperationRow>("SELECT * FROM operations WHERE state = 'pending' ORDER BY created_at, key LIMIT ?"),
    // The liveness rule of common.ts isOperationLive, in SQL: a claim replaces the existing row only
    // when its running lease lapsed or its pending deadline passed.
    claim: db.prepare<Record<string, unknown>, OperationRow>(`
      INSERT INTO operations (key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at)
      VALUES (@key, @kind, @targetId, @fingerprint, 'running', @token, @owner, @leaseExpiresAt, @request, @now)
      ON CONFLICT (key) DO UPDATE SET
        kind = excluded.kind, target_id = excluded.target_id, fingerprint = excluded.fingerprint, state = 'running',
        token = excluded.token, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
        request = excluded.request, created_at = excluded.created_at,
        message = NULL, callback_id = NULL, callback_url = NULL, deadline_at = NULL
      WHERE NOT (CASE WHEN operations.state = 'running' THEN operations.lease_expires_at > @now
                      ELSE operations.deadline_at IS NULL OR operations.deadline_at > @now END)
      RETURNING *`),
    renew: db.prepare<[number, string, string]>("UPDATE operations SET lease_expires_at = ? WHERE key = ? AND token = ? AND state = 'running'"),
    release: db.prepare<[string, string]>('DELETE FROM operations WHERE key = ? AND token = ?'),
    markPending: db.prepare<[string, number, string | null, string | null, string, string], OperationRow>(`
      UPDATE operations SET state = 'pending', message = ?, deadline_at = ?,
        callback_id = coalesce(?, callback_id), callback_url = coalesce(?, callback_url)
      WHERE key = ? AND token = ? RETURNING *`),
    resourceExists: db.prepare<[string], { found: number }>('SELECT 1 AS found FROM resources WHERE id = ?'),
    putResource: db.prepare<[string, string, string, string, string, string, number, number]>(`
      INSERT INTO resources (id, product, plan, region, features, message, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET product = excluded.product, plan = excluded.plan, region = excluded.region,
        features = excluded.features, message = excluded.message, created_at = excluded.created_at, updated_at = excluded.updated_at`),
    deleteResource: db.prepare<[string]>('DELETE FROM resources WHERE id = ?'),
    putCredential: db.prepare<[string, string, Buffer, string, number]>(`
      INSERT INTO credentials (id, resource_id, sealed_values, message, created_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id, sealed_values = excluded.sealed_values,
        message = excluded.message, created_at = excluded.created_at`),
    deleteCredential: db.prepare<[string]>('DELETE FROM credentials WHERE id = ?'),
    isDeleted: db.prepare<[string, string], { found: number }>('SELECT 1 AS found FROM tombstones WHERE entity = ? AND id = ?'),
    // DO NOTHING: a tombstone keeps the time of the first deletion.
    bury: db.prepare<[string, string, number]>('INSERT INTO tombstones (entity, id, deleted_at) VALUES (?, ?, ?) ON CONFLICT (entity, id) DO NOTHING'),
    buryCredentialsOf: db.prepare<[number, string]>(`
      INSERT INTO tombstones (entity, id, deleted_at) SELECT 'credential', id, ? FROM credentials WHERE resource_id = ?
      ON CONFLICT (entity, id) DO NOTHING`),
    pruneTombstones: db.prepare<[number]>('DELETE FROM tombstones WHERE deleted_at < ?'),
    putDelivery: db.prepare<Record<string, unknown>>(`
      INSERT INTO deliveries (id, callback_id, url, sealed_payload, created_at, deadline_at, state, attempts, next_attempt_at)
      VALUES (@id, @callbackId, @url, @payload, @createdAt, @deadlineAt, 'pending', 0, @createdAt)
      ON CONFLICT (id) DO UPDATE SET callback_id = excluded.callback_id, url = excluded.url, sealed_payload = excluded.sealed_payload,
        created_at = excluded.created_at, deadline_at = excluded.deadline_at, state = 'pending', attempts = 0,
        next_attempt_at = excluded.next_attempt_at, last_error = NULL, claimed_by = NULL, claim_expires_at = NULL`),
    claimDeliveries: db.prepare<Record<string, unknown>, DeliveryRow>(`
      UPDATE deliveries SET claimed_by = @owner, claim_expires_at = @claimExpiresAt
      WHERE id IN (
        SELECT id FROM deliveries
        WHERE state = 'pending' AND next_attempt_at <= @now AND (claim_expires_at IS NULL OR claim_expires_at <= @now)
        ORDER BY next_attempt_at, created_at, id LIMIT @limit)
      RETURNING *`),
    completeDelivery: db.prepare<[string, string]>('DELETE FROM deliveries WHERE id = ? AND claimed_by = ?'),
    retryDelivery: db.prepare<[number, number, string, string, string]>(`
      UPDATE deliveries SET attempts = ?, next_attempt_at = ?, last_error = ?, claimed_by = NULL, claim_expires_at = NULL
      WHERE id = ? AND claimed_by = ?`),
    failDelivery: db.prepare<[string, string, string]>(`
      UPDATE deliveries SET state = 'failed', last_error = ?, claimed_by = NULL, claim_expires_at = NULL
      WHERE id = ? AND claimed_by = ?`),
    listDeliveries: db.prepare<[], DeliveryRow>('SELECT * FROM deliveries ORDER BY created_at, id'),
    recordUsage: db.prepare<[string, string, number, number]>('INSERT INTO usage_entries (resource_id, feature, quantity, at) VALUES (?, ?, ?, ?)'),
    sumUsage: db.prepare<[string, number, number], { feature: string; total: number }>(
      'SELECT feature, sum(quantity) AS total FROM usage_entries WHERE resource_id = ? AND at >= ? AND at < ? GROUP BY feature',
    ),
    hasUsage: db.prepare<[string, number, number], { found: number }>(
      'SELECT EXISTS (SELECT 1 FROM usage_entries WHERE resource_id = ? AND at >= ? AND at < ?) AS found',
    ),
    pruneUsage: db.prepare<[number]>('DELETE FROM usage_entries WHERE at < ?'),
  };

  const { toResource, toCredential, toOperation, toDelivery } = recordMappers(cipher);

  function applyMutation(mutation: Mutation): void {
    switch (mutation.type) {
      case 'none':
        return;
      case 'putResource': {
        const r = mutation.resource;
        if (sql.isDeleted.get('resource', r.id) !== undefined) throw entityDeletedError('resource');
        sql.putResource.run(r.id, r.product, r.plan, r.region, JSON.stringify(r.features), r.message, r.createdAt, r.updatedAt);
        return;
      }
      case 'deleteResource':
        // Tombstones first, while the credentials are still there to be listed; then the credentials
        // go with the resource: ON DELETE CASCADE.
        sql.buryCredentialsOf.run(mutation.deletedAt, mutation.id);
        sql.bury.run('resource', mutation.id, mutation.deletedAt);
        sql.deleteResource.run(mutation.id);
        return;
      case 'putCredential': {
        const c = mutation.credential;
        if (sql.resourceExists.get(c.resourceId) === undefined) throw new NotFoundError('Resource not found');
        if (sql.isDeleted.get('credential', c.id) !== undefined) throw entityDeletedError('credential');
        sql.putCredential.run(c.id, c.resourceId, cipher.seal(c.values, `credential:${c.id}`), c.message, c.createdAt);
        return;
      }
      case 'deleteCredential':
        sql.deleteCredential.run(mutation.id);
        sql.bury.run('credential', mutation.id, mutation.deletedAt);
        return;
    }
  }

  function putDelivery(delivery: NewDelivery): void {
    sql.putDelivery.run({
      id: delivery.id,
      callbackId: delivery.callbackId,
      url: delivery.url,
      payload: cipher.seal(delivery.payload, `delivery:${delivery.id}`),
      createdAt: delivery.createdAt,
      deadlineAt: delivery.deadlineAt,
    });
  }

  // A throw inside a better-sqlite3 transaction function rolls the whole transaction back.
  const claimTx = db.transaction((input: ClaimInput): Exclude<ClaimResult, { outcome: 'claimed' | 'replayed' | 'blocked' }> | { outcome: 'claimed'; operation: OperationRecord } => {
    const row = sql.claim.get({
      key: input.key,
      kind: input.kind,
      targetId: input.targetId,
      fingerprint: input.fingerprint,
      token: newToken(),
      owner: input.owner,
      leaseExpiresAt: input.now + input.leaseMs,
      request: JSON.stringify(input.request),
      now: input.now,
    });
    if (row !== undefined) return { outcome: 'claimed', operation: toOperation(row) };
    return { outcome: 'busy', operation: toOperation(sql.getOperation.get(input.key)!) };
  });

  const commitTx = db.transaction((key: string, token: string, commit: CommitInput): void => {
    if (sql.release.run(key, token).changes === 0) throw new LeaseLostError();
    applyMutation(commit.mutation);
    if (commit.delivery !== undefined) putDelivery(commit.delivery);
  });

  const usageTx = db.transaction((entries: readonly { resourceId: string; feature: string; quantity: number; at: number }[]): void => {
    for (const entry of entries) sql.recordUsage.run(entry.resourceId, entry.feature, entry.quantity, entry.at);
  });

  let closed = false;

  // Every method runs synchronously inside its promise: better-sqlite3 is synchronous and the process
  // has one connection, so no two store calls interleave; write transactions are IMMEDIATE so that
  // another connection to the file (a backup tool, sqlite3 shell) cannot slip in between read and write.
  function run<T>(work: () => T): Promise<T> {
    if (closed) return Promise.reject(new ServiceUnavailableError('Store is closed'));
    try {
      return Promise.resolve(work());
    } catch (error) {
      return Promise.reject(mapError(error));
    }
  }

  return {
    kind: 'sqlite',
    get schemaVersion() {
      return schemaVersion;
    },

    getResource: (id) =>
      run(() => {
        const row = sql.getResource.get(id);
        return row === undefined ? undefined : toResource(row);
      }),

    getCredential: (id) =>
      run(() => {
        const row = sql.getCredential.get(id);
        return row === undefined ? undefined : toCredential(row);
      }),

    listCredentials: (resourceId) => run(() => sql.listCredentials.all(resourceId).map(toCredential)),

    getOperation: (key) =>
      run(() => {
        const row = sql.getOperation.get(key);
        return row === undefined ? undefined : toOperation(row);
      }),

    listPendingOperations: (limit) => run(() => sql.listPending.all(limit).map(toOperation)),

    // Stop-gap until the one-round-trip claim: the snapshot is read after the claim.
    async claimOperation(input): Promise<ClaimResult> {
      const claim = await run(() => claimTx.immediate(input));
      return claim.outcome === 'claimed' ? { ...claim, snapshot: await readSnapshot(this, input) } : claim;
    },
    pruneReplays: async () => 0,

    renewOperation: (key, token, leaseExpiresAt) => run(() => sql.renew.run(leaseExpiresAt, key, token).changes > 0),

    releaseOperation: (key, token) =>
      run(() => {
        sql.release.run(key, token);
      }),

    markOperationPending: (key, token, pending: PendingInput) =>
      run(() => {
        const row = sql.markPending.get(pending.message, pending.deadlineAt, pending.callbackId ?? null, pending.callbackUrl ?? null, key, token);
        if (row === undefined) throw new LeaseLostError();
        return toOperation(row);
      }),

    commitOperation: (key, token, commit) => run(() => commitTx.immediate(key, token, commit)),

    isDeleted: (entity, id) => run(() => sql.isDeleted.get(entity, id) !== undefined),

    pruneTombstones: (before) => run(() => sql.pruneTombstones.run(before).changes),

    claimDeliveries: (input) =>
      run(() =>
        sql.claimDeliveries
          .all({ owner: input.owner, claimExpiresAt: input.now + input.leaseMs, now: input.now, limit: input.limit })
          .map(toDelivery)
          .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt || a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
      ),

    completeDelivery: (id, owner) =>
      run(() => {
        sql.completeDelivery.run(id, owner);
      }),

    retryDelivery: (id, owner, retry) =>
      run(() => {
        sql.retryDelivery.run(retry.attempts, retry.nextAttemptAt, retry.lastError, id, owner);
      }),

    failDelivery: (id, owner, reason) =>
      run(() => {
        sql.failDelivery.run(reason, id, owner);
      }),

    listDeliveries: () => run(() => sql.listDeliveries.all().map(toDelivery)),

    recordUsage: (entries) =>
      run(() => {
        if (entries.length > 0) usageTx.immediate(entries);
      }),

    sumUsage: (resourceId, from, to) =>
      run(() => {
        const totals = Object.create(null) as Record<string, number>;
        for (const row of sql.sumUsage.all(resourceId, from, to)) totals[row.feature] = row.total;
        return totals;
      }),

    hasUsage: (resourceId, from, to) => run(() => sql.hasUsage.get(resourceId, from, to)!.found === 1),

    pruneUsage: (before) => run(() => sql.pruneUsage.run(before).changes),

    async close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}
