import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import type BetterSqlite3 from 'better-sqlite3';
import type { Client as PgClient } from 'pg';
import type * as Root from '../src/index.js';
import type * as Sqlite from '../src/store/sqlite.js';
import type * as Postgres from '../src/store/postgres/index.js';
import type * as Statements from '../src/store/sql/statements.js';
import type * as Dialect from '../src/store/sql/dialect.js';
import type * as StoreTypes from '../src/store/types.js';
import { serveCalls } from './lib/child.js';
import { CATALOG, clockTime, marketplaceId, type BenchClock } from './lib/requests.js';
import { closeServer, dist, listenLoopback, settle as settleHandled } from './lib/serving.js';

/**
 * A SQL store's server for measurements 6 (time per request with many resources already stored)
 * and 7 (replay records under a sustained load): `marketplaceRouter` on `sqliteStore` or
 * `postgresStore`, built as bench/server.ts builds it (compiled dist/, default logger at
 * LOG_LEVEL=warn, the same catalog and handlers), plus what those measurements need besides:
 *
 * - `seed`: stored resources written straight into the store's tables, bypassing HTTP, the engine
 *   and its claim/commit (see {@link seed}); read back through the store before anything is measured;
 * - `stats`: the replay table's rows and bytes, and the whole database's bytes;
 * - PostgreSQL's own CPU: the store's pool connects under its own `application_name`, and the
 *   backends with that name are read from /proc (user + system time) at each `settle`.
 */

export type ScaleStore = 'sqlite' | 'postgres';

export interface OpenParams {
  store: ScaleStore;
  masterPublicKey: string;
  /** For `postgres`. */
  databaseUrl?: string;
  /** The router's Date tolerance (its replay records are kept twice that, at least a minute). */
  toleranceMs?: number;
  /**
   * A faster clock, given to the router as `now` (--quick soak only: the replay TTL and the
   * once-a-minute prune then pass in seconds). Leases are stretched by the same factor so they
   * last as long as usual.
   */
  clock?: BenchClock;
}

export interface SeedResult {
  /** Resources written by this call. */
  added: number;
  /** Resources written by every seed call so far. */
  seeded: number;
  seconds: number;
  /** Ids of the resources this call wrote, up to `returnIds` of them. */
  ids: string[];
}

export interface Counters {
  /** Provision and changePlan handler calls since the server listened. */
  handled: number;
  /** CPU time of this process (every thread) since it listened, µs. */
  cpuMicros: number;
  /** CPU time of the PostgreSQL backends serving the store's pool since it listened, µs (PostgreSQL only). */
  databaseCpuMicros?: number;
  /** The resources stored: the seeded ones and those provisioned since. */
  resources: number;
}

export interface StoreStats {
  replayRows: number;
  /** The replay table with its indexes (SQLite: dbstat; PostgreSQL: pg_total_relation_size). */
  replayBytes: number;
  /** SQLite: the database file and its WAL; PostgreSQL: every table of the store's schema with its indexes. */
  databaseBytes: number;
  /** PostgreSQL: dead rows of the replay table not yet vacuumed. */
  replayDeadRows?: number;
}

const root = await dist<typeof Root>('index.js');

let store: StoreTypes.Store | undefined;
let server: Server | undefined;
let router: Root.MarketplaceRouter | undefined;
let handled = 0;
let provisioned = 0;
let seeded = 0;
let cpuStart = process.cpuUsage();
const cleanups: (() => Promise<void> | void)[] = [];
/** SQLite: the database file, and a second connection used for seeding and statistics only. */
let sqlite: { path: string; db: BetterSqlite3.Database } | undefined;
/** PostgreSQL: the schema, and a client of its own (not in the store's pool) for seeding and statistics. */
let postgres: { schema: string; client: PgClient; applicationName: string } | undefined;
/** PostgreSQL backends' CPU (clock ticks) at their last reading, and the total accumulated since listening. */
const backendTicks = new Map<number, number>();
let backendMicros = 0;

export interface OpenResult {
  port: number;
  /** The database file, or the schema. */
  where: string;
  /** PostgreSQL: whether the server runs autovacuum, which reclaims the rows the store deletes. */
  autovacuum?: boolean;
}

async function open(params: OpenParams): Promise<OpenResult> {
  if (store !== undefined) throw new Error('bench: scale server already open');
  const encryptionKey = root.generateEncryptionKey();
  if (params.store === 'sqlite') {
    const { sqliteStore } = await dist<typeof Sqlite>('store/sqlite.js');
    const driver = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
    const dir = mkdtempSync(join(tmpdir(), 'em-bench-scale-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'provider.db');
    store = sqliteStore({ path, encryptionKey });
    const db = new driver(path);
    cleanups.push(() => {
      db.close();
    });
    sqlite = { path, db };
  } else {
    if (params.databaseUrl === undefined) throw new Error('bench: postgres needs databaseUrl');
    const [{ postgresStore }, { default: pgDriver }] = await Promise.all([dist<typeof Postgres>('store/postgres/index.js'), import('pg')]);
    const schema = `em_bench_scale_${process.pid}_${Date.now().toString(36)}`;
    const applicationName = `em_bench_${process.pid}`;
    const url = new URL(params.databaseUrl);
    url.searchParams.set('application_name', applicationName);
    const client = new pgDriver.Client({ connectionString: params.databaseUrl });
    await client.connect();
    cleanups.push(async () => {
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    });
    const pgStore = postgresStore({ connectionString: url.toString(), encryptionKey, schema });
    store = pgStore;
    await pgStore.ready();
    postgres = { schema, client, applicationName };
  }
  const clock = params.clock;
  router = root.marketplaceRouter({
    store,
    catalog: CATALOG,
    masterKey: params.masterPublicKey,
    ...(params.toleranceMs === undefined ? {} : { toleranceMs: params.toleranceMs }),
    ...(clock === undefined || clock.speed === 1 ? {} : { now: () => clockTime(clock), leaseMs: 30_000 * clock.speed }),
    handlers: {
      provision: () => {
        handled++;
        provisioned++;
        return 'Your generator is ready';
      },
      changePlan: () => {
        handled++;
      },
      deprovision: () => undefined,
      provisionCredentials: () => ({ credentials: { GENERATOR_URL: 'https://generator.example/x' } }),
      deprovisionCredentials: () => undefined,
    },
  });
  const app = express();
  app.use(router);
  const listening = createServer(app);
  server = listening;
  const port = await listenLoopback(listening);
  cpuStart = process.cpuUsage();
  await readBackends();
  backendMicros = 0;
  if (postgres === undefined) return { port, where: sqlite!.path };
  const { rows } = await postgres.client.query<{ autovacuum: string }>('SHOW autovacuum');
  return { port, where: `schema ${postgres.schema}`, autovacuum: rows[0]?.autovacuum === 'on' };
}

const RESOURCE = { product: 'generator', plan: 'low', region: 'aws::us-east-1', message: 'Your generator is ready' } as const;

/**
 * Adds `count` stored resources, as if that many provisionings had been committed long ago: one
 * `resources` row each (a committed provisioning leaves nothing else once its replay record is
 * pruned: the operation row goes with the commit). Bypasses HTTP, signatures and the engine:
 *
 * - SQLite: the store's own `putResource` statement (src/store/sql/statements.ts, compiled for
 *   SQLite), run on a second connection to the file, 50,000 rows per transaction, then a WAL
 *   checkpoint so the store starts from a plain file;
 * - PostgreSQL: one `INSERT … SELECT FROM unnest($1::text[])` per 20,000 ids into the same columns,
 *   each its own transaction, then `VACUUM ANALYZE` (the statistics and visibility map a table
 *   that grew over months would have, and no autovacuum starting in the middle of a run).
 *
 * Ids are random marketplace-style ids (29 characters of its base32 alphabet), so inserts land all
 * over the primary key's B-tree as real ones do. One seeded resource is read back through the store
 * (getResource) before the call returns, so a schema the seeding no longer matches fails here.
 */
async function seed(params: { count: number; returnIds?: number }): Promise<SeedResult> {
  if (store === undefined) throw new Error('bench: open the scale server first');
  const started = performance.now();
  const now = Date.now();
  const want = params.returnIds ?? 0;
  const ids: string[] = [];
  let probe: string | undefined;
  if (sqlite !== undefined) {
    const [{ statements }, { bind }] = await Promise.all([dist<typeof Statements>('store/sql/statements.js'), dist<typeof Dialect>('store/sql/dialect.js')]);
    const statement = statements('sqlite').putResource;
    const insert = sqlite.db.prepare(statement.text);
    const batch = sqlite.db.transaction((n: number) => {
      for (let i = 0; i < n; i++) {
        const id = marketplaceId();
        if (ids.length < want) ids.push(id);
        probe = id;
        insert.run(...bind(statement, { id, ...RESOURCE, features: '{}', createdAt: now, updatedAt: now }));
      }
    });
    for (let done = 0; done < params.count; done += 50_000) batch.immediate(Math.min(50_000, params.count - done));
    sqlite.db.pragma('wal_checkpoint(TRUNCATE)');
  } else {
    const { client, schema } = postgres!;
    for (let done = 0; done < params.count; done += 20_000) {
      const chunk = Array.from({ length: Math.min(20_000, params.count - done) }, () => marketplaceId());
      for (const id of chunk) if (ids.length < want) ids.push(id);
      probe = chunk.at(-1);
      await client.query(
        `INSERT INTO "${schema}".resources (id, product, plan, region, features, message, created_at, updated_at)
         SELECT id, $2, $3, $4, '{}'::json, $5, $6, $6 FROM unnest($1::text[]) AS id`,
        [chunk, RESOURCE.product, RESOURCE.plan, RESOURCE.region, RESOURCE.message, now],
      );
    }
    await client.query(`VACUUM ANALYZE "${schema}".resources`);
  }
  if (probe !== undefined) {
    const back = await store.getResource(probe);
    if (back?.id !== probe || back.plan !== RESOURCE.plan || back.createdAt !== now || JSON.stringify(back.features) !== '{}') {
      throw new Error(`bench: a seeded resource does not read back through the store: ${JSON.stringify(back)}`);
    }
  }
  seeded += params.count;
  return { added: params.count, seeded, seconds: (performance.now() - started) / 1000, ids };
}

/** Reads the CPU of the PostgreSQL backends serving the store's pool and adds what they used since the last reading. */
async function readBackends(): Promise<void> {
  if (postgres === undefined) return;
  const { rows } = await postgres.client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [postgres.applicationName]);
  for (const { pid } of rows) {
    let ticks: number;
    try {
      // Fields after the command name (which sits in parentheses): state is field 3, utime 14, stime 15.
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks = Number(fields[11]) + Number(fields[12]);
    } catch {
      continue; // the backend exited, or PostgreSQL runs elsewhere
    }
    // A backend not seen before started since the last reading: all of its CPU is new.
    backendMicros += (ticks - (backendTicks.get(pid) ?? 0)) * 10_000; // USER_HZ is 100 on Linux
    backendTicks.set(pid, ticks);
  }
}

async function counters(): Promise<Counters> {
  await readBackends();
  const cpu = process.cpuUsage(cpuStart);
  return {
    handled,
    cpuMicros: cpu.user + cpu.system,
    ...(postgres === undefined ? {} : { databaseCpuMicros: backendMicros }),
    resources: seeded + provisioned,
  };
}

const handledSoFar = () => handled;

/** Counters once no request has been handled for 100 ms (at most 5 s). */
async function settle(): Promise<Counters> {
  await settleHandled(handledSoFar);
  return counters();
}

async function stats(): Promise<StoreStats> {
  if (sqlite !== undefined) {
    const { db, path } = sqlite;
    const replayRows = (db.prepare('SELECT count(*) AS n FROM replays').get() as { n: number }).n;
    const replayBytes = (db.prepare("SELECT coalesce(sum(pgsize), 0) AS bytes FROM dbstat WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name = 'replays')").get() as { bytes: number }).bytes;
    const size = (file: string) => {
      try {
        return statSync(file).size;
      } catch {
        return 0;
      }
    };
    return { replayRows, replayBytes, databaseBytes: size(path) + size(`${path}-wal`) };
  }
  if (postgres !== undefined) {
    const { client, schema } = postgres;
    const { rows } = await client.query<{ rows: string; bytes: string; total: string; dead: string | null }>(
      `SELECT (SELECT count(*) FROM "${schema}".replays) AS rows,
              pg_total_relation_size('"${schema}".replays') AS bytes,
              (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r') AS total,
              (SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'replays') AS dead`,
      [schema],
    );
    const row = rows[0]!;
    return { replayRows: Number(row.rows), replayBytes: Number(row.bytes), databaseBytes: Number(row.total), replayDeadRows: Number(row.dead ?? 0) };
  }
  throw new Error('bench: open the scale server first');
}

async function close(): Promise<void> {
  if (server !== undefined) {
    const closing = server;
    server = undefined;
    await closeServer(closing, handledSoFar);
  }
  await router?.close();
  router = undefined;
  await store?.close();
  store = undefined;
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}

serveCalls({ open, seed, settle, stats }, close);
