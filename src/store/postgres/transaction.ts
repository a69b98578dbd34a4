import type { Pool, PoolClient } from 'pg';
import type { Logger } from '../../lib/logger.js';
import { isConnectionError, mapError } from './connection.js';

/**
 * Runs `work` in a transaction on one pooled connection; a broken connection is discarded, not
 * reused. A transient failure rejects with ServiceUnavailableError (see `mapError`). `label` names
 * the caller in the log line of a connection lost mid-transaction.
 */
export async function inTransaction<T>(pool: Pool, logger: Logger, label: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
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
    logger.warn({ err: { message: error.message, code: (error as { code?: unknown }).code } }, `${label}: connection lost during a transaction`);
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
