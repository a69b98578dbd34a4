/**
 * The platform side's stores in PostgreSQL (`embedded-marketplace/stores/postgres`): codes and tokens
 * of the deprecated OAuth flow, and the webhook receiver's seen deliveries, shared by every instance
 * of a platform. Every decision is one statement guarded by a primary key or a row lock, never a
 * read followed by a write.
 */
import type { Pool } from 'pg';
import { InvalidOptionsError, ServiceUnavailableError } from '../../errors.js';
import type { Logger } from '../../lib/logger.js';
import { asOptionsObject, integerOption, rejectUnknownKeys } from '../../lib/options.js';
import { PLATFORM_POSTGRES_MIGRATIONS } from '../migrations/platform-postgres.js';
import type { MigrationLedger } from '../migrations/apply-postgres.js';
import { latestVersion } from '../migrations/types.js';
import { mapError, openConnection, watchPool, type Connection, type PostgresConnectionOptions } from '../postgres/connection.js';
import { applyMigrations, schemaVersion, type MigrationReport } from '../postgres/migrations.js';
import type { CodeLimits, OAuthRecord, OAuthRecordKind, OAuthStore, RedeemResult, SeenEventClaim, SeenEventStore } from './types.js';

// Advisory lock key of the platform migrations: "EP" and hashtext(schema), apart from the provider store's.
const PLATFORM_LEDGER: MigrationLedger = { table: 'platform_schema_migrations', lockNamespace: 0x4550, label: 'platform stores' };
const CONNECTION_KEYS = ['pool', 'connectionString', 'schema', 'logger'] as const;

/** Options of {@link postgresOAuthStore} and {@link postgresSeenEventStore}: the connection options of `postgresStore`. */
export interface PlatformPostgresOptions extends PostgresConnectionOptions {
  /** Apply pending migrations on start. Default true; `false` only checks the schema is up to date. */
  migrate?: boolean;
  /** Connections in the store's own pool (with `connectionString` only). Default 10. */
  poolSize?: number;
  /** Expired rows are deleted at most this often, after a write (default 60 000 ms). */
  sweepIntervalMs?: number;
}

/** What both platform PostgreSQL stores have besides their contract. */
export interface PlatformPostgresStore {
  readonly kind: 'postgres';
  readonly schema: string;
  /** The pool in use (the given one, or the store's own). */
  readonly pool: Pool;
  /** Resolves once migrations ran (or the schema was checked); rejects with the reason otherwise. Retried on the next call. */
  ready(): Promise<void>;
  /** Ends the store's own pool (a given pool is left to its owner). */
  close(): Promise<void>;
}

/** An {@link OAuthStore} in PostgreSQL: see {@link postgresOAuthStore}. */
export interface PostgresOAuthStore extends OAuthStore, PlatformPostgresStore {}

/** A {@link SeenEventStore} in PostgreSQL: see {@link postgresSeenEventStore}. */
export interface PostgresSeenEventStore extends SeenEventStore, PlatformPostgresStore {
  /** Deletes deliveries whose window (or claim) ended before `now`; answers how many. */
  sweep(now: number): Promise<number>;
}

interface Database {
  connection: Connection;
  pool: Pool;
  schema: string;
  logger: Logger;
  t(table: string): string;
  query<R extends object>(sql: string, values: unknown[]): Promise<R[]>;
  /** Runs `work` once migrations are in place. */
  ready(): Promise<void>;
  close(): Promise<void>;
  /** Calls `sweep` at most once per interval, without holding up the caller. */
  maybeSweep(now: number, sweep: () => Promise<unknown>): void;
}

function openDatabase(factory: string, options: unknown, extraKeys: readonly string[]): Database {
  const opts = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, opts, [...CONNECTION_KEYS, ...extraKeys]);
  const migrate = opts.migrate ?? true;
  if (typeof migrate !== 'boolean') throw new InvalidOptionsError(`${factory}: option "migrate" must be a boolean`);
  const sweepIntervalMs = integerOption(factory, 'sweepIntervalMs', opts.sweepIntervalMs, 60_000, 0);
  const poolSize = opts.poolSize === undefined ? undefined : integerOption(factory, 'poolSize', opts.poolSize, 10, 1);
  const connection = openConnection(factory, opts, poolSize);
  const { pool, schema, logger } = connection;
  const unwatchPool = watchPool(connection, factory);
  const t = (table: string): string => `"${schema}".${table}`;

  let started: Promise<void> | undefined;
  const ready = (): Promise<void> => {
    started ??= (migrate ? applyMigrations(connection, PLATFORM_LEDGER, PLATFORM_POSTGRES_MIGRATIONS).then(() => undefined) : checkVersion(pool, schema, factory)).catch((error: unknown) => {
      started = undefined;
      throw mapError(error);
    });
    return started;
  };
  let lastSweep = 0;
  let closed = false;
  return {
    connection,
    pool,
    schema,
    logger,
    t,
    ready,
    async query<R extends object>(sql: string, values: unknown[]): Promise<R[]> {
      await ready();
      try {
        return (await pool.query<R & Record<string, unknown>>(sql, values)).rows;
      } catch (error) {
        throw mapError(error);
      }
    },
    maybeSweep(now: number, sweep: () => Promise<unknown>): void {
      if (now - lastSweep < sweepIntervalMs) return;
      lastSweep = now;
      sweep().catch((error: unknown) => logger.warn({ err: error }, `${factory}: sweeping expired rows failed; retried later`));
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      unwatchPool();
      if (connection.ownsPool) await pool.end();
    },
  };
}

async function checkVersion(pool: Pool, schema: string, factory: string): Promise<void> {
  const version = await schemaVersion(pool, schema, PLATFORM_LEDGER);
  const latest = latestVersion(PLATFORM_POSTGRES_MIGRATIONS);
  if (version < latest) {
    throw new Error(`${factory}: schema "${schema}" has platform tables at version ${version}, this release needs ${latest}: run \`embedded-marketplace migrate --schema ${schema}\` or set migrate: true`);
  }
}

/**
 * Applies the platform stores' pending migrations (the `migrate` command runs it after the provider
 * store's). Safe to run from several processes at once and to repeat.
 *
 * @example
 * ```ts
 * import { migratePlatformPostgres } from 'embedded-marketplace/stores/postgres';
 * const report = await migratePlatformPostgres({ connectionString: process.env.DATABASE_URL! });
 * console.log(`platform tables of ${report.schema} at version ${report.version}`);
 * ```
 */
export async function migratePlatformPostgres(options: PostgresConnectionOptions): Promise<MigrationReport> {
  const db = openDatabase('migratePlatformPostgres', options, []);
  try {
    return await applyMigrations(db.connection, PLATFORM_LEDGER, PLATFORM_POSTGRES_MIGRATIONS);
  } finally {
    await db.close();
  }
}

const STORE_KEYS = ['migrate', 'poolSize', 'sweepIntervalMs'] as const;

function storeBase(db: Database): PlatformPostgresStore {
  return { kind: 'postgres', schema: db.schema, pool: db.pool, ready: db.ready, close: db.close };
}

interface RecordRow {
  record: OAuthRecord;
}

/**
 * The deprecated OAuth flow's codes and tokens in PostgreSQL, shared by every platform instance: a
 * code issued by one instance is redeemed at another, a replay at either revokes the whole grant
 * (tokens still being saved elsewhere included: a revoked-grant row is consulted at save and at
 * every use), and nothing is lost on a restart. Only SHA-256 digests of codes and tokens are stored.
 * Redemption is one `UPDATE … WHERE used_at IS NULL`: exactly one caller wins across instances.
 * Outstanding-code limits are checked in the inserting statement; under concurrent authorizations of
 * one user they may be exceeded by the number of requests in flight.
 *
 * @example
 * ```ts
 * import { postgresOAuthStore } from 'embedded-marketplace/stores/postgres';
 * const store = postgresOAuthStore({ connectionString: process.env.DATABASE_URL! });
 * await store.ready();
 * app.use(deprecatedOAuthRouter({ clients, getUser, getUserById, store }));
 * ```
 */
export function postgresOAuthStore(options: PlatformPostgresOptions): PostgresOAuthStore {
  const db = openDatabase('postgresOAuthStore', options, STORE_KEYS);
  const records = db.t('oauth_records');
  const revoked = db.t('oauth_revoked_grants');
  const isRevoked = (grant: string, now: string) => `EXISTS (SELECT 1 FROM ${revoked} g WHERE g.grant_id = ${grant} AND g.until > ${now})`;
  const sweep = async (now: number): Promise<number> => {
    const rows = await db.query<{ n: string }>(
      `WITH a AS (DELETE FROM ${records} WHERE expires_at <= $1 RETURNING 1), b AS (DELETE FROM ${revoked} WHERE until <= $1 RETURNING 1)
       SELECT ((SELECT count(*) FROM a) + (SELECT count(*) FROM b))::text AS n`,
      [now],
    );
    return Number(rows[0]?.n ?? 0);
  };
  const revokeValues = `INSERT INTO ${revoked} (grant_id, until)`;
  const revokeConflict = `ON CONFLICT (grant_id) DO UPDATE SET until = GREATEST(${revoked}.until, EXCLUDED.until)`;

  return {
    ...storeBase(db),

    async saveCode(hash: string, record: OAuthRecord, limits: CodeLimits, now: number) {
      const rows = await db.query<{ inserted: string; mine: string; total: string }>(
        `WITH counts AS (
           SELECT count(*) FILTER (WHERE sub = $3) AS mine, count(*) AS total
           FROM ${records} WHERE kind = 'code' AND used_at IS NULL AND expires_at > $6
         ), ins AS (
           INSERT INTO ${records} (kind, hash, grant_id, client_id, sub, expires_at, record)
           SELECT 'code', $1, $2, $4, $3, $5, $7 FROM counts WHERE mine < $8 AND total < $9
           ON CONFLICT DO NOTHING RETURNING 1
         )
         SELECT (SELECT count(*) FROM ins)::text AS inserted, mine::text AS mine, total::text AS total FROM counts`,
        [hash, record.grantId, record.user.sub, record.clientId, record.expiresAt, now, JSON.stringify(record), limits.perUser, limits.total],
      );
      db.maybeSweep(now, () => sweep(now));
      const row = rows[0];
      if (row !== undefined && row.inserted === '1') return 'saved';
      return Number(row?.mine ?? 0) >= limits.perUser ? 'user-limit' : 'total-limit';
    },

    async saveToken(kind: 'access' | 'refresh', hash: string, record: OAuthRecord, now: number) {
      const rows = await db.query<{ revoked: boolean }>(
        `WITH state AS (SELECT ${isRevoked('$3', '$8')} AS revoked),
         ins AS (
           INSERT INTO ${records} (kind, hash, grant_id, client_id, sub, expires_at, record)
           SELECT $1, $2, $3, $4, $5, $6, $7 FROM state WHERE NOT state.revoked
           ON CONFLICT DO NOTHING RETURNING 1
         )
         SELECT revoked FROM state`,
        [kind, hash, record.grantId, record.clientId, record.user.sub, record.expiresAt, JSON.stringify(record), now],
      );
      db.maybeSweep(now, () => sweep(now));
      return rows[0]?.revoked === true ? 'revoked' : 'saved';
    },

    async find(kind: OAuthRecordKind, hash: string, now: number) {
      const rows = await db.query<RecordRow>(
        `SELECT o.record FROM ${records} o
         WHERE o.kind = $1 AND o.hash = $2 AND o.used_at IS NULL AND o.expires_at > $3 AND NOT ${isRevoked('o.grant_id', '$3')}`,
        [kind, hash, now],
      );
      return rows[0]?.record;
    },

    async redeem(kind: 'code' | 'refresh', hash: string, by: { clientId: string; now: number }): Promise<RedeemResult> {
      // The one statement that decides: concurrent callers queue on the row lock and re-check used_at.
      const won = await db.query<RecordRow>(
        `UPDATE ${records} o SET used_at = $4
         WHERE o.kind = $1 AND o.hash = $2 AND o.used_at IS NULL AND o.client_id = $3 AND o.expires_at > $4 AND NOT ${isRevoked('o.grant_id', '$4')}
         RETURNING o.record`,
        [kind, hash, by.clientId, by.now],
      );
      if (won[0] !== undefined) return { outcome: 'redeemed', record: won[0].record };
      // Lost: a fresh statement (a fresh snapshot) says why.
      const rows = await db.query<RecordRow & { client_id: string; used_at: string | null; revoked: boolean }>(
        `SELECT o.record, o.client_id, o.used_at::text AS used_at, ${isRevoked('o.grant_id', '$3')} AS revoked FROM ${records} o WHERE o.kind = $1 AND o.hash = $2`,
        [kind, hash, by.now],
      );
      const row = rows[0];
      if (row === undefined || row.revoked) return { outcome: 'invalid' };
      if (row.client_id !== by.clientId) return { outcome: 'wrong-client' };
      if (row.used_at !== null) return { outcome: 'replayed', record: row.record, usedAt: Number(row.used_at) };
      return { outcome: 'invalid' };
    },

    async revokeGrant(grantId: string, until: number) {
      await db.query(
        `WITH rev AS (${revokeValues} VALUES ($1, $2) ${revokeConflict} RETURNING 1)
         DELETE FROM ${records} WHERE grant_id = $1`,
        [grantId, until],
      );
    },

    async revokeSubject(sub: string, until: number) {
      const rows = await db.query<{ n: string }>(
        `WITH grants AS (SELECT DISTINCT grant_id FROM ${records} WHERE sub = $1),
         rev AS (${revokeValues} SELECT grant_id, $2 FROM grants ${revokeConflict} RETURNING 1),
         del AS (DELETE FROM ${records} WHERE grant_id IN (SELECT grant_id FROM grants) RETURNING 1)
         SELECT (SELECT count(*) FROM rev)::text AS n`,
        [sub, until],
      );
      return Number(rows[0]?.n ?? 0);
    },

    sweep,
  };
}

/**
 * The webhook receiver's seen deliveries in PostgreSQL, shared by every platform instance: of any
 * number of copies of one delivery arriving at once, at any instances, one claims it and runs the
 * handler; the others answer busy (503, retried) or, once it completed, duplicate.
 *
 * @example
 * ```ts
 * import { postgresSeenEventStore } from 'embedded-marketplace/stores/postgres';
 * const seenStore = postgresSeenEventStore({ connectionString: process.env.DATABASE_URL! });
 * app.post('/v1/events', marketplaceEvents({ verify, handlers, seenStore }));
 * ```
 */
export function postgresSeenEventStore(options: PlatformPostgresOptions): PostgresSeenEventStore {
  const db = openDatabase('postgresSeenEventStore', options, STORE_KEYS);
  const seen = db.t('seen_events');
  const sweep = async (now: number): Promise<number> => {
    const rows = await db.query<{ n: string }>(`WITH d AS (DELETE FROM ${seen} WHERE until <= $1 RETURNING 1) SELECT count(*)::text AS n FROM d`, [now]);
    return Number(rows[0]?.n ?? 0);
  };

  return {
    ...storeBase(db),
    sweep,

    async claim(key: string, claim: { owner: string; now: number; leaseExpiresAt: number }): Promise<SeenEventClaim> {
      db.maybeSweep(claim.now, () => sweep(claim.now));
      // A row that vanished between the two statements (released, swept) is claimed on the next round.
      for (let attempt = 0; attempt < 3; attempt += 1) {
        const won = await db.query(
          `INSERT INTO ${seen} AS s (key, state, owner, until) VALUES ($1, 'claimed', $2, $4)
           ON CONFLICT (key) DO UPDATE SET state = 'claimed', owner = EXCLUDED.owner, until = EXCLUDED.until
           WHERE s.until <= $3 OR (s.state = 'claimed' AND s.owner = EXCLUDED.owner)
           RETURNING 1`,
          [key, claim.owner, claim.now, claim.leaseExpiresAt],
        );
        if (won.length > 0) return { outcome: 'claimed' };
        const rows = await db.query<{ state: 'claimed' | 'done'; until: string }>(`SELECT state, until::text AS until FROM ${seen} WHERE key = $1`, [key]);
        const row = rows[0];
        if (row === undefined) continue;
        return row.state === 'done' ? { outcome: 'done' } : { outcome: 'busy', leaseExpiresAt: Number(row.until) };
      }
      throw new ServiceUnavailableError('The delivery could not be claimed; retry later');
    },

    async complete(key: string, owner: string, expiresAt: number): Promise<void> {
      await db.query(
        `INSERT INTO ${seen} AS s (key, state, owner, until) VALUES ($1, 'done', $2, $3)
         ON CONFLICT (key) DO UPDATE SET state = 'done', owner = EXCLUDED.owner, until = EXCLUDED.until
         WHERE s.owner = EXCLUDED.owner OR s.state = 'done'`,
        [key, owner, expiresAt],
      );
    },

    async release(key: string, owner: string): Promise<void> {
      await db.query(`DELETE FROM ${seen} WHERE key = $1 AND owner = $2 AND state = 'claimed'`, [key, owner]);
    },
  };
}
