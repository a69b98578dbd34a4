import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as Crypto from '../../src/store/crypto.js';
import type * as Memory from '../../src/store/memory.js';
import type * as Sqlite from '../../src/store/sqlite.js';
import type * as Postgres from '../../src/store/postgres/index.js';
import type { Store } from '../../src/store/types.js';
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

/**
 * A Fastify app as a node:http listener (the one Fastify hands its server factory), once `setup`
 * registered its routes and the app is ready; `close` closes the app (and its `onClose` hooks).
 */
export async function fastifyListener(setup: (app: FastifyInstance) => unknown): Promise<{ listener: RequestListener; close: () => Promise<void> }> {
  const { default: Fastify } = await import('fastify');
  let listener: RequestListener | undefined;
  const app = Fastify({ serverFactory: (handler) => createServer((listener = handler)) });
  await setup(app);
  await app.ready();
  return { listener: listener!, close: () => app.close() };
}

/** A `Request → Response` function as a node:http listener, through @hono/node-server's bridge. */
export async function fetchListener(handler: (request: Request) => Promise<Response>): Promise<RequestListener> {
  const { getRequestListener } = await import('@hono/node-server');
  const bridge = getRequestListener(handler);
  return (req, res) => void bridge(req, res);
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

/** A store a benchmark runs on, and what removes it afterwards (its temporary file, its schema). */
export interface BenchStore {
  store: Store;
  cleanup(): Promise<void>;
}

/**
 * A fresh store of the compiled package: `memoryStore()`, `sqliteStore` on a file in a temporary
 * folder, or `postgresStore` in a schema of its own (`<prefix>_<pid>_<time>`, dropped by `cleanup`).
 * The SQL drivers are loaded only when asked for: they are optional.
 */
export async function openBenchStore(kind: 'memory' | 'sqlite' | 'postgres', options: { prefix: string; databaseUrl?: string | undefined }): Promise<BenchStore> {
  if (kind === 'memory') return { store: (await dist<typeof Memory>('store/memory.js')).memoryStore(), cleanup: async () => undefined };
  const { generateEncryptionKey } = await dist<typeof Crypto>('store/crypto.js');
  if (kind === 'sqlite') {
    const { sqliteStore } = await dist<typeof Sqlite>('store/sqlite.js');
    const folder = mkdtempSync(join(tmpdir(), `${options.prefix}-`));
    const store = sqliteStore({ path: join(folder, 'provider.db'), encryptionKey: generateEncryptionKey() });
    return { store, cleanup: async () => rmSync(folder, { recursive: true, force: true }) };
  }
  const url = options.databaseUrl;
  if (url === undefined) throw new Error('bench: postgresStore needs DATABASE_URL');
  const { postgresStore } = await dist<typeof Postgres>('store/postgres/index.js');
  const schema = `${options.prefix.replace(/-/g, '_')}_${process.pid}_${Date.now().toString(36)}`;
  const store = postgresStore({ connectionString: url, encryptionKey: generateEncryptionKey(), schema });
  try {
    await store.ready();
  } catch (error) {
    await store.close();
    await dropSchema(url, schema);
    throw error;
  }
  return { store, cleanup: () => dropSchema(url, schema) };
}
