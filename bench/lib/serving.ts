import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { REPO_ROOT } from './child.js';

/**
 * What the servers under test (bench/server.ts, bench/scale.ts) share. They run the package as
 * users run it: the compiled `dist/` (npm run bench builds it first), never the TypeScript sources
 * through tsx, whose transform adds a helper call to every closure created per request and would
 * bill the library for the loader's work.
 */

/** A module of the compiled package: `dist/<module>`. */
export async function dist<T>(module: string): Promise<T> {
  const path = join(REPO_ROOT, 'dist', module);
  try {
    return (await import(path)) as T;
  } catch (error) {
    throw new Error(`bench: cannot load ${path}: run \`npm run build\` first (npm run bench does)`, { cause: error });
  }
}

/** Listens on a free port of the loopback address; answers the port. */
export async function listenLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Waits until `handled()` (a count of handled requests) has stood still for 100 ms, at most 5 s. */
export async function settle(handled: () => number): Promise<void> {
  const deadline = Date.now() + 5000;
  let seen = -1;
  while (seen !== handled() && Date.now() < deadline) {
    seen = handled();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Closes `server` and its connections, then lets the requests cut off when the load generator
 * stopped finish: they may still be in their handler or store commit, and the caller closes the
 * store next.
 */
export async function closeServer(server: Server, handled: () => number): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await settle(handled);
}

/** Drops a schema the run created in PostgreSQL (its own connection: the store's pool is closed by then). */
export async function dropSchema(connectionString: string, schema: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
