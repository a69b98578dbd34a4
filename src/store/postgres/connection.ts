/**
 * The connection side of every PostgreSQL store (the provider store and the platform stores): the
 * connection options, opening (or adopting) a `pg` pool, and telling an error that means "try again
 * later" from one that means "this statement is wrong".
 */
import { createRequire } from 'node:module';
import type { Pool, PoolConfig } from 'pg';
import { InvalidOptionsError, MarketplaceError, ServiceUnavailableError } from '../../errors.js';
import { createLogger, type Logger } from '../../lib/logger.js';
import { optionalLogger } from '../../lib/options.js';

const DEFAULT_SCHEMA = 'embedded_marketplace';
const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

/** Connection settings shared by `postgresStore`, `migratePostgres` and the platform stores. */
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

// Node socket errors and pg's own messages for a connection that is gone or never came.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN']);
const CONNECTION_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable|Cannot use a pool after calling end|Connection closed|connection timeout/i;

/** Whether the connection itself failed or is gone (so it must not go back to the pool). */
export function isConnectionError(error: unknown): boolean {
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
 *
 * @example
 * ```ts
 * import { isTransientPostgresError } from 'embedded-marketplace/stores/postgres';
 * try {
 *   await pool.query('SELECT 1');
 * } catch (error) {
 *   if (isTransientPostgresError(error)) scheduleRetry();
 *   else throw error;
 * }
 * ```
 */
export function isTransientPostgresError(error: unknown): boolean {
  if (isConnectionError(error)) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (/^(53|58)/.test(code) || ['40001', '40P01', '57014', '25006', '55P03'].includes(code));
}

/** A transient failure becomes ServiceUnavailableError (503, retried); anything else is left as it is. */
export function mapError(error: unknown): unknown {
  if (error instanceof MarketplaceError) return error;
  if (isTransientPostgresError(error)) return new ServiceUnavailableError(undefined, undefined, { cause: error });
  return error;
}

/** The `pg` Pool class, loaded only when a store makes its own pool (pg is an optional peer). */
export function loadPool(factory: string): typeof Pool {
  try {
    return (createRequire(import.meta.url)('pg') as { Pool: typeof Pool }).Pool;
  } catch (error) {
    throw new Error(`${factory} needs the optional peer dependency pg: run \`npm install pg\``, { cause: error });
  }
}

/** A pool (given or owned), the schema and the logger of one store. */
export interface Connection {
  pool: Pool;
  ownsPool: boolean;
  schema: string;
  logger: Logger;
}

/**
 * Checks the connection options (`pool` xor `connectionString`, `schema`, `logger`) and opens the
 * store's own pool when given a connection string. `poolSize` was checked by the caller.
 */
export function openConnection(factory: string, options: Record<string, unknown>, poolSize: number | undefined): Connection {
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
  const PoolClass = loadPool(factory);
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

/**
 * Listens for the 'error' a pool emits when an idle pooled connection dies (unhandled, that would
 * crash the process; the pool drops the connection and opens a new one on the next request).
 * Answers the function that stops listening.
 */
export function watchPool(connection: Connection, factory: string): () => void {
  const { pool, logger } = connection;
  const onPoolError = (error: Error): void => {
    logger.warn({ err: { message: error.message, code: (error as { code?: unknown }).code } }, `${factory}: idle connection lost; the pool reconnects on the next request`);
  };
  pool.on('error', onPoolError);
  return () => {
    pool.removeListener('error', onPoolError);
  };
}
