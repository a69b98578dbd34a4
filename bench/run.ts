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
import { fixed, int, markdownTable, mib, ms, signedMib } from './lib/format.js';
import { provisionRequest } from './lib/requests.js';
import { BenchSigner, newKeyPair, rfc3339, type BenchKeyPair } from './lib/signing.js';
import type { LoadResult } from './load.js';
import type { ResourcesResult, VerificationsParams, VerificationsResult } from './memory.js';
import type { ServerMode, StopResult } from './server.js';
import type { VerifyParams, VerifyResult } from './verify.js';

const USAGE = 'usage: npm run bench [-- --quick] [--only=1,2,3,4,5]';
let quick = false;
let only = new Set(['1', '2', '3', '4', '5']);
for (const arg of process.argv.slice(2)) {
  if (arg === '--quick') quick = true;
  else if (arg.startsWith('--only=') && /^[1-5](,[1-5])*$/.test(arg.slice(7))) only = new Set(arg.slice(7).split(','));
  else {
    console.error(`bench: unknown argument ${arg}\n${USAGE}`);
    process.exit(2);
  }
}

const CONNECTIONS = 32;
const PLAN = quick
  ? {
      verify: { requests: 256, pairs: 2, sliceMs: 150 },
      http: { warmup: 100, seconds: 0.5 },
      resources: 2_000,
      verifications: { count: 5_000, keys: 96, run: 25, cacheSize: 64, concurrency: 8 } satisfies VerificationsParams,
      growth: { levels: [1_000, 2_000, 5_000], warmup: 100, seconds: 0.5 },
    }
  : {
      verify: { requests: 4_096, pairs: 10, sliceMs: 300 },
      http: { warmup: 3_000, seconds: 10 },
      resources: 100_000,
      verifications: { count: 1_000_000, keys: 2_048, run: 500, concurrency: 8 } satisfies VerificationsParams,
      growth: { levels: [1_000, 10_000, 100_000], warmup: 1_000, seconds: 4 },
    };
const VERIFY_TARGET = 0.85;
const ROUTER_TARGET = 0.5;
/** Time per request at the largest level over the smallest, allowed for "flat" on a noisy 2-core VM. */
const FLAT_LIMIT = 1.25;

type Row = [string, string, string, string, string, string, string];
const rows: Row[] = [];
const notes: string[] = [];
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
    for (const concurrency of [1, CONNECTIONS]) {
      progress(`(1) verify() vs crypto.verify, ${concurrency} in flight`);
      const r = await worker.call<VerifyResult>('measure', { ...PLAN.verify, concurrency } satisfies VerifyParams);
      const ratio = r.ratio;
      rows.push([
        '1',
        `verify() vs raw crypto.verify, ${concurrency} in flight (median of ${PLAN.verify.pairs} paired slices)`,
        `${int(r.verifyOps)} ops/s (${r.overheadUs >= 0 ? '+' : '−'}${fixed(Math.abs(r.overheadUs), 1)} µs/op)`,
        `${int(r.rawOps)} ops/s`,
        fixed(ratio, 2),
        `≥ ${VERIFY_TARGET}`,
        verdict(ratio >= VERIFY_TARGET),
      ]);
    }
  } finally {
    await worker.close();
  }
}

interface HttpFigures extends LoadResult {
  handled: number;
  /** Server CPU (all threads) per handled request, warm-up included: steadier than req/s on a shared machine. */
  cpuPerRequest: number;
}

const startServer = () => startWorker('server.ts', { env: { LOG_LEVEL: 'warn' } });
/** --quick: one server process for every run (start-up time dominates a smoke run). */
let sharedServer: Worker | undefined;

async function httpRun(loader: Worker, master: BenchKeyPair, mode: ServerMode, options: { prefill?: number; warmup: number; seconds: number; databaseUrl?: string }): Promise<HttpFigures> {
  const server = sharedServer ?? startServer();
  try {
    const { port } = await server.call<{ port: number }>('start', {
      mode,
      masterPublicKey: master.publicKey,
      ...(options.prefill === undefined ? {} : { prefill: options.prefill }),
      ...(options.databaseUrl === undefined ? {} : { databaseUrl: options.databaseUrl }),
    });
    const load = await loader.call<LoadResult>('run', {
      url: `http://127.0.0.1:${port}`,
      host: `127.0.0.1:${port}`,
      master: master.jwk,
      connections: CONNECTIONS,
      warmup: options.warmup,
      seconds: options.seconds,
      minRate: quick ? 4_000 : 3_000,
    });
    const { handled, cpuMicros } = await server.call<StopResult>('counters');
    const figures = { ...load, handled, cpuPerRequest: cpuMicros / Math.max(handled, 1) };
    if (figures.signedLate > 0) notes.push(`${mode}: the pre-signed pool ran out; ${int(figures.signedLate)} requests were signed during the run (load generator busier than planned).`);
    const problem = invalid(mode, figures);
    if (problem !== undefined) throw new Error(`${mode} run invalid: ${problem}`);
    return figures;
  } finally {
    if (server !== sharedServer) await server.close();
  }
}

/** Why a run does not count, or undefined: every answer 201, every request handled once (so distinct). */
function invalid(mode: ServerMode, f: HttpFigures): string | undefined {
  const other = Object.entries(f.statusCodes).filter(([code]) => code !== '201');
  if (other.length > 0) return `answers other than 201: ${other.map(([code, n]) => `${n} × ${code}`).join(', ')}`;
  if (f.errors > 0 || f.timeouts > 0) return `${f.errors} errors, ${f.timeouts} timeouts`;
  // Requests still in flight when autocannon stops may have been handled without being counted.
  if (f.handled < f.succeeded || f.handled > f.succeeded + CONNECTIONS) return `${f.handled} handled for ${f.succeeded} answered`;
  if (mode !== 'bare' && f.completed === 0) return 'no request completed';
  return undefined;
}

const httpFigures = (f: HttpFigures) => `${int(f.requestsPerSecond)} req/s, p50 ${ms(f.latencyP50)}, p99 ${ms(f.latencyP99)}; server CPU ${int(f.cpuPerRequest)} µs/req`;

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

async function httpSection(loader: Worker, master: BenchKeyPair): Promise<void> {
  const { warmup, seconds } = PLAN.http;
  progress('(2) bare Express baseline under autocannon');
  const bareBefore = await httpRun(loader, master, 'bare', { warmup, seconds });
  const results: { mode: ServerMode; label: string; figures?: HttpFigures; problem?: string }[] = [];
  const databaseUrl = process.env.DATABASE_URL;
  const stores = ([['memory', 'memoryStore'], ['sqlite', 'sqliteStore (temp file)'], ['postgres', 'postgresStore (own schema)']] as const)
    .filter(([mode]) => only.has(mode === 'memory' ? '2' : '3'));
  for (const [mode, label] of stores) {
    progress(`(${mode === 'memory' ? 2 : 3}) signed PUT through marketplaceRouter + ${label}`);
    if (mode === 'postgres') {
      const problem = await databaseProblem(databaseUrl);
      if (problem !== undefined) {
        results.push({ mode, label, problem });
        continue;
      }
    }
    try {
      results.push({ mode, label, figures: await httpRun(loader, master, mode, { warmup, seconds, ...(mode === 'postgres' ? { databaseUrl: databaseUrl! } : {}) }) });
    } catch (error) {
      failed = true;
      results.push({ mode, label, problem: `FAILED: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}` });
    }
  }
  // The baseline again at the end (full runs): the ratio uses the mean of both, so slow drift hits both sides.
  progress('(2) bare Express baseline again');
  const bareAfter = quick ? bareBefore : await httpRun(loader, master, 'bare', { warmup, seconds });
  const bareRate = (bareBefore.requestsPerSecond + bareAfter.requestsPerSecond) / 2;
  const bareCpu = (bareBefore.cpuPerRequest + bareAfter.cpuPerRequest) / 2;
  const rates = quick ? '' : ` (${int(bareBefore.requestsPerSecond)} before, ${int(bareAfter.requestsPerSecond)} after)`;
  const baseline = `bare Express ${int(bareRate)} req/s${rates}, p50 ${ms((bareBefore.latencyP50 + bareAfter.latencyP50) / 2)}, p99 ${ms((bareBefore.latencyP99 + bareAfter.latencyP99) / 2)}; server CPU ${int(bareCpu)} µs/req`;
  for (const { mode, label, figures, problem } of results) {
    const section = mode === 'memory' ? '2' : '3';
    const name = `signed PUT, marketplaceRouter + ${label}`;
    if (figures === undefined) {
      rows.push([section, name, problem ?? '', '', '', mode === 'memory' ? `≥ ${ROUTER_TARGET}` : 'printed', problem?.startsWith('FAILED') === true ? '**FAILED**' : 'skipped']);
      continue;
    }
    const ratio = figures.requestsPerSecond / bareRate;
    rows.push([section, name, httpFigures(figures), baseline, fixed(ratio, 2), mode === 'memory' ? `≥ ${ROUTER_TARGET}` : 'printed', mode === 'memory' ? verdict(ratio >= ROUTER_TARGET) : '—']);
  }
  notes.push(`HTTP runs: ${CONNECTIONS} connections, ${seconds} s each after a ${int(warmup)}-request warm-up; every request a distinct, validly signed provisioning PUT (checked: all answers 201, the handler ran once per request).`);
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
  const measured: { level: number; figures: HttpFigures }[] = [];
  for (const level of levels) {
    progress(`(5) time per request with ${int(level)} stored resources`);
    measured.push({ level, figures: await httpRun(loader, master, 'memory', { prefill: level, warmup, seconds }) });
  }
  const first = measured[0]!;
  const perRequest = (f: LoadResult) => 1e6 / f.requestsPerSecond;
  for (const { level, figures } of measured) {
    const ratio = perRequest(figures) / perRequest(first.figures);
    const isFirst = level === first.level;
    rows.push([
      '5',
      `time per request at ${int(level)} stored resources (memoryStore)`,
      `${int(perRequest(figures))} µs/request (${int(figures.requestsPerSecond)} req/s at ${CONNECTIONS} connections), p50 ${ms(figures.latencyP50)}`,
      isFirst ? 'reference' : `${int(perRequest(first.figures))} µs at ${int(first.level)}`,
      fixed(ratio, 2),
      isFirst ? '' : `flat (≤ ${FLAT_LIMIT})`,
      isFirst ? '—' : verdict(ratio <= FLAT_LIMIT),
    ]);
  }
  notes.push(`Growth runs: the store is filled before the server listens; each run then adds the resources it provisions (about ${seconds} s of traffic).`);
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
  const httpWanted = only.has('2') || only.has('3') || only.has('5');
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
    } finally {
      await loader.close();
      await sharedServer?.close();
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
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  if (failed) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
