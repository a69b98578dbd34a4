import { closeSync, mkdirSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { InvalidOptionsError, ServiceUnavailableError } from '../errors.js';
import { decideClaim, decideRecord, type ClaimReads } from '../idempotency/claim-rule.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, integerOption, optionalLogger, rejectUnknownKeys } from '../lib/options.js';
import { COMMITTED, LEASE_LOST, newToken, ORPHAN_MESSAGE } from './common.js';
import { storeCipher, type EncryptionKeyOption, type SecretCipher } from './crypto.js';
import {
  byDue,
  EMPTY,
  recordMappers,
  toOutboxStats,
  usageJson,
  usageTotals,
  type CredentialRow,
  type DeliveryRow,
  type OperationRow,
  type OutboxStatsRow,
  type ReplayRow,
  replayBody,
  type ResourceRow,
} from './durable.js';
import { bind } from './sql/dialect.js';
import { groupCommit } from './sql/group-commit.js';
import { statements as compileStatements, type StatementName } from './sql/statements.js';
import { SQLITE_MIGRATIONS } from './migrations/sqlite.js';
import { latestVersion, type Migration } from './migrations/types.js';
import type { ClaimInput, ClaimResult, CommitInput, CommitResult, DiagnosableStore, EntityKind, Mutation, PendingInput, RecordedAnswer, ReplayRecord } from './types.js';

export { generateEncryptionKey, DecryptionError, MissingEncryptionKeyError, type EncryptionKeyOption, type EncryptionKeyring } from './crypto.js';

const FACTORY = 'sqliteStore';
const OPTION_NAMES = ['path', 'encryptionKey', 'busyTimeoutMs', 'logger'] as const;

/** Options of {@link sqliteStore}. */
export interface SqliteStoreOptions {
  /** Database file. Created (mode 0600, parent directories 0700) when missing. `':memory:'` for a throwaway store. */
  path: string;
  /**
   * Key that seals credential values, callback payloads and recorded answers at rest: 32 bytes,
   * base64 or hex, or a keyring. `false` opens the store for diagnostics only (an operator's tool):
   * every method that would read or write a secret then rejects with MissingEncryptionKeyError.
   */
  encryptionKey: EncryptionKeyOption | false;
  /** How long a write waits for a lock held by another connection before failing with 503. Default 5000. */
  busyTimeoutMs?: number;
  /** pino logger (a child is used), or `false` for silence. Default: the package's redacting logger. */
  logger?: Logger | false;
}

/** A store on one SQLite file: see {@link sqliteStore}. */
export interface SqliteStore extends DiagnosableStore {
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
 *   so a power cut cannot lose a provisioned resource the marketplace was told about. Group commit:
 *   writes of the same tick share one transaction and one fsync, each in its own savepoint; claims
 *   and outbox bookkeeping, whose loss is harmless, ask for no flush of their own.
 * - `encryptionKey: false` opens the file for diagnostics only (secrets stay sealed and unreadable).
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
  const cipher: SecretCipher = storeCipher(FACTORY, opts.encryptionKey);
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

  const sql = prepareAll(db);
  const { toResource, toCredential, toOperation, toDelivery, toSummary, toAnswer } = recordMappers(cipher);
  const committer = groupCommit(db, mapError);

  const one = <R>(name: StatementName, values: Record<string, unknown> = {}): R | undefined => sql[name].get(...bind(statements[name], values)) as R | undefined;
  const all = <R>(name: StatementName, values: Record<string, unknown> = {}): R[] => sql[name].all(...bind(statements[name], values)) as R[];
  const exec = (name: StatementName, values: Record<string, unknown> = {}): number => sql[name].run(...bind(statements[name], values)).changes;

  const isDeleted = (entity: EntityKind, id: string): boolean => one('isDeleted', { entity, id }) !== undefined;
  const credentialRow = (id: string): CredentialRow | undefined => one<CredentialRow>('getCredential', { id });

  /** The named values of the `putReplay` statement. */
  const replayValues = (replay: ReplayRecord): Record<string, unknown> =>
    ({ requestId: replay.requestId, status: replay.answer.status, ...replayBody(cipher, replay.requestId, replay.answer.body), expiresAt: replay.expiresAt });

  /** Writes `replay` unless its signature has a record (see decideRecord); answers the record that stands at `now`. */
  function putReplay(replay: ReplayRecord, now: number): RecordedAnswer {
    const row = one<ReplayRow>('findReplay', { requestId: replay.requestId, now: Number.NEGATIVE_INFINITY });
    const { write, standing } = decideRecord(row === undefined ? undefined : { requestId: row.request_id, answer: toAnswer(row), expiresAt: Number(row.expires_at) }, replay, now);
    if (write) exec('putReplay', replayValues(replay));
    return standing;
  }

  // The state the claim rule reads (src/idempotency/claim-rule.ts), inside the claim's write
  // transaction: SQLite has a single writer, so no other claim interleaves.
  const reads: ClaimReads = {
    replay(requestId, now) {
      const row = one<ReplayRow>('findReplay', { requestId, now });
      return row === undefined ? undefined : toAnswer(row);
    },
    operation(key) {
      const row = one<OperationRow>('getOperation', { key });
      return row === undefined ? undefined : toOperation(row);
    },
    credentialParent: (id) => credentialRow(id)?.resource_id,
    runningChild(resourceId, now) {
      const row = one<OperationRow>('runningChildOf', { resourceId, now });
      return row === undefined ? undefined : toOperation(row);
    },
    snapshot(scope) {
      const { resourceId, credentialId } = scope;
      const resource = resourceId === undefined ? undefined : one<ResourceRow>('getResource', { id: resourceId });
      const credential = credentialId === undefined ? undefined : credentialRow(credentialId);
      return {
        resource: resource === undefined ? undefined : toResource(resource),
        resourceDeleted: resourceId !== undefined && isDeleted('resource', resourceId),
        credential: credential === undefined ? undefined : toCredential(credential),
        credentialDeleted: credentialId !== undefined && isDeleted('credential', credentialId),
        credentials: scope.listCredentials && resourceId !== undefined ? all<CredentialRow>('listCredentials', { resourceId }).map(toCredential) : [],
      };
    },
  };

  /** The one claim rule over this file's state; its writes in the same transaction. */
  function claim(input: ClaimInput): ClaimResult {
    const { result, writes } = decideClaim(input, reads, newToken);
    for (const write of writes) {
      if (write.type === 'claim') {
        const { operation } = write;
        exec('putOperation', { ...operation, request: JSON.stringify(operation.request), parentId: write.parentId });
      } else {
        putReplay(write.replay, input.now);
        // A recorded refusal must survive a power cut like any answer: this group is flushed.
        committer.requireFlush();
      }
    }
    return result;
  }

  /** The mutation's precondition: undefined when it holds, else the outcome that refuses the commit. */
  function refusal(mutation: Mutation): CommitResult | undefined {
    if (mutation.type === 'putResource') return isDeleted('resource', mutation.resource.id) ? { outcome: 'tombstoned', entity: 'resource' } : undefined;
    if (mutation.type !== 'putCredential') return undefined;
    if (one('resourceExists', { id: mutation.credential.resourceId }) === undefined) return { outcome: 'parent_missing' };
    return isDeleted('credential', mutation.credential.id) ? { outcome: 'tombstoned', entity: 'credential' } : undefined;
  }

  function applyMutation(mutation: Mutation, orphanMessage: string | undefined): void {
    switch (mutation.type) {
      case 'none':
        return;
      case 'putResource': {
        const r = mutation.resource;
        exec('putResource', { ...r, features: JSON.stringify(r.features) });
        return;
      }
      case 'deleteResource': {
        const values = { resourceId: mutation.id, id: mutation.id, deletedAt: mutation.deletedAt };
        exec('reportOrphans', { ...values, empty: EMPTY, message: orphanMessage ?? ORPHAN_MESSAGE });
        exec('dropOrphans', values);
        // Tombstones first, while the credentials are still there to be listed; then the credentials
        // go with the resource: ON DELETE CASCADE.
        exec('buryCredentialsOf', values);
        exec('bury', { ...values, entity: 'resource' });
        exec('deleteResource', values);
        return;
      }
      case 'putCredential': {
        const c = mutation.credential;
        exec('putCredential', { ...c, sealed: cipher.seal(c.values, `credential:${c.id}`) });
        return;
      }
      case 'deleteCredential':
        exec('deleteCredential', { id: mutation.id });
        exec('bury', { entity: 'credential', id: mutation.id, deletedAt: mutation.deletedAt });
        return;
    }
  }

  /**
   * The release is the fencing check: deleting the claim by its token tells whether the token held
   * it, in one statement. A refusal found after it throws, so that the release is rolled back with
   * the rest of the write (see {@link RefusedCommit}).
   */
  function commit(key: string, token: string, input: CommitInput): CommitResult {
    if (exec('release', { key, token }) === 0) return LEASE_LOST;
    const refused = refusal(input.mutation);
    if (refused !== undefined) throw new RefusedCommit(refused);
    applyMutation(input.mutation, input.orphanMessage);
    const delivery = input.delivery;
    if (delivery !== undefined) exec('putDelivery', { ...delivery, sealed: cipher.seal(delivery.payload, `delivery:${delivery.id}`) });
    // ON CONFLICT DO NOTHING: the answer recorded first for the signature stands.
    if (input.replay !== undefined) exec('putReplay', replayValues(input.replay));
    return COMMITTED;
  }

  let closed = false;

  // Reads run at once: better-sqlite3 is synchronous and the process has one connection, so no two
  // store calls interleave. Writes go through the group committer (one transaction, one flush per
  // tick); its transactions are IMMEDIATE so another connection to the file (a backup tool, the
  // sqlite3 shell) cannot slip in between a read and a write.
  function read<T>(work: () => T): Promise<T> {
    if (closed) return Promise.reject(new ServiceUnavailableError('Store is closed'));
    try {
      return Promise.resolve(work());
    } catch (error) {
      return Promise.reject(mapError(error));
    }
  }
  function write<T>(work: () => T, durable = true): Promise<T> {
    if (closed) return Promise.reject(new ServiceUnavailableError('Store is closed'));
    return committer.write(work, durable);
  }
  // Writes whose loss in a power cut is harmless need no flush of their own (see GroupCommitter):
  // a lost operation claim or renewal is a claim the restart expires anyway; a lost outbox claim
  // or attempt record means the callback is sent again (at least once, as always).
  const lightWrite = <T>(work: () => T): Promise<T> => write(work, false);

  return {
    kind: 'sqlite',
    get schemaVersion() {
      return schemaVersion;
    },

    getResource: (id) =>
      read(() => {
        const row = one<ResourceRow>('getResource', { id });
        return row === undefined ? undefined : toResource(row);
      }),

    getCredential: (id) =>
      read(() => {
        const row = credentialRow(id);
        return row === undefined ? undefined : toCredential(row);
      }),

    listCredentials: (resourceId) => read(() => all<CredentialRow>('listCredentials', { resourceId }).map(toCredential)),

    getOperation: (key) =>
      read(() => {
        const row = one<OperationRow>('getOperation', { key });
        return row === undefined ? undefined : toOperation(row);
      }),

    claimOperation: (input) => lightWrite(() => claim(input)),

    renewOperation: (key, token, leaseExpiresAt) => lightWrite(() => exec('renew', { key, token, leaseExpiresAt }) > 0),

    releaseOperation: (key, token) =>
      lightWrite(() => {
        exec('release', { key, token });
      }),

    markOperationPending: (key, token, pending: PendingInput) =>
      write(() => {
        const row = one<OperationRow>('markPending', { ...pending, key, token });
        if (row === undefined) return undefined;
        if (pending.replay !== undefined) putReplay(pending.replay, Number.NEGATIVE_INFINITY);
        return toOperation(row);
      }),

    commitOperation: (key, token, input) => write(() => commit(key, token, input)).catch(refusedOutcome),

    recordReplay: (replay, now) => write(() => putReplay(replay, now)),

    isDeleted: (entity, id) => read(() => isDeleted(entity, id)),

    pruneReplays: (now) => write(() => exec('pruneReplays', { now })),

    pruneTombstones: (before) => write(() => exec('pruneTombstones', { before })),

    claimDeliveries: (input) =>
      lightWrite(() =>
        all<DeliveryRow>('claimDeliveries', { owner: input.owner, claimExpiresAt: input.now + input.leaseMs, now: input.now, limit: input.limit })
          .map(toDelivery)
          .sort(byDue),
      ),

    completeDelivery: (id, owner) =>
      lightWrite(() => {
        exec('completeDelivery', { id, owner });
      }),

    retryDelivery: (id, owner, retry) =>
      lightWrite(() => {
        exec('retryDelivery', { ...retry, id, owner });
      }),

    failDelivery: (id, owner, reason) =>
      lightWrite(() => {
        exec('failDelivery', { id, owner, reason });
      }),

    listDeliveries: () => read(() => all<DeliveryRow>('listDeliveries').map(toDelivery)),

    listDeliverySummaries: (filter = {}) =>
      read(() => all<DeliveryRow>('listDeliverySummaries', { state: filter.state, limit: filter.limit ?? Number.MAX_SAFE_INTEGER }).map(toSummary)),

    getDeliverySummary: (id) =>
      read(() => {
        const row = one<DeliveryRow>('getDeliverySummary', { id });
        return row === undefined ? undefined : toSummary(row);
      }),

    makeDeliveryDue: (id, now) => write(() => exec('makeDeliveryDue', { id, now }) > 0),

    dropDelivery: (id) => write(() => exec('dropDelivery', { id }) > 0),

    outboxStats: () => read(() => toOutboxStats(one<OutboxStatsRow>('outboxStats')!)),

    listPendingOperations: (limit) => read(() => all<OperationRow>('listPending', { limit }).map(toOperation)),

    countPendingOperations: () => read(() => Number(one<{ n: number }>('countPending')!.n)),

    ping: () =>
      read(() => {
        one('ping');
      }),

    recordUsage: (entries) =>
      write(() => {
        if (entries.length > 0) exec('recordUsage', { entries: usageJson(entries) });
      }),

    sumUsage: (resourceId, from, to) => read(() => usageTotals(all('sumUsage', { resourceId, from, to }))),

    hasUsage: (resourceId, from, to) => read(() => one('hasUsage', { resourceId, from, to }) !== undefined),

    pruneUsage: (before) => write(() => exec('pruneUsage', { before })),

    async close() {
      if (closed) return;
      // Writes already accepted are committed before the file closes.
      committer.flush();
      closed = true;
      db.close();
    },
  };
}

/**
 * A commit refused after its claim was released (the entity was deleted meanwhile): thrown inside
 * the write so that the group commit rolls the release back, and turned back into the outcome it
 * carries by {@link refusedOutcome}. Never seen outside this file.
 */
class RefusedCommit extends Error {
  constructor(readonly outcome: CommitResult) {
    super(`commit refused: ${outcome.outcome}`);
  }
}

function refusedOutcome(error: unknown): CommitResult {
  if (error instanceof RefusedCommit) return error.outcome;
  throw error;
}

/** The statements of the store, prepared once (SQLite dialect). */
const statements = compileStatements('sqlite');

function prepareAll(db: BetterSqlite3.Database): Record<StatementName, BetterSqlite3.Statement> {
  const prepared = {} as Record<StatementName, BetterSqlite3.Statement>;
  for (const name of Object.keys(statements) as StatementName[]) prepared[name] = db.prepare(statements[name].text);
  return prepared;
}
