/**
 * Shared by test/faults and test/deploy: a marketplace stand-in that signs requests for a process
 * it did not start in-process, PostgreSQL schemas per test, a TCP relay to cut a database
 * connection without touching the server, and the figures every test prints.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { readAnswer } from '../helpers/http.js';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';
import type { ListingStore } from '../../src/store/types.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { generateEncryptionKey } from '../../src/store/crypto.js';

/** Where a signed request goes: `url` to connect to, `host` to sign. */
export interface Target {
  url: string;
  host: string;
}

export interface Answer {
  status: number;
  body: unknown;
  text: string;
  contentType: string;
}

export interface SendOptions {
  /** Extra headers to sign and send (callback headers, content-type overrides). */
  headers?: Record<string, string>;
  /** A Date to sign instead of now (stale requests). */
  date?: string;
  /** Bytes sent instead of the signed ones (a tampered body). */
  sendBody?: string;
  /** Send no signature headers at all. */
  unsigned?: boolean;
}

/** The marketplace: a master key (give its public half to the provider) and a signed sender. */
export function marketplace() {
  const master = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey });
  return {
    masterPublicKey: master.publicKey,
    /**
     * Sends one request signed like the marketplace does. `body` is JSON-encoded unless a string.
     * Rejects on a network error (a killed process), like a real client.
     */
    async send(target: Target, method: string, path: string, body?: unknown, options: SendOptions = {}): Promise<Answer> {
      const bytes = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
      const base: Record<string, string> = { ...(options.headers ?? {}) };
      if (body !== undefined && base['content-type'] === undefined) base['content-type'] = 'application/json';
      if (options.date !== undefined) base.date = options.date;
      const headers = options.unsigned === true ? base : signer.sign({ method, url: path, host: target.host, headers: base, body: bytes });
      // fetch sets Host itself from the URL, which is the value signed.
      delete headers.host;
      const payload = options.sendBody ?? bytes;
      const response = await fetch(target.url + path, {
        method,
        headers,
        ...(payload.length > 0 ? { body: payload } : {}),
        signal: AbortSignal.timeout(60_000),
      });
      return { ...(await readAnswer(response)), contentType: response.headers.get('content-type') ?? '' };
    },
  };
}

export type Marketplace = ReturnType<typeof marketplace>;

/** A fresh id the interface accepts (`[a-z0-9-]`), unique per run. */
export function newId(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

/** A store encryption key to give the example and the test's own store handle. */
export const newEncryptionKey = (): string => generateEncryptionKey();

/** Whether `answer` is an error JSON `{message}` of 3..256 characters. */
export function isErrorJson(answer: Answer): boolean {
  const message = (answer.body as { message?: unknown } | undefined)?.message;
  return answer.contentType.startsWith('application/json') && typeof message === 'string' && message.length >= 3 && message.length <= 256;
}

/**
 * Prints a test's figures on one line, in the CI log: what went in, the faults injected, requests
 * sent, and the two numbers that must be zero (5xx seen and operations lost).
 */
export function figures(t: TestContext, name: string, values: Record<string, number | string>): void {
  t.diagnostic(`figures ${name}: ${Object.entries(values).map(([k, v]) => `${k}=${v}`).join(' ')}`);
}

// --- PostgreSQL --------------------------------------------------------------------------------

export { DATABASE_URL, postgresSkipReason };

/** A small admin pool for the test's own queries, and the schemas it created, dropped on `end()`. */
export function postgresAdmin() {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  pool.on('error', () => undefined);
  const schemas = new Set<string>();
  return {
    pool,
    /** A schema name no other test uses; the store creates it. */
    newSchema(prefix: string): string {
      const schema = `${prefix}_${randomBytes(5).toString('hex')}`;
      schemas.add(schema);
      return schema;
    },
    async query<R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<R[]> {
      return (await pool.query<R>(text, values)).rows;
    },
    async end(): Promise<void> {
      for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await pool.end();
    },
  };
}

/** DATABASE_URL with its host and port replaced (to go through a relay). */
export function databaseUrlVia(port: number): string {
  const url = new URL(DATABASE_URL);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}

/** A TCP relay to `target` on loopback whose connections the test can cut and restore. */
export interface Relay {
  port: number;
  /** Connections relayed so far. */
  readonly connections: number;
  /** Drops every relayed connection and refuses new ones (closed on accept) until `restore()`. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function tcpRelay(target: { host: string; port: number }): Promise<Relay> {
  const pairs = new Set<net.Socket>();
  let down = false;
  let connections = 0;
  const server = net.createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    connections++;
    const upstream = net.connect(target.port, target.host);
    pairs.add(client);
    pairs.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(client);
      pairs.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    get connections() {
      return connections;
    },
    cut() {
      down = true;
      for (const socket of pairs) socket.destroy();
      pairs.clear();
    },
    restore() {
      down = false;
    },
    close() {
      for (const socket of pairs) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// --- the store a test runs the example on --------------------------------------------------------

type Table = 'resources' | 'credentials' | 'operations' | 'deliveries';

/** The example's store as the test sees it: the env to start the example with, and direct reads. */
export interface StoreUnderTest {
  kind: 'sqlite' | 'postgres';
  /** STORE, STORE_ENCRYPTION_KEY and, for PostgreSQL, STORE_SCHEMA. */
  env: Record<string, string>;
  /** Rows of `table`, all or those whose `column` equals `value` (read with the store's own SQL, no decryption). */
  count(table: Table, where?: { column: string; value: string }): Promise<number>;
  /** The store opened in the test process with the same key (for SQLite: once the example stopped). */
  open(): Promise<ListingStore>;
  /** Removes the files or the schema. */
  cleanup(): Promise<void>;
}

/**
 * A fresh SQLite file in a temporary directory. `memoryBacked` puts it on /dev/shm when there is
 * one: the load test measures correctness under concurrency, not the disk's fsync latency (every
 * commit waits for one, and a CI disk can take several milliseconds each).
 */
export function sqliteUnderTest(options: { memoryBacked?: boolean } = {}): StoreUnderTest & { path: string; dir: string } {
  const base = options.memoryBacked === true && existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  const dir = mkdtempSync(join(base, 'em-faults-'));
  const path = join(dir, 'provider.db');
  const encryptionKey = newEncryptionKey();
  return {
    kind: 'sqlite',
    path,
    dir,
    env: { STORE: `sqlite:${path}`, STORE_ENCRYPTION_KEY: encryptionKey },
    async count(table, where) {
      const db = new Database(path, { readonly: true, fileMustExist: true });
      try {
        const sql = `SELECT count(*) AS n FROM ${table}${where === undefined ? '' : ` WHERE ${where.column} = ?`}`;
        const row = (where === undefined ? db.prepare(sql).get() : db.prepare(sql).get(where.value)) as { n: number };
        return row.n;
      } finally {
        db.close();
      }
    },
    async open() {
      const { sqliteStore } = await import('../../src/store/sqlite.js');
      return sqliteStore({ path, encryptionKey, logger: false });
    },
    async cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A fresh schema in DATABASE_URL's database; `connectionString` overrides where the example connects. */
export function postgresUnderTest(admin: ReturnType<typeof postgresAdmin>, connectionString = DATABASE_URL): StoreUnderTest & { schema: string } {
  const schema = admin.newSchema('em_faults');
  const encryptionKey = newEncryptionKey();
  return {
    kind: 'postgres',
    schema,
    env: { STORE: connectionString, STORE_SCHEMA: schema, STORE_ENCRYPTION_KEY: encryptionKey },
    async count(table, where) {
      const sql = `SELECT count(*) AS n FROM "${schema}".${table}${where === undefined ? '' : ` WHERE ${where.column} = $1`}`;
      const [row] = await admin.query<{ n: string }>(sql, where === undefined ? [] : [where.value]);
      return Number(row?.n);
    },
    async open() {
      const { postgresStore } = await import('../../src/store/postgres/index.js');
      const store = postgresStore({ connectionString: DATABASE_URL, schema, encryptionKey, logger: false, poolSize: 4 });
      await store.ready();
      return store;
    },
    async cleanup() {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
  };
}
