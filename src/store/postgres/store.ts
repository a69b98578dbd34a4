import { createHash } from 'node:crypto';
import type { Pool, QueryResultRow } from 'pg';
import { InvalidOptionsError, LeaseLostError, NotFoundError, ServiceUnavailableError } from '../../errors.js';
import { asOptionsObject, integerOption, rejectUnknownKeys } from '../../lib/options.js';
import { entityDeletedError } from '../common.js';
import { storeCipher, type EncryptionKeyOption, type SecretCipher } from '../crypto.js';
import {
  byDue,
  claimValues,
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
} from '../durable.js';
import { bind } from '../sql/dialect.js';
import { statements as compileStatements, type StatementName } from '../sql/statements.js';
import { POSTGRES_MIGRATIONS } from '../migrations/postgres.js';
import { latestVersion } from '../migrations/types.js';
import type { ClaimInput, ClaimResult, CommitInput, DiagnosableStore, ReplayRecord } from '../types.js';
import { batched } from './batch.js';
import { mapError, openConnection, watchPool, type PostgresConnectionOptions } from './connection.js';
import { applyMigrations, schemaVersion, STORE_LEDGER } from './migrations.js';

/** What the claim_operation function of migration 3 answers (rows as JSON). */
type ClaimRow =
  | { outcome: 'replayed'; replay: ReplayRow }
  | { outcome: 'busy' | 'blocked'; operation: OperationRow }
  | {
      outcome: 'claimed';
      operation: OperationRow;
      resource: ResourceRow | null;
      resource_deleted: boolean;
      credential: CredentialRow | null;
      credential_deleted: boolean;
      credentials: CredentialRow[];
    }
  | { outcome: 'unavailable' };

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
 * - A claim and a commit are one statement each (functions of migration 3); a credential claim and
 *   its resource's deprovision claim serialize on an advisory lock of the resource id.
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
  const { toResource, toCredential, toOperation, toDelivery, toSummary, toAnswer } = recordMappers(cipher);

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

  /** The replay record as the commit function takes it: JSON (with the body when it holds no secret) and the sealed body. */
  const replayParams = (replay: ReplayRecord | undefined): [string | null, Buffer | null] => {
    if (replay === undefined) return [null, null];
    const { body, sealed } = replayBody(cipher, replay.requestId, replay.answer.body);
    // The body is already JSON text: spliced in as is rather than parsed and serialized again.
    const record = JSON.stringify({ requestId: replay.requestId, status: replay.answer.status, expiresAt: replay.expiresAt });
    return [body === null ? record : `${record.slice(0, -1)},"body":${body}}`, sealed];
  };

  // The two statements of every request are prepared once per connection (named), so the server
  // parses and plans them once; the name carries the schema, as two stores may share a pool.
  const statementPrefix = `em_${createHash('sha256').update(schema).digest('hex').slice(0, 12)}_`;
  // One statement: the function of migration 3 applies every rule of ClaimResult in one transaction.
  const claimSql = `SELECT ${t('claim_operation')}($1, $2, $3, $4, $5, $6, $7, $8::json, $9, $10, $11) AS result`;
  const claimBatchSql = `SELECT ${t('claim_operations')}($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::json[], $9::bigint[], $10::text[], $11::text[]) AS result`;
  const claimCall = batched<ClaimRow>({
    single: async (params) => (await query<{ result: ClaimRow }>({ name: `${statementPrefix}claim`, text: claimSql }, params))[0]!.result,
    batch: async (columns) => (await query<{ result: ClaimRow[] }>({ name: `${statementPrefix}claims`, text: claimBatchSql }, columns))[0]!.result,
  });
  async function claimOperation(input: ClaimInput): Promise<ClaimResult> {
    const values = claimValues(input, input.key.startsWith('credential:') ? input.parentId : undefined);
    const result = await claimCall([
      values.key, values.kind, values.targetId, values.fingerprint, values.token, values.owner,
      values.leaseExpiresAt, values.request, values.now, values.parentId ?? null, input.requestId ?? null,
    ]);
    switch (result.outcome) {
      case 'replayed':
        return { outcome: 'replayed', answer: toAnswer(result.replay) };
      case 'busy':
      case 'blocked':
        return { outcome: result.outcome, operation: toOperation(result.operation) };
      case 'claimed':
        return {
          outcome: 'claimed',
          operation: toOperation(result.operation),
          snapshot: {
            resource: result.resource === null ? undefined : toResource(result.resource),
            resourceDeleted: result.resource_deleted === true,
            credential: result.credential === null ? undefined : toCredential(result.credential),
            credentialDeleted: result.credential_deleted === true,
            credentials: result.credentials.map(toCredential),
          },
        };
      default:
        // The key changed hands eight times during one claim: a holder that lives that briefly is rare.
        throw new ServiceUnavailableError('The operation is changing hands too fast, retry later');
    }
  }

  const commitSql = `SELECT ${t('commit_operation')}($1, $2, $3::json, $4::json, $5, $6::json, $7, $8::json, $9, $10) AS result`;
  const commitBatchSql = `SELECT ${t('commit_operations')}($1::text[], $2::text[], $3::json[], $4::json[], $5::bytea[], $6::json[], $7::bytea[], $8::json[], $9::bytea[], $10::text[]) AS result`;
  const commitCall = batched<string>({
    single: async (params) => (await query<{ result: string }>({ name: `${statementPrefix}commit`, text: commitSql }, params))[0]!.result,
    batch: async (columns) => (await query<{ result: string[] }>({ name: `${statementPrefix}commits`, text: commitBatchSql }, columns))[0]!.result,
  });
  async function commitOperation(key: string, token: string, commit: CommitInput): Promise<void> {
    const { mutation, delivery } = commit;
    let mutationJson: Record<string, unknown>;
    let features: string | null = null;
    let sealed: Buffer | null = null;
    switch (mutation.type) {
      case 'putResource': {
        const { features: values, ...resource } = mutation.resource;
        mutationJson = { type: mutation.type, ...resource };
        features = JSON.stringify(values);
        break;
      }
      case 'putCredential': {
        const { values, ...credential } = mutation.credential;
        mutationJson = { type: mutation.type, ...credential };
        sealed = cipher.seal(values, `credential:${credential.id}`);
        break;
      }
      default:
        mutationJson = { ...mutation };
    }
    const [replayJson, replaySealed] = replayParams(commit.replay);
    const result = await commitCall([
      key,
      token,
      JSON.stringify(mutationJson),
      features,
      sealed,
      delivery === undefined ? null : JSON.stringify({ id: delivery.id, callbackId: delivery.callbackId, url: delivery.url, createdAt: delivery.createdAt, deadlineAt: delivery.deadlineAt }),
      delivery === undefined ? null : cipher.seal(delivery.payload, `delivery:${delivery.id}`),
      replayJson,
      replaySealed,
      commit.orphanMessage ?? null,
    ]);
    switch (result) {
      case 'ok':
        return;
      case 'lease_lost':
        throw new LeaseLostError();
      case 'not_found':
        throw new NotFoundError('Resource not found');
      case 'resource_deleted':
        throw entityDeletedError('resource');
      default:
        throw entityDeletedError('credential');
    }
  }

  // One statement, so the 202 and its recorded answer are written together or not at all.
  const markPendingSql = `
    WITH marked AS (${sql.markPending.text}),
    recorded AS (
      INSERT INTO ${t('replays')} (request_id, status, sealed_body, body, expires_at)
      SELECT ($7::json)->>'requestId', (($7::json)->>'status')::integer, $8::bytea, ($7::json)->'body', (($7::json)->>'expiresAt')::bigint
      FROM marked WHERE $7::json IS NOT NULL
      ON CONFLICT (request_id) DO NOTHING)
    SELECT * FROM marked`;

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

    claimOperation,

    async renewOperation(key, token, leaseExpiresAt) {
      return (await changes('renew', { key, token, leaseExpiresAt })) > 0;
    },

    async releaseOperation(key, token) {
      await changes('release', { key, token });
    },

    async markOperationPending(key, token, pending) {
      const [replayJson, replaySealed] = replayParams(pending.replay);
      const [row] = await query<OperationRow>(markPendingSql, [...bind(sql.markPending, { ...pending, key, token }), replayJson, replaySealed]);
      if (row === undefined) throw new LeaseLostError();
      return toOperation(row);
    },

    commitOperation,

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
