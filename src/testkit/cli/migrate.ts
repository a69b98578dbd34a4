import { EXIT, parse, UsageError, type CliIo } from './io.js';

export const MIGRATE_USAGE = `Usage: embedded-marketplace migrate [--database-url URL] [--schema NAME]

Applies the PostgreSQL store's migrations (the same ones postgresStore applies on start unless
migrate: false), then the platform stores' (postgresOAuthStore, postgresSeenEventStore), for
deployments that migrate as a separate step before starting instances.
Safe to run concurrently and repeatedly: an advisory lock serializes runs, applied versions are skipped.

  --database-url URL  connection string (default $DATABASE_URL)
  --schema NAME       schema of the store's tables (default embedded_marketplace)
`;

/** `migrate`: brings a PostgreSQL store's schema up to date. Needs the optional `pg` driver. */
export async function migrateCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, {
    'database-url': { type: 'string' },
    schema: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) {
    io.stdout.write(MIGRATE_USAGE);
    return EXIT.ok;
  }
  if (positionals.length > 0) throw new UsageError(`migrate takes no arguments, got ${JSON.stringify(positionals[0])}`);
  const connectionString = values['database-url'] ?? io.env.DATABASE_URL;
  if (connectionString === undefined || connectionString === '') throw new UsageError('give --database-url or set DATABASE_URL');
  // Loaded here so the other commands never need the pg driver.
  const { migratePlatformPostgres, migratePostgres } = await import('../../store/postgres/index.js');
  try {
    const report = await migratePostgres({ connectionString, ...(values.schema === undefined ? {} : { schema: values.schema }) });
    const applied = report.applied.length === 0 ? 'already up to date' : `applied ${report.applied.join(', ')}`;
    io.stdout.write(`Schema ${report.schema} at version ${report.version}: ${applied}.\n`);
    const platform = await migratePlatformPostgres({ connectionString, ...(values.schema === undefined ? {} : { schema: values.schema }) });
    const platformApplied = platform.applied.length === 0 ? 'already up to date' : `applied ${platform.applied.join(', ')}`;
    io.stdout.write(`Schema ${platform.schema}, platform stores at version ${platform.version}: ${platformApplied}.\n`);
    return EXIT.ok;
  } catch (err) {
    // The store answers a generic 503 message; the operator needs the driver's cause too. The
    // driver's messages name the host and database, never the password of the URL.
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : '';
    io.stderr.write(`embedded-marketplace migrate: ${err instanceof Error ? err.message : String(err)}${cause}\n`);
    return EXIT.failed;
  }
}
