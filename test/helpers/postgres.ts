import pg from 'pg';

export const DATABASE_URL = process.env.DATABASE_URL;

/** `false` when the server answers; otherwise why the PostgreSQL tests are skipped. */
export async function postgresSkipReason(): Promise<string | false> {
  if (DATABASE_URL === undefined || DATABASE_URL === '') {
    return 'DATABASE_URL not set: these tests need PostgreSQL (e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/test; CI sets it)';
  }
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return false;
  } catch (error) {
    // The URL may carry a password: name only the error.
    return `PostgreSQL at DATABASE_URL is unreachable (${(error as Error).message}): start it or unset DATABASE_URL`;
  } finally {
    await client.end().catch(() => undefined);
  }
}
