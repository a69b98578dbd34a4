import { createHash } from 'node:crypto';
import type { Pool, QueryResultRow } from 'pg';
import { InvalidOptionsError, ServiceUnavailableError } from '../../errors.js';
import { asOptionsObject, integerOption, rejectUnknownKeys } from '../../lib/options.js';
import { storeCipher, type EncryptionKeyOption, type SecretCipher } from '../crypto.js';
import {
  byDue,
  recordMappers,
  toOutboxStats,
  usageJson,
  usageTotals,
  type CredentialRow,
  type DeliveryRow,
  type OperationRow,
  type OutboxStatsRow,
  type ResourceRow,
} from '../durable.js';
import { bind } from '../sql/dialect.js';
import { statements as compileStatements, type StatementName } from '../sql/statements.js';
import { POSTGRES_MIGRATIONS } from '../migrations/postgres.js';
import { latestVersion } from '../migrations/types.js';
import type { DiagnosableStore } from '../types.js';
import { mapError, openConnection, watchPool, type PostgresConnectionOptions } from './connection.js';
import { applyMigrations, schemaVersion, STORE_LEDGER } from './migrations.js';
import { operationSteps } from './operations.js';

const FACTORY = 'postgresStore';

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions extends PostgresConnectionOptions {
  /**
   * Key that seals credential values, callback payloads and recorded answers at rest: 32 bytes,
   * base64 or hex, or a keyring. `false` opens the store for diagnostics only (an operator's tool):
   * every method that would read or write a secret then rejects with MissingEncryptionKeyError.
   */
  encryptionKey: EncryptionKeyOption | false;
  /** Apply pending migrations on start. Default true; `false` only checks the schema is up to date. */
  migrate?: boolean;
  /** Connections in the store's own pool (with `connectionString` only). Default 10. */
  poolSize?: number;
}

/** A store in PostgreSQL shared by any number of instances: see {@link postgresStore}. */
export interface PostgresStore extends DiagnosableStore {
  readonly kind: 'postgres';
  /** The schema the tables live in. */
  readonly schema: string;
  /** The pool in use (the given one, or the store's own): share it with connect-pg-simple, for example. */
  readonly pool: Pool;
  /** Resolves once migrations ran (or the schema was checked); rejects with the reason otherwise. Retried on the next call. */
  ready(): Promise<void>;
}

/**
 * A durable store in PostgreSQL (`pg`) that several instances of a provider share: idempotency,
 * conflicts, pending operations, the callback outbox and usage stay correct when two instances get
 * the same request at the same moment, because every decision is one statement or one transaction
 * guarded by a unique key or a row lock, never a read followed by a write.
 *
 * - Migrations run on start (unless `migrate: false`) under an advisory lock; see {@link migratePostgres}.
 * - A claim and a commit are one statement each (the claim rule's PL/pgSQL port of migration 5, the
 *   commit of migration 4); a credential claim and its resource's deprovision claim serialize on
 *   an advisory lock of the resource id; the claims (or commits) of one tick go as one statement.
 * - Credential values, callback payloads and recorded answers are sealed with AES-256-GCM under
 *   `encryptionKey`; `encryptionKey: false` opens the schema for diagnostics only.
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
  const cipher: SecretCipher = storeCipher(FACTORY, opts.encryptionKey);
  const connection = openConnection(FACTORY, opts, poolSize);
  const { pool, schema, logger } = connection;
  const t = (table: string): string => `"${schema}".${table}`;

  const unwatchPool = watchPool(connection, FACTORY);

  async function start(): Promise<void> {
    if (migrate) {
      await applyMigrations(connection, STORE_LEDGER, POSTGRES_MIGRATIONS);
      return;
    }
    const version = await schemaVersion(pool, schema, STORE_LEDGER);
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

  async function query<R extends object = QueryResultRow>(statement: string | { name: string; text: string }, values: unknown[]): Promise<R[]> {
    await ready();
    try {
      const config = typeof statement === 'string' ? { text: statement, values } : { ...statement, values };
      return (await pool.query<R & QueryResultRow>(config)).rows;
    } catch (error) {
      throw mapError(error);
    }
  }

  const sql = compileStatements('postgres', schema);
  const { toResource, toCredential, toOperation, toDelivery, toSummary } = recordMappers(cipher);

  const rows = <R extends object>(name: StatementName, values: Record<string, unknown> = {}): Promise<R[]> => query<R>(sql[name].text, bind(sql[name], values));
  const first = async <R extends object>(name: StatementName, values: Record<string, unknown> = {}): Promise<R | undefined> => (await rows<R>(name, values))[0];
  async function changes(name: StatementName, values: Record<string, unknown> = {}): Promise<number> {
    await ready();
    try {
      return (await pool.query(sql[name].text, bind(sql[name], values))).rowCount ?? 0;
    } catch (error) {
      throw mapError(error);
    }
  }

  // The two statements of every request are prepared once per connection (named), so the server
  // parses and plans them once; the name carries the schema, as two stores may share a pool.
  const statementPrefix = `em_${createHash('sha256').update(schema).digest('hex').slice(0, 12)}_`;
  // Claims, commits, pending marks and recorded answers: operations.ts (the claim rule's PL/pgSQL port).
  const steps = operationSteps({ query, t, statementPrefix, sql, cipher, logger });

  const store: PostgresStore = {
    kind: 'postgres',
    schema,
    pool,
    ready,

    async getResource(id) {
      const row = await first<ResourceRow>('getResource', { id });
      return row === undefined ? undefined : toResource(row);
    },

    async getCredential(id) {
      const row = await first<CredentialRow>('getCredential', { id });
      return row === undefined ? undefined : toCredential(row);
    },

    async listCredentials(resourceId) {
      return (await rows<CredentialRow>('listCredentials', { resourceId })).map(toCredential);
    },

    async getOperation(key) {
      const row = await first<OperationRow>('getOperation', { key });
      return row === undefined ? undefined : toOperation(row);
    },

    claimOperation: steps.claimOperation,

    async renewOperation(key, token, leaseExpiresAt) {
      return (await changes('renew', { key, token, leaseExpiresAt })) > 0;
    },

    async releaseOperation(key, token) {
      await changes('release', { key, token });
    },

    markOperationPending: steps.markOperationPending,

    commitOperation: steps.commitOperation,

    recordReplay: steps.recordReplay,

    async isDeleted(entity, id) {
      return (await first('isDeleted', { entity, id })) !== undefined;
    },

    pruneReplays: (now) => changes('pruneReplays', { now }),

    pruneTombstones: (before) => changes('pruneTombstones', { before }),

    async claimDeliveries(input) {
      const claimed = await rows<DeliveryRow>('claimDeliveries', { owner: input.owner, claimExpiresAt: input.now + input.leaseMs, now: input.now, limit: input.limit });
      return claimed.map(toDelivery).sort(byDue);
    },

    async completeDelivery(id, owner) {
      await changes('completeDelivery', { id, owner });
    },

    async retryDelivery(id, owner, retry) {
      await changes('retryDelivery', { ...retry, id, owner });
    },

    async failDelivery(id, owner, reason) {
      await changes('failDelivery', { id, owner, reason });
    },

    async listDeliveries() {
      return (await rows<DeliveryRow>('listDeliveries')).map(toDelivery);
    },

    async listDeliverySummaries(filter = {}) {
      return (await rows<DeliveryRow>('listDeliverySummaries', { state: filter.state, limit: filter.limit ?? Number.MAX_SAFE_INTEGER })).map(toSummary);
    },

    async getDeliverySummary(id) {
      const row = await first<DeliveryRow>('getDeliverySummary', { id });
      return row === undefined ? undefined : toSummary(row);
    },

    makeDeliveryDue: async (id, now) => (await changes('makeDeliveryDue', { id, now })) > 0,

    dropDelivery: async (id) => (await changes('dropDelivery', { id })) > 0,

    outboxStats: async () => toOutboxStats((await first<OutboxStatsRow>('outboxStats'))!),

    async listPendingOperations(limit) {
      return (await rows<OperationRow>('listPending', { limit })).map(toOperation);
    },

    countPendingOperations: async () => Number((await first<{ n: string }>('countPending'))!.n),

    async ping() {
      await rows('ping');
    },

    async recordUsage(entries) {
      if (entries.length > 0) await changes('recordUsage', { entries: usageJson(entries) });
    },

    sumUsage: async (resourceId, from, to) => usageTotals(await rows<{ feature: string; total: unknown }>('sumUsage', { resourceId, from, to })),

    hasUsage: async (resourceId, from, to) => (await first('hasUsage', { resourceId, from, to })) !== undefined,

    pruneUsage: (before) => changes('pruneUsage', { before }),

    async close() {
      if (closed) return;
      closed = true;
      // Let a start-up in flight finish before the pool goes away under it.
      await starting?.catch(() => undefined);
      unwatchPool();
      if (connection.ownsPool) await pool.end();
    },

  };
  return store;
}
