#!/usr/bin/env node
/**
 * The `embedded-marketplace` bin: keygen, test, serve and curl for providers testing without the
 * marketplace. The commands live in ./cli/; this file only wires them to the process.
 */
import { main } from './cli/main.js';

const stop = new AbortController();
const serving = process.argv[2] === 'serve';
// serve shuts down cleanly on Ctrl-C; every other command just stops, like any CLI.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (serving) stop.abort();
    else process.exit(130);
  });
}

const io = {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  // A getter: process.stdin is only opened by a command that asks something.
  get stdin() {
    return process.stdin;
  },
};

main(process.argv.slice(2), io, stop.signal).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error('embedded-marketplace: unexpected error:', err instanceof Error ? err.stack ?? err.message : err);
    process.exitCode = 1;
  },
);
