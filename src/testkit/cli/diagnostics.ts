/**
 * What the `outbox` and `operations` commands share: opening a store for diagnostics only (never
 * with the encryption key, so these commands can read no credential value even by mistake), the
 * common flags, and the plain-text tables they print.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { StoreView, StoreDiagnostics } from '../../observability/store-view.js';
import { UsageError, type CliIo } from './io.js';

/** A store opened by the CLI: its diagnostics methods, and a way to let it go. */
export type CliStore = StoreView & { close(): Promise<void> };

/** Opens the store a `--store` value names; replaced by a fake in tests. */
export type StoreOpener = (spec: StoreSpec, io: CliIo) => Promise<CliStore>;

/** What the commands take from outside besides their arguments; both default to the real thing. */
export interface DiagnosticsDeps {
  open?: StoreOpener;
  now?: () => number;
}

export type StoreSpec = { kind: 'memory' } | { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string; schema?: string };

export const STORE_FLAGS_USAGE = `  --store SPEC        memory | sqlite:PATH | postgres://USER@HOST:PORT/DB (default $DATABASE_URL)
  --schema NAME       PostgreSQL schema of the store's tables (default embedded_marketplace)
  --json              print JSON for scripts instead of a table`;

export const STORE_FLAGS = {
  store: { type: 'string' },
  schema: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Reads `--store` (or $DATABASE_URL) into a store spec. */
export function parseStoreSpec(io: CliIo, value: string | undefined, schema: string | undefined): StoreSpec {
  const spec = value ?? io.env.DATABASE_URL;
  if (spec === undefined || spec === '') throw new UsageError('give --store (memory, sqlite:PATH or a postgres:// URL) or set DATABASE_URL');
  if (schema !== undefined && !/^(postgres|postgresql):\/\//.test(spec)) throw new UsageError('--schema applies to a PostgreSQL store only');
  if (spec === 'memory') return { kind: 'memory' };
  if (spec.startsWith('sqlite:')) {
    const path = spec.slice('sqlite:'.length);
    if (path === '') throw new UsageError('--store sqlite:PATH needs the path of the database file');
    return { kind: 'sqlite', path: resolve(io.cwd, path) };
  }
  if (/^(postgres|postgresql):\/\//.test(spec)) return { kind: 'postgres', connectionString: spec, ...(schema === undefined ? {} : { schema }) };
  // Not echoed: a mistyped connection string may hold a password.
  throw new UsageError('--store must be memory, sqlite:PATH or a postgres:// URL');
}

/**
 * Opens the real store with `encryptionKey: false`: every method these commands call reads plain
 * columns only, and one that would open a secret rejects instead. PostgreSQL is not migrated from
 * here (the `migrate` command does that); a SQLite path that does not exist is an error, not a new
 * empty database.
 */
export const openStore: StoreOpener = async (spec, io) => {
  if (spec.kind === 'memory') {
    io.stderr.write('Note: --store memory is a new, empty store in this process (useful only to try the commands).\n');
    const { memoryStore } = await import('../../store/memory.js');
    return memoryStore();
  }
  // Diagnostics only: these commands never read a credential value, so they never need the key.
  const noKey = false;
  if (spec.kind === 'sqlite') {
    if (!existsSync(spec.path)) throw new UsageError(`no SQLite database at ${spec.path}`);
    const { sqliteStore } = await import('../../store/sqlite.js');
    return sqliteStore({ path: spec.path, encryptionKey: noKey, logger: false });
  }
  const { postgresStore } = await import('../../store/postgres/index.js');
  const store = postgresStore({ connectionString: spec.connectionString, encryptionKey: noKey, migrate: false, poolSize: 2, logger: false, ...(spec.schema === undefined ? {} : { schema: spec.schema }) });
  try {
    await store.ready();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
};

/** The diagnostics method a command needs, or a clear failure for a store that lacks it. */
export function need<K extends keyof StoreDiagnostics>(store: CliStore, method: K): StoreDiagnostics[K] {
  const fn = store[method];
  if (typeof fn !== 'function') throw new CommandFailure(`the ${store.kind ?? 'given'} store does not offer ${method}() (a store of an older version of embedded-marketplace?)`);
  return fn.bind(store) as StoreDiagnostics[K];
}

/** A command that ran but could not do what was asked: exit code 1 with the message. */
export class CommandFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandFailure';
  }
}

/**
 * Opens the store, runs `fn`, and always closes the store. Failures print one line on stderr:
 * store errors carry a generic message with the driver's cause behind it (host and database
 * names, never the password of the URL), as the `migrate` command prints them.
 */
export async function withStore(command: string, io: CliIo, spec: StoreSpec, open: StoreOpener, fn: (store: CliStore) => Promise<number>): Promise<number> {
  let store: CliStore | undefined;
  try {
    store = await open(spec, io);
    return await fn(store);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : '';
    io.stderr.write(`embedded-marketplace ${command}: ${redact(err instanceof Error ? err.message : String(err))}${redact(cause)}\n`);
    return 1;
  } finally {
    await store?.close().catch(() => undefined);
  }
}

/** Passwords in URLs (`scheme://user:secret@host`) and bearer tokens, masked wherever a string is printed. */
export function redact(text: string): string {
  return text.replace(/(\w+:\/\/[^\s/:@]*):[^\s/@]*@/g, '$1:***@').replace(/(Bearer|Basic)\s+[\w.~+/=-]+/gi, '$1 ***');
}

/** A URL as an operator needs it: origin and path, without credentials or query (which may carry a token). */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}${parsed.search === '' ? '' : '?…'}`;
  } catch {
    return redact(url);
  }
}

/** `3d04h`, `2h05m`, `4m10s`, `12s`: ages and remaining times at a glance. */
export function duration(ms: number): string {
  const negative = ms < 0;
  let s = Math.floor(Math.abs(ms) / 1000);
  const d = Math.floor(s / 86_400);
  s -= d * 86_400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  const text = d > 0 ? `${d}d${pad(h)}h` : h > 0 ? `${h}h${pad(m)}m` : m > 0 ? `${m}m${pad(s)}s` : `${s}s`;
  return negative ? `-${text}` : text;
}

export const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** A left-aligned table with a header row; cells never wrap. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** A limit flag: a whole number from 1 to 10 000. */
export function limitOption(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,5}$/.test(value) || Number(value) < 1 || Number(value) > 10_000) throw new UsageError(`--limit must be a whole number from 1 to 10000, got ${JSON.stringify(value)}`);
  return Number(value);
}

export function printJson(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
