import { createRequire } from 'node:module';
import { curlCommand, CURL_USAGE } from './curl.js';
import { EXIT, UsageError, type CliIo } from './io.js';
import { keygenCommand, KEYGEN_USAGE } from './keygen.js';
import { migrateCommand, MIGRATE_USAGE } from './migrate.js';
import { operationsCommand, OPERATIONS_USAGE } from './operations.js';
import { outboxCommand, OUTBOX_USAGE } from './outbox.js';
import { serveCommand, SERVE_USAGE } from './serve.js';
import { testCommand, TEST_USAGE } from './test.js';

export const USAGE = `Usage: embedded-marketplace <command> [options]

Test a marketplace provider before going live, run the PostgreSQL store's migrations, and look
at a running provider's callback outbox and pending operations.

Commands:
  keygen      write a test master key pair to ./masterkey.json
  test        run the acceptance suite against a provider URL
  serve       a small marketplace page to click through provisioning and single sign-on
  curl        print a curl command with fresh signature headers
  migrate     apply the PostgreSQL store's migrations
  outbox      list, show, retry or drop callback deliveries of a store
  operations  list the long-running (202) operations waiting for completion

Run "embedded-marketplace <command> --help" for a command's options.
`;

const HELP: Record<string, string> = { keygen: KEYGEN_USAGE, test: TEST_USAGE, serve: SERVE_USAGE, curl: CURL_USAGE, migrate: MIGRATE_USAGE, outbox: OUTBOX_USAGE, operations: OPERATIONS_USAGE };

function version(): string {
  const require = createRequire(import.meta.url);
  for (const path of ['../../../package.json', '../../package.json']) {
    try {
      return (require(path) as { version: string }).version;
    } catch {
      // Source and compiled layouts sit at different depths.
    }
  }
  return 'unknown';
}

/**
 * The bin's entry: runs one command and resolves with the exit status (0 passed, 1 failed, 2 usage).
 * `signal` ends a running `serve`.
 */
export async function main(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case 'keygen':
        return keygenCommand(args, io);
      case 'test':
        return await testCommand(args, io);
      case 'serve':
        return await serveCommand(args, io, signal);
      case 'curl':
        return curlCommand(args, io);
      case 'migrate':
        return await migrateCommand(args, io);
      case 'outbox':
        return await outboxCommand(args, io);
      case 'operations':
        return await operationsCommand(args, io);
      case 'help':
      case '--help':
      case '-h':
      case undefined:
        io.stdout.write(args[0] !== undefined && HELP[args[0]] !== undefined ? HELP[args[0]] ?? USAGE : USAGE);
        return command === undefined ? EXIT.usage : EXIT.ok;
      case 'version':
      case '--version':
      case '-v':
        io.stdout.write(`${version()}\n`);
        return EXIT.ok;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`embedded-marketplace${command === undefined ? '' : ` ${command}`}: ${err.message}\n`);
      io.stderr.write(`Run "embedded-marketplace ${command !== undefined && HELP[command] !== undefined ? `${command} --help` : 'help'}" for usage.\n`);
      return EXIT.usage;
    }
    throw err;
  }
}
