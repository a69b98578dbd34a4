/**
 * `npm run bench` (`--quick` for a seconds-long smoke run): measures the request hot path against
 * baselines taken in the same run and prints one table. See docs/performance.md.
 *
 * Every measurement runs in its own process: the load generator (autocannon), each server under
 * test, the verification micro-benchmark and the memory probes (with --expose-gc). Progress goes to
 * stderr, the table to stdout. The exit code is non-zero only when a measurement could not be taken
 * or a run was invalid (a non-201 answer, a reused request); a missed target is reported in the
 * table, not hidden and not an error.
 */
import { cpus, freemem, loadavg, platform, release, totalmem } from 'node:os';
import pg from 'pg';
import { createVerifier } from '../src/signature/index.js';
import { createSigner } from '../src/testkit/signer.js';
import { startWorker, type Worker } from './lib/child.js';
import { writeFileSync } from 'node:fs';
import { ceilingChart, type ChartBar } from './lib/chart.js';
import { fixed, int, markdownTable, mib, ms, signedMib } from './lib/format.js';
import { provisionRequest } from './lib/requests.js';
import { BenchSigner, newKeyPair, rfc3339, type BenchKeyPair } from './lib/signing.js';
import type { LoadResult } from './load.js';
import type { ResourcesResult, VerificationsParams, VerificationsResult } from './memory.js';
import type { ServerMode, StopResult } from './server.js';
import type { VerifyParams, VerifyResult } from './verify.js';
import { scaleSection, soakSection, type SectionContext } from './lib/scale-sections.js';

const USAGE = 'usage: npm run bench [-- --quick] [--only=1,2,3,4,5,6,7] [--svg=docs/performance.svg] [--soak-seconds=N]';
let quick = false;
let svgPath: string | undefined;
let only = new Set(['1', '2', '3', '4', '5', '6', '7']);
/** Measurements 6 and 7 (bench/lib/scale-sections.ts): --soak-seconds=N shortens or lengthens 7. */
let soakSeconds: number | undefined;
for (const arg of process.argv.slice(2)) {
  if (arg === '--quick') quick = true;
  else if (arg.startsWith('--svg=') && arg.length > 6) svgPath = arg.slice(6);
  else if (arg.startsWith('--only=') && /^[1-7](,[1-7])*$/.test(arg.slice(7))) only = new Set(arg.slice(7).split(','));
  else if (/^--soak-seconds=[1-9]\d*$/.test(arg)) soakSeconds = Number(arg.slice(15));
  else {
    console.error(`bench: unknown argument ${arg}\n${USAGE}`);
    process.exit(2);
  }
}

const CONNECTIONS = 32;
const PLAN = quick
  ? {
      verify: { requests: 256, pairs: 2, sliceMs: 100 },
      http: { warmup: 100, laterWarmup: 100, seconds: 0.5, amount: 300, rounds: 1 },
      resources: 2_000,
      verifications: { count: 5_000, keys: 96, run: 25, cacheSize: 64, concurrency: 8 } satisfies VerificationsParams,
      growth: { levels: [1_000, 2_000, 5_000], warmup: 100, seconds: 0.5 },
    }
  : {
      verify: { requests: 4_096, pairs: 16, sliceMs: 300 },
      http: { warmup: 3_000, laterWarmup: 500, seconds: 5, amount: undefined, rounds: 3 },
      resources: 100_000,
      verifications: { count: 1_000_000, keys: 2_000, run: 500, concurrency: 16 } satisfies VerificationsParams,
      growth: { levels: [1_000, 10_000, 100_000], warmup: 1_000, seconds: 4 },
    };
const VERIFY_TARGET = 0.85;
/**
 * Each adapter's throughput as a fraction of its own host's one-verify ceiling measured in the same
 * rounds: on the memory store the Express adapter, Fastify plugin and fetch handler; on the SQL
 * stores the Express adapter.
 */
// The stores' targets are issue 19's (SQLite 0.85, PostgreSQL 0.7), the adapters' issue 18's.
const CEILING_TARGETS = { memory: 0.95, fastify: 0.9, fetch: 0.9, sqlite: 0.85, postgres: 0.7 } as const;
const CEILING_NAME = 'one-verify ceiling: bare Express + raw body + canonical form + 1 Ed25519 verify (thread pool) + JSON.parse';
const BASELINES: ReadonlySet<ServerMode> = new Set(['bare', 'ceiling', 'fastify-ceiling', 'fetch-ceiling']);
const isBaseline = (mode: ServerMode): boolean => BASELINES.has(mode);
/** Time per request at the largest level over the smallest, allowed for "flat" on a noisy 2-core VM. */
const FLAT_LIMIT = 1.25;

type Row = [string, string, string, string, string, string, string];
const rows: Row[] = [];
/** Bars of the chart (--svg): the ceiling, then each store as a fraction of it. */
const chart: ChartBar[] = [];
const notes: string[] = [];
/** Blocks printed after the table and its notes (the soak's samples). */
const blocks: string[] = [];
let failed = false;
const t0 = Date.now();
const progress = (text: string) => process.stderr.write(`bench: ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s  ${text}\n`);
const verdict = (ok: boolean) => (ok ? 'met' : '**MISSED**');

function fail(section: string, error: unknown): void {
  failed = true;
  const message = error instanceof Error ? error.message.split('\n')[0]! : String(error);
  rows.push([section.split(' ')[0]!, section, `FAILED: ${message}`, '', '', '', '**FAILED**']);
}

// ---------------------------------------------------------------------------------------------

/** The bench signer must produce exactly what the test kit's signer produces, and verify. */
async function checkSigner(master: BenchKeyPair): Promise<void> {
  const live = newKeyPair();
  const at = Date.UTC(2017, 3, 6, 19, 17, 3);
  const request = provisionRequest('127.0.0.1:3000', rfc3339(at));
  const ours = new BenchSigner(master, live).sign(request);
  const reference = createSigner({ masterPrivateKey: master.jwk.d!, livePrivateKey: live.jwk.d!, now: () => at }).sign({
    method: request.method,
    url: request.url,
    host: request.host,
    headers: Object.fromEntries(request.headers),
    body: request.body,
  });
  if (JSON.stringify(ours) !== JSON.stringify(reference)) throw new Error('bench: the bench signer disagrees with the test kit signer');
  await createVerifier({ masterKey: master.publicKey, now: () => at }).verify({ method: request.method, url: request.url, headers: ours, body: request.body });
}

async function verifySection(worker: Worker): Promise<void> {
  try {
    // Throughput (many in flight, as under HTTP load) is what the target is about; one in flight
    // is printed too: it measures latency, where the thread-pool hand-off of both sides dominates.
    for (const [concurrency, pairs] of [[CONNECTIONS, PLAN.verify.pairs], [1, Math.ceil(PLAN.verify.pairs / 2)]] as const) {
      progress(`(1) verify() vs crypto.verify, ${concurrency} in flight`);
      const r = await worker.call<VerifyResult>('measure', { ...PLAN.verify, pairs, concurrency } satisfies VerifyParams);
      const throughput = concurrency > 1;
      rows.push([
        '1',
        `verify() vs raw crypto.verify, ${concurrency} in flight (${throughput ? 'throughput' : 'latency'}; median of ${pairs} paired slices)`,
        `${int(r.verifyOps)} ops/s (${r.overheadUs >= 0 ? '+' : '−'}${fixed(Math.abs(r.overheadUs), 1)} µs/op)`,
        `${int(r.rawOps)} ops/s`,
        fixed(r.ratio, 2),
        throughput ? `≥ ${VERIFY_TARGET}` : 'printed',
        throughput ? verdict(r.ratio >= VERIFY_TARGET) : '—',
      ]);
    }
  } finally {
    await worker.close();
  }
}

/** One load run against one server, with the server's own counters over the same span. */
interface RunFigures extends LoadResult {
  /** Provision handler calls (bare: route calls) during the run, warm-up included. */
  handled: number;
  /** Server CPU (every thread) during the run, warm-up included, in microseconds. */
  cpuMicros: number;
  /** The main thread's part of it (undefined where /proc does not say). */
  mainThreadMicros: number | undefined;
}

/** A server under test and its runs. */
interface Target {
  mode: ServerMode;
  label: string;
  worker: Worker;
  port: number;
  runs: RunFigures[];
  problem?: string;
}

const startServer = () => startWorker('server.ts', { env: { LOG_LEVEL: 'warn' } });
/** --quick: one server process for every configuration in turn (start-up time dominates a smoke run). */
let sharedServer: Worker | undefined;

async function openTarget(master: BenchKeyPair, mode: ServerMode, label: string, options: { prefill?: number; databaseUrl?: string } = {}): Promise<Target> {
  const worker = sharedServer ?? startServer();
  try {
    const { port } = await worker.call<{ port: number }>('start', {
      mode,
      masterPublicKey: master.publicKey,
      ...(options.prefill === undefined ? {} : { prefill: options.prefill }),
      ...(options.databaseUrl === undefined ? {} : { databaseUrl: options.databaseUrl }),
    });
    return { mode, label, worker, port, runs: [] };
  } catch (error) {
    if (worker !== sharedServer) await worker.close();
    throw error;
  }
}

async function closeTarget(target: Target): Promise<void> {
  if (target.worker !== sharedServer) await target.worker.close();
}

/** Runs the load generator once against `target` and checks that the run counts. */
async function measureOnce(loader: Worker, master: BenchKeyPair, target: Target, warmup: number, seconds: number): Promise<RunFigures> {
  const amount = quick ? PLAN.http.amount : undefined;
  const before = await target.worker.call<StopResult>('settle');
  const load = await loader.call<LoadResult>('run', {
    url: `http://127.0.0.1:${target.port}`,
    host: `127.0.0.1:${target.port}`,
    master: master.jwk,
    connections: CONNECTIONS,
    warmup,
    seconds,
    minRate: poolRate(target),
    ...(amount === undefined ? {} : { amount }),
  });
  const after = await target.worker.call<StopResult>('settle');
  const figures: RunFigures = {
    ...load,
    handled: after.handled - before.handled,
    cpuMicros: after.cpuMicros - before.cpuMicros,
    mainThreadMicros: after.mainThreadMicros === undefined || before.mainThreadMicros === undefined ? undefined : after.mainThreadMicros - before.mainThreadMicros,
  };
  if (figures.signedLate > 0) notes.push(`${target.mode}: the pre-signed pool ran out; ${int(figures.signedLate)} requests were signed during the run (load generator busier than planned).`);
  const problem = invalid(target.mode, figures);
  if (problem !== undefined) throw new Error(`${target.mode} run invalid: ${problem}`);
  target.runs.push(figures);
  return figures;
}

/**
 * The rate the pre-signed pool of a run is sized for. Past the pool the load generator signs each
 * request while the server is measured, taking CPU from it; and a warm-up underestimates a server
 * (JIT still warming, the connections' start). So a target's first run gets a pool for 8,000
 * req/s (above the fastest server here), later ones half as much again as its fastest earlier run.
 */
function poolRate(target: Target): number {
  if (quick) return 4_000;
  const fastest = target.runs.reduce((most, run) => Math.max(most, run.requestsPerSecond), 0);
  return fastest === 0 ? 8_000 : Math.max(3_000, Math.ceil(fastest * 1.5));
}

/** Why a run does not count, or undefined: every answer 201, every request handled once (so distinct). */
function invalid(mode: ServerMode, f: RunFigures): string | undefined {
  const other = Object.entries(f.statusCodes).filter(([code]) => code !== '201');
  if (other.length > 0) return `answers other than 201: ${other.map(([code, n]) => `${n} × ${code}`).join(', ')}`;
  if (f.errors > 0 || f.timeouts > 0) return `${f.errors} errors, ${f.timeouts} timeouts`;
  // Requests still in flight when autocannon stops are handled without being counted as answered.
  if (f.handled < f.succeeded || f.handled > f.succeeded + CONNECTIONS) return `${f.handled} handled for ${f.succeeded} answered`;
  if (mode !== 'bare' && f.completed === 0) return 'no request completed';
  return undefined;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** A target's runs together: overall req/s, median latencies, CPU per handled request. */
function summary(target: Target): { rate: number; p50: number; p99: number; cpu: number; text: string } {
  const completed = target.runs.reduce((sum, run) => sum + run.completed, 0);
  const seconds = target.runs.reduce((sum, run) => sum + run.completed / run.requestsPerSecond, 0);
  const rate = completed / seconds;
  const p50 = median(target.runs.map((run) => run.latencyP50));
  const p99 = median(target.runs.map((run) => run.latencyP99));
  const handled = target.runs.reduce((sum, run) => sum + run.handled, 0);
  const cpu = target.runs.reduce((sum, run) => sum + run.cpuMicros, 0) / handled;
  // The main thread's share: where an adapter's cost over its ceiling shows (docs/performance.md).
  const main = target.runs.every((run) => run.mainThreadMicros !== undefined)
    ? ` (main thread ${int(target.runs.reduce((sum, run) => sum + run.mainThreadMicros!, 0) / handled)})`
    : '';
  return { rate, p50, p99, cpu, text: `${int(rate)} req/s, p50 ${ms(p50)}, p99 ${ms(p99)}; server CPU ${int(cpu)} µs/req${main}` };
}

async function databaseProblem(url: string | undefined): Promise<string | undefined> {
  if (url === undefined || url === '') return 'skipped: DATABASE_URL not set';
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (error) {
    return `skipped: DATABASE_URL unreachable (${(error as Error).message})`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const failure = (error: unknown) => `FAILED: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`;

/**
 * One configuration of measurements 2 and 3: a baseline (bare Express, a host's one-verify
 * ceiling) or an adapter on a store, measured against the ceiling of its own host.
 */
interface Spec {
  mode: ServerMode;
  /** Short name, in progress lines and the chart. */
  label: string;
  /** The table's row name. */
  name: string;
  section: '2' | '3';
  /** What its ratio is taken against (a mode measured in the same rounds). */
  against: ServerMode;
  /** The target fraction, for adapters. */
  target?: number;
}

const SPECS: readonly Spec[] = [
  { mode: 'bare', label: 'bare Express', name: 'bare Express (express.json())', section: '2', against: 'bare' },
  { mode: 'ceiling', label: 'Express ceiling', name: CEILING_NAME, section: '2', against: 'bare' },
  { mode: 'memory', label: 'Express · memoryStore', name: 'signed PUT, marketplaceRouter + memoryStore', section: '2', against: 'ceiling', target: CEILING_TARGETS.memory },
  { mode: 'fastify-ceiling', label: 'Fastify ceiling', name: 'one-verify ceiling, Fastify 5: raw-body parser + canonical form + 1 Ed25519 verify (thread pool) + JSON.parse', section: '2', against: 'ceiling' },
  { mode: 'fastify', label: 'Fastify · memoryStore', name: 'signed PUT, marketplacePlugin (Fastify 5) + memoryStore', section: '2', against: 'fastify-ceiling', target: CEILING_TARGETS.fastify },
  { mode: 'fetch-ceiling', label: 'fetch ceiling', name: 'one-verify ceiling, fetch: Request → Response on @hono/node-server + canonical form + 1 Ed25519 verify (thread pool) + JSON.parse', section: '2', against: 'ceiling' },
  { mode: 'fetch', label: 'fetch · memoryStore', name: 'signed PUT, provider.fetch (@hono/node-server) + memoryStore', section: '2', against: 'fetch-ceiling', target: CEILING_TARGETS.fetch },
  { mode: 'sqlite', label: 'Express · sqliteStore', name: 'signed PUT, marketplaceRouter + sqliteStore (temp file)', section: '3', against: 'ceiling', target: CEILING_TARGETS.sqlite },
  { mode: 'postgres', label: 'Express · postgresStore', name: 'signed PUT, marketplaceRouter + postgresStore (own schema)', section: '3', against: 'ceiling', target: CEILING_TARGETS.postgres },
];

/**
 * Measurements 2 and 3. A full run keeps every server up and interleaves them in rounds (the order
 * rotating), each round's ratio taken against that round's run of the baseline: load from other
 * processes then hits a round, not one side, and the median over rounds drops it.
 */
async function httpSection(loader: Worker, master: BenchKeyPair): Promise<void> {
  const { warmup, laterWarmup, seconds, rounds } = PLAN.http;
  const databaseUrl = process.env.DATABASE_URL;
  const specs = SPECS.filter((spec) => isBaseline(spec.mode) || only.has(spec.section));
  const skipped = new Map<ServerMode, string>();
  const targets: Target[] = [];
  const broken: Target[] = [];
  const what = (spec: Spec) => (isBaseline(spec.mode) ? `${spec.label} baseline` : `signed PUT through ${spec.label}`);
  try {
    if (specs.some((spec) => spec.mode === 'postgres')) {
      const problem = await databaseProblem(databaseUrl);
      if (problem !== undefined) skipped.set('postgres', problem);
    }
    const runnable = specs.filter((spec) => !skipped.has(spec.mode));
    const open = (spec: Spec) => openTarget(master, spec.mode, spec.label, spec.mode === 'postgres' ? { databaseUrl: databaseUrl! } : {});
    const refused = (spec: Spec, error: unknown) => {
      if (isBaseline(spec.mode)) throw error;
      failed = true;
      broken.push({ mode: spec.mode, label: spec.label, worker: sharedServer!, port: 0, runs: [], problem: failure(error) });
    };
    if (quick) {
      // One shared server process: each configuration in turn, one round.
      for (const spec of runnable) {
        progress(`(${spec.section}) ${what(spec)}`);
        let target: Target | undefined;
        try {
          target = await open(spec);
          await measureOnce(loader, master, target, warmup, seconds);
          targets.push(target);
        } catch (error) {
          refused(spec, error);
        }
      }
    } else {
      for (const spec of runnable) {
        try {
          targets.push(await open(spec));
        } catch (error) {
          refused(spec, error);
        }
      }
      for (let round = 0; round < rounds; round++) {
        const order = targets.slice(round % targets.length).concat(targets.slice(0, round % targets.length));
        for (const target of order) {
          if (target.problem !== undefined) continue;
          progress(`(2/3) round ${round + 1} of ${rounds}: ${what(SPECS.find((spec) => spec.mode === target.mode)!)}`);
          try {
            await measureOnce(loader, master, target, round === 0 ? warmup : laterWarmup, seconds);
          } catch (error) {
            if (isBaseline(target.mode)) throw error;
            failed = true;
            target.problem = failure(error);
          }
        }
      }
    }
  } finally {
    for (const target of targets) await closeTarget(target);
  }

  const measured = (mode: ServerMode) => targets.find((target) => target.mode === mode && target.problem === undefined);
  // Each round against the baseline's run of the same round.
  const ratioTo = (target: Target, base: Target) => median(target.runs.map((run, i) => run.requestsPerSecond / base.runs[i]!.requestsPerSecond));
  for (const spec of specs) {
    if (spec.mode === 'bare') continue;
    const base = measured(spec.against)!;
    const baseSpec = SPECS.find((s) => s.mode === spec.against)!;
    const baseline = `${baseSpec.label} ${summary(base).text}`;
    if (isBaseline(spec.mode)) {
      const figures = summary(measured(spec.mode)!);
      rows.push([spec.section, spec.name, figures.text, baseline, fixed(ratioTo(measured(spec.mode)!, base), 2), 'printed', '—']);
      chart.push({ label: spec.label, ratio: 1, cpu: figures.cpu, rate: figures.rate });
      continue;
    }
    const target = targets.find((t) => t.mode === spec.mode) ?? broken.find((t) => t.mode === spec.mode);
    const goal = spec.target!;
    const problem = skipped.get(spec.mode) ?? target?.problem;
    if (target === undefined || problem !== undefined) {
      rows.push([spec.section, spec.name, problem ?? 'not measured', '', '', `≥ ${goal}`, problem?.startsWith('FAILED') === true ? '**FAILED**' : 'skipped']);
      continue;
    }
    const ratio = ratioTo(target, base);
    const figures = summary(target);
    rows.push([spec.section, spec.name, figures.text, baseline, fixed(ratio, 2), `≥ ${goal}`, verdict(ratio >= goal)]);
    chart.push({ label: spec.label, ratio, target: goal, cpu: figures.cpu, rate: figures.rate });
  }
  notes.push(
    `HTTP runs: ${CONNECTIONS} connections; ${quick ? `one run of ${PLAN.http.amount} requests per server` : `${rounds} interleaved rounds of ${seconds} s per server, ratio = median over rounds of req/s against the same round's run of the row's baseline (each adapter against its own host's one-verify ceiling; the Express ceiling against bare Express, the Fastify and fetch ceilings against the Express ceiling); req/s and CPU over all rounds, latencies the median of the rounds`}. Every request a distinct, validly signed provisioning PUT (checked: all answers 201, the handler ran once per request).`,
  );
}

async function memorySection(worker: Worker): Promise<void> {
  try {
    progress(`(4) memory after ${int(PLAN.resources)} provisioned resources`);
    const r = await worker.call<ResourcesResult>('resources', { count: PLAN.resources });
    rows.push([
      '4',
      `memory: ${int(r.count)} resources provisioned (engine + memoryStore)`,
      `heap ${signedMib(r.heapBytes)} (${int(r.heapBytes / r.count)} B/resource), RSS ${signedMib(r.rssBytes)} (${int(r.rssBytes / r.count)} B/resource)`,
      `heap ${mib(r.heapAfter)}, RSS ${mib(r.rssAfter)} after`,
      '',
      'printed',
      '—',
    ]);
    const v = PLAN.verifications;
    progress(`(4) memory over ${int(v.count)} verifications with ${int(v.keys)} rotating live keys`);
    const s = await worker.call<VerificationsResult>('verifications', v, 900_000);
    const growth = s.heapSlope * s.count;
    const bounded = s.cacheMax <= s.cacheCapacity && growth < 1_048_576;
    rows.push([
      '4',
      `memory: ${int(s.count)} verifications, ${int(s.keys)} live keys rotating (new key every ${int(v.run)})`,
      `endorsement cache max ${int(s.cacheMax)} / capacity ${int(s.cacheCapacity)}; heap slope ${fixed(s.heapSlope, 3)} B/verification (${signedMib(growth)} over the run), RSS slope ${fixed(s.rssSlope, 3)} B/verification`,
      `heap ${mib(s.heapStart)} → ${mib(s.heapEnd)}, RSS ${mib(s.rssStart)} → ${mib(s.rssEnd)}; ${int(s.count / s.seconds)} verifications/s`,
      '',
      'bounded, ~0 B/request',
      verdict(bounded),
    ]);
  } finally {
    await worker.close();
  }
}

async function growthSection(loader: Worker, master: BenchKeyPair): Promise<void> {
  const { levels, warmup, seconds } = PLAN.growth;
  const measured: { level: number; figures: RunFigures; cpu: number }[] = [];
  for (const level of levels) {
    progress(`(5) time per request with ${int(level)} stored resources`);
    const target = await openTarget(master, 'memory', 'memoryStore', { prefill: level });
    try {
      const figures = await measureOnce(loader, master, target, warmup, seconds);
      measured.push({ level, figures, cpu: figures.cpuMicros / figures.handled });
    } finally {
      await closeTarget(target);
    }
  }
  const first = measured[0]!;
  const perRequest = (f: LoadResult) => 1e6 / f.requestsPerSecond;
  for (const { level, figures, cpu } of measured) {
    const ratio = perRequest(figures) / perRequest(first.figures);
    const isFirst = level === first.level;
    rows.push([
      '5',
      `time per request at ${int(level)} stored resources (memoryStore)`,
      `${int(perRequest(figures))} µs/request (${int(figures.requestsPerSecond)} req/s at ${CONNECTIONS} connections), p50 ${ms(figures.latencyP50)}; server CPU ${int(cpu)} µs/req`,
      isFirst ? 'reference' : `${int(perRequest(first.figures))} µs at ${int(first.level)}`,
      fixed(ratio, 2),
      isFirst ? '' : `flat (≤ ${FLAT_LIMIT})`,
      isFirst ? '—' : verdict(ratio <= FLAT_LIMIT),
    ]);
  }
  notes.push(`Growth runs: the store is filled before the server listens; each run then adds the resources it provisions (about ${seconds} s of traffic).`);
}

/** What measurements 6 and 7 (bench/lib/scale-sections.ts) take from this run. */
async function sectionContext(master: BenchKeyPair): Promise<SectionContext> {
  const databaseUrl = process.env.DATABASE_URL;
  return {
    quick,
    master,
    connections: CONNECTIONS,
    databaseUrl,
    databaseProblem: await databaseProblem(databaseUrl),
    ...(soakSeconds === undefined ? {} : { soakSeconds }),
    progress,
    row: (row) => rows.push(row),
    note: (note) => notes.push(note),
    block: (block) => blocks.push(block),
    failed: () => {
      failed = true;
    },
  };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const started = Date.now();
  const cpu = cpus();
  const machine = `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${mib(totalmem()).replace(' MiB', '')} MiB RAM (${mib(freemem())} free), ${platform()} ${release()}, Node ${process.version}`;
  const loadBefore = loadavg().map((n) => n.toFixed(2)).join(' ');

  const master = newKeyPair();
  await checkSigner(master);

  // Every child starts now, in parallel: each waits idle until its turn.
  const httpWanted = only.has('2') || only.has('3') || only.has('5') || only.has('6');
  const verifyWorker = only.has('1') ? startWorker('verify.ts') : undefined;
  const memoryWorker = only.has('4') ? startWorker('memory.ts', { exposeGc: true }) : undefined;
  const loader = httpWanted ? startWorker('load.ts') : undefined;
  if (quick && httpWanted) sharedServer = startServer();

  if (verifyWorker !== undefined) {
    try {
      await verifySection(verifyWorker);
    } catch (error) {
      fail('1 verify() vs raw crypto.verify', error);
    }
  }

  if (loader !== undefined) {
    try {
      if (only.has('2') || only.has('3')) {
        try {
          await httpSection(loader, master);
        } catch (error) {
          fail('2 signed PUT vs bare Express', error);
        }
      }
      if (only.has('5')) {
        try {
          await growthSection(loader, master);
        } catch (error) {
          fail('5 time per request by stored resources', error);
        }
      }
      // ---- measurement 6 (bench/lib/scale-sections.ts) ----
      if (only.has('6')) {
        try {
          await scaleSection(await sectionContext(master), loader);
        } catch (error) {
          fail('6 time per request by stored resources, SQL stores', error);
        }
      }
    } finally {
      await loader.close();
      await sharedServer?.close();
    }
  }

  // ---- measurement 7 (bench/lib/scale-sections.ts) ----
  if (only.has('7')) {
    try {
      await soakSection(await sectionContext(master));
    } catch (error) {
      fail('7 replay records under a sustained load', error);
    }
  }

  if (memoryWorker !== undefined) {
    try {
      await memorySection(memoryWorker);
    } catch (error) {
      fail('4 memory', error);
    }
  }

  rows.sort((a, b) => Number(a[0]) - Number(b[0]));
  const seconds = (Date.now() - started) / 1000;
  const out = [
    `embedded-marketplace benchmarks (${quick ? '--quick: scaled down, figures are not meaningful' : 'full run'})`,
    `machine: ${machine}`,
    `load average at start: ${loadBefore}; run took ${seconds.toFixed(0)} s; ${new Date().toISOString()}`,
    '',
    markdownTable(['#', 'measurement', 'result', 'baseline (same run)', 'ratio', 'target', 'verdict'], rows),
    '',
    ...notes.map((note) => `- ${note}`),
    ...blocks.flatMap((block) => ['', block]),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  if (svgPath !== undefined && chart.length > 0) {
    writeFileSync(svgPath, ceilingChart(chart, `${machine}; ${new Date().toISOString().slice(0, 10)}${quick ? '; --quick, not meaningful' : ''}`));
    progress(`chart written to ${svgPath}`);
  }
  if (failed) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
