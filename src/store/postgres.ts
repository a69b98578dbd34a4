import { createRequire } from 'node:module';
import type { Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg';
import { InvalidOptionsError, LeaseLostError, MarketplaceError, NotFoundError, ServiceUnavailableError } from '../errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { asOptionsObject, integerOption, optionalLogger, rejectUnknownKeys } from '../lib/options.js';
import { entityDeletedError, isOperationLive, newToken } from './common.js';
import { createCipher, type EncryptionKeyOption, type SecretCipher } from './crypto.js';
import { readSnapshot } from './snapshot.js';
import { recordMappers, type CredentialRow, type DeliveryRow, type OperationRow, type ResourceRow } from './durable.js';
import { POSTGRES_MIGRATIONS } from './migrations/postgres.js';
import { latestVersion, type Migration } from './migrations/types.js';
import type {
  ClaimInput,
  ClaimResult,
  CommitInput,
  DeliveryRecord,
  ListingStore,
} from './types.js';

export { generateEncryptionKey, DecryptionError, type EncryptionKeyOption, type EncryptionKeyring } from './crypto.js';
export { migratePlatformPostgres, postgresOAuthStore, postgresSeenEventStore, type PlatformPostgresOptions, type PlatformPostgresStore, type PostgresOAuthStore, type PostgresSeenEventStore } from './platform-postgres.js';

const FACTORY = 'postgresStore';
const DEFAULT_SCHEMA = 'embedded_marketplace';
const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;
// First half of the advisory lock key ("EM"); the second is hashtext(schema), so stores in different
// schemas of one database migrate independently.
const LOCK_NAMESPACE = 0x454d;

/** Connection settings shared by {@link postgresStore} and {@link migratePostgres}. */
export interface PostgresConnectionOptions {
  /** A `pg` Pool the host app owns (and ends). Give this or `connectionString`. */
  pool?: Pool;
  /** `postgres://user:password@host:port/database`: the store makes and owns its pool. */
  connectionString?: string;
  /** Schema holding the tables; created when missing. `[a-z_][a-z0-9_]*`. Default `embedded_marketplace`. */
  schema?: string;
  /** pino logger (a child is used), or `false` for silence. Default: the package's redacting logger. */
  logger?: Logger | false;
}

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions extends PostgresConnectionOptions {
  /** Key that seals credential values and callback payloads at rest: 32 bytes, base64 or hex, or a keyring. */
  encryptionKey: EncryptionKeyOption;
  /** Apply pending migrations on start. Default true; `false` only checks the schema is up to date. */
  migrate?: boolean;
  /** Connections in the store's own pool (with `connectionString` only). Default 10. */
  poolSize?: number;
}

/** A store in PostgreSQL shared by any number of instances: see {@link postgresStore}. */
export interface PostgresStore extends ListingStore {
  readonly kind: 'postgres';
  /** The schema the tables live in. */
  readonly schema: string;
  /** The pool in use (the given one, or the store's own): share it with connect-pg-simple, for example. */
  readonly pool: Pool;
  /** Resolves once migrations ran (or the schema was checked); rejects with the reason otherwise. Retried on the next call. */
  ready(): Promise<void>;
}

/** What {@link migratePostgres} did. */
export interface MigrationReport {
  schema: string;
  /** Schema version after the run. */
  version: number;
  /** Versions applied by this run (empty when already up to date). */
  applied: number[];
}

// Node socket errors and pg's own messages for a connection that is gone or never came.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN']);
const CONNECTION_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable|Cannot use a pool after calling end|Connection closed|connection timeout/i;

/** Whether the connection itself failed or is gone (so it must not go back to the pool). */
function isConnectionError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || /^08/.test(code) || /^57P0/.test(code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isConnectionError);
  return typeof message === 'string' && CONNECTION_MESSAGES.test(message);
}

/**
 * Whether a pg error means "try again later" rather than "this statement is wrong": no connection
 * (08xxx, socket errors), the server shutting down or starting (57P0x), out of resources (53xxx),
 * a serialization failure or deadlock (40001, 40P01), a canceled statement or lock timeout (57014,
 * 55P03), a read-only server after a failover (25006), an I/O error (58xxx).
 */
export function isTransientPostgresError(error: unknown): boolean {
  if (isConnectionError(error)) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (/^(53|58)/.test(code) || ['40001', '40P01', '57014', '25006', '55P03'].includes(code));
}

function mapError(error: unknown): unknown {
  if (error instanceof MarketplaceError) return error;
  if (isTransientPostgresError(error)) return new ServiceUnavailableError(undefined, undefined, { cause: error });
  return error;
}

function loadPool(): typeof Pool {
  try {
    return (createRequire(import.meta.url)('pg') as { Pool: typeof Pool }).Pool;
  } catch (error) {
    throw new Error(`${FACTORY} needs the optional peer dependency pg: run \`npm install pg\``, { cause: error });
  }
}

interface Connection {
  pool: Pool;
  ownsPool: boolean;
  schema: string;
  logger: Logger;
}

function openConnection(factory: string, options: Record<string, unknown>, poolSize: number | undefined): Connection {
  const { pool, connectionString } = options;
  if ((pool === undefined) === (connectionString === undefined)) {
    throw new InvalidOptionsError(`${factory}: give exactly one of "pool" (a pg Pool) or "connectionString" (postgres://user:password@host:5432/database)`);
  }
  const schema = options.schema ?? DEFAULT_SCHEMA;
  if (typeof schema !== 'string' || !SCHEMA_PATTERN.test(schema)) {
    throw new InvalidOptionsError(`${factory}: option "schema" must match ${SCHEMA_PATTERN.source} (lowercase letters, digits, underscores; at most 63)`);
  }
  const logger = createLogger(optionalLogger<Logger>(factory, options), { component: 'store', store: 'postgres', schema });
  if (pool !== undefined) {
    if (typeof pool !== 'object' || pool === null || typeof (pool as Pool).query !== 'function' || typeof (pool as Pool).connect !== 'function') {
      throw new InvalidOptionsError(`${factory}: option "pool" must be a pg Pool (new Pool({ connectionString }))`);
    }
    if (poolSize !== undefined) throw new InvalidOptionsError(`${factory}: option "poolSize" applies to the store's own pool only; size the pool you pass with its "max" option`);
    return { pool: pool as Pool, ownsPool: false, schema, logger };
  }
  if (typeof connectionString !== 'string' || !/^postgres(ql)?:\/\//.test(connectionString)) {
    // Never echo it: it usually carries a password.
    throw new InvalidOptionsError(`${factory}: option "connectionString" must be a postgres:// or postgresql:// URL`);
  }
  const PoolClass = loadPool();
  const config: PoolConfig = {
    connectionString,
    max: poolSize ?? 10,
    // Without it a request waits forever for a server that does not answer; with it, 503 in 5 s.
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    // Idle connections and their timers must not keep the process alive.
    allowExitOnIdle: true,
    application_name: 'embedded-marketplace',
  };
  return { pool: new PoolClass(config), ownsPool: true, schema, logger };
}

/** Runs `work` in a transaction on one pooled connection; a broken connection is discarded, not reused. */
async function inTransaction<T>(pool: Pool, logger: Logger, work: (client: PoolClient) => Promise<T>): Promise<T> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw mapError(error);
  }
  // pg emits 'error' on a checked-out client whose connection dies between two queries; without a
  // listener that is an uncaught exception.
  let broken: Error | undefined;
  const onError = (error: Error): void => {
    broken = error;
    logger.warn({ err: { message: error.message, code: (error as { code?: unknown }).code } }, `${FACTORY}: connection lost during a transaction`);
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    if (broken === undefined && isConnectionError(error)) broken = error as Error;
    if (broken === undefined) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError as Error;
      });
    }
    throw mapError(error);
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

async function applyMigrations(connection: Connection, migrations: readonly Migration[]): Promise<MigrationReport> {
  const { pool, schema, logger } = connection;
  const applied: number[] = [];
  const version = await inTransaction(pool, logger, async (client) => {
    // Serializes instances starting together; released by COMMIT/ROLLBACK.
    await client.query('SELECT pg_advisory_xact_lock($1::integer, hashtext($2))', [LOCK_NAMESPACE, schema]);
    const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    // Checked first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege even when it exists.
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA "${schema}"`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS "${schema}".schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const row = await client.query<{ version: number | null }>(`SELECT max(version) AS version FROM "${schema}".schema_migrations`);
    const current = row.rows[0]?.version ?? 0;
    const latest = latestVersion(migrations);
    if (current > latest) {
      logger.warn({ schemaVersion: current, supported: latest }, `${FACTORY}: schema "${schema}" was migrated by a newer release (version ${current}, this one knows ${latest}); continuing, as migrations are additive`);
    }
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      await client.query(`SET LOCAL search_path TO "${schema}"`);
      await client.query(migration.sql);
      await client.query(`INSERT INTO "${schema}".schema_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
      applied.push(migration.version);
      logger.info({ version: migration.version, name: migration.name }, `${FACTORY}: applied migration`);
    }
    return Math.max(current, latest);
  });
  return { schema, version, applied };
}

/**
 * Applies the store's pending migrations, for a deploy step or a CLI, and answers what it did. Safe
 * to run from several processes at once (an advisory lock serializes them) and to repeat.
 *
 * @example
 * ```ts
 * import { migratePostgres } from 'embedded-marketplace/stores/postgres';
 * const report = await migratePostgres({ connectionString: process.env.DATABASE_URL! });
 * console.log(`schema ${report.schema} at version ${report.version}`);
 * ```
 */
export async function migratePostgres(options: PostgresConnectionOptions): Promise<MigrationReport> {
  const opts = asOptionsObject('migratePostgres', options);
  rejectUnknownKeys('migratePostgres', opts, ['pool', 'connectionString', 'schema', 'logger']);
  const connection = openConnection('migratePostgres', opts, undefined);
  try {
    return await applyMigrations(connection, POSTGRES_MIGRATIONS);
  } finally {
    if (connection.ownsPool) await connection.pool.end();
  }
}


const OPERATION_COLUMNS = 'key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at, message, callback_id, callback_url, deadline_at';
const DELIVERY_COLUMNS = 'id, callback_id, url, sealed_payload, created_at, deadline_at, state, attempts, next_attempt_at, last_error, claimed_by, claim_expires_at';

/**
 * A durable store in PostgreSQL (`pg`) that several instances of a provider share: idempotency,
 * conflicts, pending operations, the callback outbox and usage stay correct when two instances get
 * the same request at the same moment, because every decision is one statement or one transaction
 * guarded by a unique key or a row lock, never a read followed by a write.
 *
 * - Migrations run on start (unless `migrate: false`) under an advisory lock; see {@link migratePostgres}.
 * - Credential values and callback payloads are sealed with AES-256-GCM under `encryptionKey`.
 * - An unreachable or failing server rejects with ServiceUnavailableError (503); nothing partial is
 *   left (each write is one transaction) and the pool reconnects on its own for the next request.
 * - The factory returns at once; `ready()` tells when the schema is in place.
 *
 * @example
 * ```ts
 * import { postgresStore } from 'embedded-marketplace/stores/postgres';
 * const store = postgresStore({
 *   connectionString: process.env.DATABASE_URL!,
 *   encryptionKey: process.env.STORE_ENCRYPTION_KEY!,
 * });
 * await store.ready();
 * app.use(marketplaceRouter({ store, handlers }));
 * ```
 */
export function postgresStore(options: PostgresStoreOptions): PostgresStore {
  const opts = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, opts, ['pool', 'connectionString', 'schema', 'encryptionKey', 'migrate', 'poolSize', 'logger']);
  const migrate = opts.migrate ?? true;
  if (typeof migrate !== 'boolean') throw new InvalidOptionsError(`${FACTORY}: option "migrate" must be a boolean`);
  const poolSize = opts.poolSize === undefined ? undefined : integerOption(FACTORY, 'poolSize', opts.poolSize, 10, 1);
  const cipher: SecretCipher = createCipher(opts.encryptionKey as EncryptionKeyOption, `${FACTORY}: option "encryptionKey"`);
  const connection = openConnection(FACTORY, opts, poolSize);
  const { pool, schema, logger } = connection;
  const t = (table: string): string => `"${schema}".${table}`;

  // An idle pooled connection that dies emits 'error' on the pool; unhandled, that would crash the
  // process. The pool drops the connection and opens a new one on the next request.
  const onPoolError = (error: Error): void => {
    logger.warn({ err: { message: error.message, code: (error as { code?: unknown }).code } }, `${FACTORY}: idle connection lost; the pool reconnects on the next request`);
  };
  pool.on('error', onPoolError);

  async function start(): Promise<void> {
    if (migrate) {
      await applyMigrations(connection, POSTGRES_MIGRATIONS);
      return;
    }
    let version: number;
    try {
      const result = await pool.query<{ version: number | null }>(`SELECT max(version) AS version FROM ${t('schema_migrations')}`);
      version = result.rows[0]?.version ?? 0;
    } catch (error) {
      if ((error as { code?: unknown }).code !== '42P01') throw error;
      version = 0;
    }
    const latest = latestVersion(POSTGRES_MIGRATIONS);
    if (version < latest) {
      throw new Error(`${FACTORY}: schema "${schema}" is at version ${version}, this release needs ${latest}: run migratePostgres({ connectionString, schema: '${schema}' }) or set migrate: true`);
    }
  }

  let starting: Promise<void> | undefined;
  let closed = false;
  function ready(): Promise<void> {
    if (closed) return Promise.reject(new ServiceUnavailableError('Store is closed'));
    starting ??= start().catch((error: unknown) => {
      starting = undefined;
      throw mapError(error);
    });
    return starting;
  }
  ready().catch((error: unknown) => {
    logger.error({ err: error }, `${FACTORY}: start-up failed; retrying on the next call`);
  });

  async function query<R extends object = QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    await ready();
    try {
      return (await pool.query(text, values)).rows as R[];
    } catch (error) {
      throw mapError(error);
    }
  }

  async function transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    await ready();
    return inTransaction(pool, logger, work);
  }

  const { toResource, toCredential, toOperation, toDelivery } = recordMappers(cipher);

  const byDue = (a: DeliveryRecord, b: DeliveryRecord): number =>
    a.nextAttemptAt - b.nextAttemptAt || a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

  // The liveness rule of common.ts isOperationLive, in SQL, over the row that holds the key now: the
  // conflicting row is locked and re-read by ON CONFLICT, so two instances cannot both replace it.
  const claimSql = `
    INSERT INTO ${t('operations')} AS o (key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at)
    VALUES ($1, $2, $3, $4, 'running', $5, $6, $7, $8, $9)
    ON CONFLICT (key) DO UPDATE SET
      kind = EXCLUDED.kind, target_id = EXCLUDED.target_id, fingerprint = EXCLUDED.fingerprint, state = 'running',
      token = EXCLUDED.token, owner = EXCLUDED.owner, lease_expires_at = EXCLUDED.lease_expires_at,
      request = EXCLUDED.request, created_at = EXCLUDED.created_at,
      message = NULL, callback_id = NULL, callback_url = NULL, deadline_at = NULL
    WHERE NOT (CASE WHEN o.state = 'running' THEN o.lease_expires_at > $9
                    ELSE o.deadline_at IS NULL OR o.deadline_at > $9 END)
    RETURNING ${OPERATION_COLUMNS}`;

  async function claimOperation(input: ClaimInput): Promise<ClaimResult> {
    const values = [
      input.key,
      input.kind,
      input.targetId,
      input.fingerprint,
      newToken(),
      input.owner,
      input.now + input.leaseMs,
      JSON.stringify(input.request),
      input.now,
    ];
    // A live holder makes the upsert return nothing; it is then read. Between the two statements
    // the holder may have committed or released, so try again: each round either claims or sees a
    // live holder, and a key changing hands that fast is rare, so a few rounds are plenty.
    for (let attempt = 0; attempt < 8; attempt++) {
      const [claimed] = await query<OperationRow>(claimSql, values);
      // Stop-gap until the one-round-trip claim: the snapshot is read after the claim.
      if (claimed !== undefined) return { outcome: 'claimed', operation: toOperation(claimed), snapshot: await readSnapshot(store, input) };
      const [holder] = await query<OperationRow>(`SELECT ${OPERATION_COLUMNS} FROM ${t('operations')} WHERE key = $1`, [input.key]);
      if (holder !== undefined) {
        const operation = toOperation(holder);
        if (isOperationLive(operation, input.now)) return { outcome: 'busy', operation };
      }
    }
    throw new ServiceUnavailableError('The operation is changing hands too fast, retry later');
  }

  const store: PostgresStore = {
    kind: 'postgres',
    schema,
    pool,
    ready,

    async getResource(id) {
      const [row] = await query<ResourceRow>(`SELECT * FROM ${t('resources')} WHERE id = $1`, [id]);
      return row === undefined ? undefined : toResource(row);
    },

    async getCredential(id) {
      const [row] = await query<CredentialRow>(`SELECT * FROM ${t('credentials')} WHERE id = $1`, [id]);
      return row === undefined ? undefined : toCredential(row);
    },

    async listCredentials(resourceId) {
      const rows = await query<CredentialRow>(`SELECT * FROM ${t('credentials')} WHERE resource_id = $1 ORDER BY created_at, id`, [resourceId]);
      return rows.map(toCredential);
    },

    async getOperation(key) {
      const [row] = await query<OperationRow>(`SELECT ${OPERATION_COLUMNS} FROM ${t('operations')} WHERE key = $1`, [key]);
      return row === undefined ? undefined : toOperation(row);
    },

    async listPendingOperations(limit) {
      const rows = await query<OperationRow>(
        `SELECT ${OPERATION_COLUMNS} FROM ${t('operations')} WHERE state = 'pending' ORDER BY created_at, key LIMIT $1`,
        [limit],
      );
      return rows.map(toOperation);
    },

    claimOperation,

    async renewOperation(key, token, leaseExpiresAt) {
      const rows = await query(`UPDATE ${t('operations')} SET lease_expires_at = $3 WHERE key = $1 AND token = $2 AND state = 'running' RETURNING 1`, [
        key,
        token,
        leaseExpiresAt,
      ]);
      return rows.length > 0;
    },

    async releaseOperation(key, token) {
      await query(`DELETE FROM ${t('operations')} WHERE key = $1 AND token = $2`, [key, token]);
    },

    async markOperationPending(key, token, pending) {
      const [row] = await query<OperationRow>(
        `UPDATE ${t('operations')} SET state = 'pending', message = $3, deadline_at = $4,
           callback_id = coalesce($5, callback_id), callback_url = coalesce($6, callback_url)
         WHERE key = $1 AND token = $2 RETURNING ${OPERATION_COLUMNS}`,
        [key, token, pending.message, pending.deadlineAt, pending.callbackId ?? null, pending.callbackUrl ?? null],
      );
      if (row === undefined) throw new LeaseLostError();
      return toOperation(row);
    },

    async commitOperation(key, token, commit: CommitInput) {
      await transaction(async (client) => {
        // The fencing check and the lock in one: the row is ours until COMMIT, and a later claim
        // waits for us, then finds the key free.
        const held = await client.query(`DELETE FROM ${t('operations')} WHERE key = $1 AND token = $2 RETURNING key`, [key, token]);
        if (held.rowCount === 0) throw new LeaseLostError();
        const { mutation } = commit;
        switch (mutation.type) {
          case 'none':
            break;
          case 'putResource': {
            const r = mutation.resource;
            // No race with the deletion: it would hold the same operation key.
            const buried = await client.query(`SELECT 1 FROM ${t('tombstones')} WHERE entity = 'resource' AND id = $1`, [r.id]);
            if (buried.rowCount !== 0) throw entityDeletedError('resource');
            await client.query(
              `INSERT INTO ${t('resources')} (id, product, plan, region, features, message, created_at, updated_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
               ON CONFLICT (id) DO UPDATE SET product = EXCLUDED.product, plan = EXCLUDED.plan, region = EXCLUDED.region,
                 features = EXCLUDED.features, message = EXCLUDED.message, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at`,
              [r.id, r.product, r.plan, r.region, JSON.stringify(r.features), r.message, r.createdAt, r.updatedAt],
            );
            break;
          }
          case 'deleteResource':
            // Lock the resource first: a credential commit in flight holds KEY SHARE on it, so this
            // waits for it, and the next statement (a fresh snapshot) sees its credential and buries
            // it too; a later one finds the resource gone. Then the credentials go with it (CASCADE).
            await client.query(`SELECT 1 FROM ${t('resources')} WHERE id = $1 FOR UPDATE`, [mutation.id]);
            await client.query(
              `INSERT INTO ${t('tombstones')} (entity, id, deleted_at)
               SELECT 'credential', id, $2::bigint FROM ${t('credentials')} WHERE resource_id = $1::text
               UNION ALL SELECT 'resource', $1::text, $2::bigint
               ON CONFLICT (entity, id) DO NOTHING`,
              [mutation.id, mutation.deletedAt],
            );
            await client.query(`DELETE FROM ${t('resources')} WHERE id = $1`, [mutation.id]);
            break;
          case 'putCredential': {
            const c = mutation.credential;
            // KEY SHARE keeps a concurrent deprovisioning from deleting the resource before we commit.
            const parent = await client.query(`SELECT 1 FROM ${t('resources')} WHERE id = $1 FOR KEY SHARE`, [c.resourceId]);
            if (parent.rowCount === 0) throw new NotFoundError('Resource not found');
            const buried = await client.query(`SELECT 1 FROM ${t('tombstones')} WHERE entity = 'credential' AND id = $1`, [c.id]);
            if (buried.rowCount !== 0) throw entityDeletedError('credential');
            await client.query(
              `INSERT INTO ${t('credentials')} (id, resource_id, sealed_values, message, created_at) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (id) DO UPDATE SET resource_id = EXCLUDED.resource_id, sealed_values = EXCLUDED.sealed_values,
                 message = EXCLUDED.message, created_at = EXCLUDED.created_at`,
              [c.id, c.resourceId, cipher.seal(c.values, `credential:${c.id}`), c.message, c.createdAt],
            );
            break;
          }
          case 'deleteCredential':
            await client.query(`DELETE FROM ${t('credentials')} WHERE id = $1`, [mutation.id]);
            await client.query(`INSERT INTO ${t('tombstones')} (entity, id, deleted_at) VALUES ('credential', $1, $2) ON CONFLICT (entity, id) DO NOTHING`, [
              mutation.id,
              mutation.deletedAt,
            ]);
            break;
        }
        const delivery = commit.delivery;
        if (delivery !== undefined) {
          await client.query(
            `INSERT INTO ${t('deliveries')} (id, callback_id, url, sealed_payload, created_at, deadline_at, state, attempts, next_attempt_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $5)
             ON CONFLICT (id) DO UPDATE SET callback_id = EXCLUDED.callback_id, url = EXCLUDED.url, sealed_payload = EXCLUDED.sealed_payload,
               created_at = EXCLUDED.created_at, deadline_at = EXCLUDED.deadline_at, state = 'pending', attempts = 0,
               next_attempt_at = EXCLUDED.next_attempt_at, last_error = NULL, claimed_by = NULL, claim_expires_at = NULL`,
            [delivery.id, delivery.callbackId, delivery.url, cipher.seal(delivery.payload, `delivery:${delivery.id}`), delivery.createdAt, delivery.deadlineAt],
          );
        }
      });
    },

    async isDeleted(entity, id) {
      const rows = await query(`SELECT 1 FROM ${t('tombstones')} WHERE entity = $1 AND id = $2`, [entity, id]);
      return rows.length > 0;
    },

    async pruneTombstones(before) {
      await ready();
      try {
        return (await pool.query(`DELETE FROM ${t('tombstones')} WHERE deleted_at < $1`, [before])).rowCount ?? 0;
      } catch (error) {
        throw mapError(error);
      }
    },

    async claimDeliveries(input) {
      // SKIP LOCKED: instances polling together each take different rows instead of queueing on the
      // same ones; a row whose claim another instance just committed is re-checked and left out.
      const rows = await query<DeliveryRow>(
        `UPDATE ${t('deliveries')} SET claimed_by = $1, claim_expires_at = $2
         WHERE id IN (
           SELECT id FROM ${t('deliveries')}
           WHERE state = 'pending' AND next_attempt_at <= $3 AND (claim_expires_at IS NULL OR claim_expires_at <= $3)
           ORDER BY next_attempt_at, created_at, id
           LIMIT $4
           FOR UPDATE SKIP LOCKED)
         RETURNING ${DELIVERY_COLUMNS}`,
        [input.owner, input.now + input.leaseMs, input.now, input.limit],
      );
      return rows.map(toDelivery).sort(byDue);
    },

    async completeDelivery(id, owner) {
      await query(`DELETE FROM ${t('deliveries')} WHERE id = $1 AND claimed_by = $2`, [id, owner]);
    },

    async retryDelivery(id, owner, retry) {
      await query(
        `UPDATE ${t('deliveries')} SET attempts = $3, next_attempt_at = $4, last_error = $5, claimed_by = NULL, claim_expires_at = NULL
         WHERE id = $1 AND claimed_by = $2`,
        [id, owner, retry.attempts, retry.nextAttemptAt, retry.lastError],
      );
    },

    async failDelivery(id, owner, reason) {
      await query(
        `UPDATE ${t('deliveries')} SET state = 'failed', last_error = $3, claimed_by = NULL, claim_expires_at = NULL
         WHERE id = $1 AND claimed_by = $2`,
        [id, owner, reason],
      );
    },

    async listDeliveries() {
      const rows = await query<DeliveryRow>(`SELECT ${DELIVERY_COLUMNS} FROM ${t('deliveries')} ORDER BY created_at, id`, []);
      return rows.map(toDelivery);
    },

    async recordUsage(entries) {
      if (entries.length === 0) return;
      // One statement for the whole batch: atomic, and one round trip however many entries.
      await query(
        `INSERT INTO ${t('usage_entries')} (resource_id, feature, quantity, at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::double precision[], $4::bigint[])`,
        [entries.map((e) => e.resourceId), entries.map((e) => e.feature), entries.map((e) => e.quantity), entries.map((e) => e.at)],
      );
    },

    async sumUsage(resourceId, from, to) {
      const rows = await query<{ feature: string; total: unknown }>(
        `SELECT feature, sum(quantity) AS total FROM ${t('usage_entries')} WHERE resource_id = $1 AND at >= $2 AND at < $3 GROUP BY feature`,
        [resourceId, from, to],
      );
      const totals = Object.create(null) as Record<string, number>;
      for (const row of rows) totals[row.feature] = Number(row.total);
      return totals;
    },

    async hasUsage(resourceId, from, to) {
      const [row] = await query<{ found: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM ${t('usage_entries')} WHERE resource_id = $1 AND at >= $2 AND at < $3) AS found`,
        [resourceId, from, to],
      );
      return row?.found === true;
    },

    async pruneUsage(before) {
      await ready();
      try {
        return (await pool.query(`DELETE FROM ${t('usage_entries')} WHERE at < $1`, [before])).rowCount ?? 0;
      } catch (error) {
        throw mapError(error);
      }
    },

    async close() {
      if (closed) return;
      closed = true;
      // Let a start-up in flight finish before the pool goes away under it.
      await starting?.catch(() => undefined);
      pool.removeListener('error', onPoolError);
      if (connection.ownsPool) await pool.end();
    },

    // Stop-gap until replay records are stored: none is kept, so there is nothing to prune.
    pruneReplays: async () => 0,
  };
  return store;
}
