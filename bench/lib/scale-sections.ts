import { startWorker, type Worker } from './child.js';
import { fixed, int, markdownTable, mib, ms } from './format.js';
import type { BenchKeyPair } from './signing.js';
import type { LoadResult } from '../load.js';
import type { Counters, OpenResult, ScaleStore, SeedResult, StoreStats } from '../scale.js';
import type { SoakWindow } from '../soak.js';

/**
 * Measurements 6 and 7 of `npm run bench`, on the SQL stores (bench/scale.ts serves them):
 *
 * - 6, scale: time per signed PUT with 10k, 100k and 1M resources already stored, against the first
 *   level, in interleaved rounds (one server per level, all up at once, the order rotating);
 * - 7, soak: replay records under a steady stream of signed plan changes for 10 minutes: the replay
 *   table's rows and size sampled as it runs, which should level off at about rate × TTL.
 *
 * run.ts calls {@link scaleSection} and {@link soakSection} with a {@link SectionContext}; rows go
 * into its table, the soak's samples into tables of their own after it.
 */

/** A row of run.ts's table: #, measurement, result, baseline, ratio, target, verdict. */
export type Row = [string, string, string, string, string, string, string];

export interface SectionContext {
  quick: boolean;
  master: BenchKeyPair;
  /** Connections of the autocannon runs (measurement 6), as in the other HTTP rows. */
  connections: number;
  databaseUrl: string | undefined;
  /** Why PostgreSQL cannot be measured (`skipped: …`), or undefined when it can. */
  databaseProblem: string | undefined;
  /** Measurement 7's length in seconds, instead of the plan's (--soak-seconds=N). */
  soakSeconds?: number;
  progress(text: string): void;
  row(row: Row): void;
  note(text: string): void;
  /** A block printed after the table (markdown). */
  block(text: string): void;
  /** Marks the run as failed (exit code 1): a measurement could not be taken or was invalid. */
  failed(): void;
}

const STORES: readonly { store: ScaleStore; label: string }[] = [
  { store: 'sqlite', label: 'sqliteStore' },
  { store: 'postgres', label: 'postgresStore' },
];
const verdict = (ok: boolean) => (ok ? 'met' : '**MISSED**');
const failure = (error: unknown) => `FAILED: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`;
const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};
/** Sizes: KiB below a MiB (the --quick soak's tables are that small), MiB above. */
const size = (bytes: number) => (bytes < 1_048_576 ? `${int(bytes / 1024)} KiB` : mib(bytes));
const startScaleServer = () => startWorker('scale.ts', { env: { LOG_LEVEL: 'warn' } });

// ---------------------------------------------------------------------------------------------
// 6. Time per request by stored resources

/** Time per request at the largest level over the smallest, allowed for "flat" (issue 19). */
const FLAT_LIMIT = 1.25;

const scalePlan = (quick: boolean) =>
  quick
    ? { levels: [300, 1_000, 3_000], warmup: 100, laterWarmup: 100, seconds: 0.5, amount: 300 as number | undefined, rounds: 1 }
    : { levels: [10_000, 100_000, 1_000_000], warmup: 2_000, laterWarmup: 500, seconds: 5, amount: undefined, rounds: 3 };

interface LevelRun {
  load: LoadResult;
  handled: number;
  cpuMicros: number;
  databaseCpuMicros?: number;
}

interface Level {
  level: number;
  worker: Worker;
  port: number;
  seed?: SeedResult;
  runs: LevelRun[];
  /** Stored resources after the last run (seeded and provisioned by the runs). */
  storedAfter: number;
  problem?: string;
}

export async function scaleSection(ctx: SectionContext, loader: Worker): Promise<void> {
  const plan = scalePlan(ctx.quick);
  for (const { store, label } of STORES) {
    const name = (level: number) => `time per request at ${int(level)} stored resources (${label})`;
    const target = (i: number) => (i === 0 ? '' : `flat (≤ ${FLAT_LIMIT})`);
    if (store === 'postgres' && ctx.databaseProblem !== undefined) {
      plan.levels.forEach((level, i) => ctx.row(['6', name(level), ctx.databaseProblem!, '', '', target(i), 'skipped']));
      continue;
    }
    const levels: Level[] = [];
    try {
      // One server per level, seeded at once in parallel, then measured in rotating rounds.
      ctx.progress(`(6) ${label}: seeding ${plan.levels.map(int).join(', ')} stored resources (one server each)`);
      for (const level of plan.levels) {
        const worker = startScaleServer();
        levels.push({ level, worker, port: 0, runs: [], storedAfter: 0 });
      }
      await Promise.all(
        levels.map(async (entry) => {
          try {
            const { port } = await entry.worker.call<{ port: number }>('open', { store, masterPublicKey: ctx.master.publicKey, ...(store === 'postgres' ? { databaseUrl: ctx.databaseUrl } : {}) });
            entry.port = port;
            entry.seed = await entry.worker.call<SeedResult>('seed', { count: entry.level }, 1_800_000);
          } catch (error) {
            entry.problem = failure(error);
          }
        }),
      );
      for (let round = 0; round < plan.rounds; round++) {
        const order = levels.slice(round % levels.length).concat(levels.slice(0, round % levels.length));
        for (const entry of order) {
          if (entry.problem !== undefined) continue;
          ctx.progress(`(6) ${label}, round ${round + 1} of ${plan.rounds}: signed PUT with ${int(entry.level)} stored resources`);
          try {
            entry.runs.push(await measure(ctx, loader, entry, round === 0 ? plan.warmup : plan.laterWarmup, plan.seconds, plan.amount));
          } catch (error) {
            entry.problem = failure(error);
          }
        }
      }
      for (const entry of levels) {
        if (entry.problem === undefined) entry.storedAfter = (await entry.worker.call<Counters>('settle')).resources;
      }
    } finally {
      await Promise.all(levels.map((entry) => entry.worker.close(60_000)));
    }

    const first = levels[0]!;
    const perRequest = (load: LoadResult) => 1e6 / load.requestsPerSecond;
    levels.forEach((entry, i) => {
      const problem = entry.problem ?? (i > 0 && first.problem !== undefined ? 'not compared: the first level failed' : undefined);
      if (problem !== undefined) {
        if (problem.startsWith('FAILED')) ctx.failed();
        ctx.row(['6', name(entry.level), problem, '', '', target(i), problem.startsWith('FAILED') ? '**FAILED**' : 'skipped']);
        return;
      }
      const completed = entry.runs.reduce((sum, run) => sum + run.load.completed, 0);
      const seconds = entry.runs.reduce((sum, run) => sum + run.load.completed / run.load.requestsPerSecond, 0);
      const rate = completed / seconds;
      const handled = entry.runs.reduce((sum, run) => sum + run.handled, 0);
      const cpu = entry.runs.reduce((sum, run) => sum + run.cpuMicros, 0) / handled;
      const databaseCpu = store === 'postgres' ? entry.runs.reduce((sum, run) => sum + (run.databaseCpuMicros ?? 0), 0) / handled : undefined;
      // Each round against the first level's run of the same round.
      const ratios = entry.runs.map((run, round) => perRequest(run.load) / perRequest(first.runs[round]!.load));
      const ratio = median(ratios);
      const firstRate = first.runs.reduce((sum, run) => sum + run.load.completed, 0) / first.runs.reduce((sum, run) => sum + run.load.completed / run.load.requestsPerSecond, 0);
      ctx.row([
        '6',
        name(entry.level),
        `${int(1e6 / rate)} µs/request (${int(rate)} req/s at ${ctx.connections} connections), p50 ${ms(median(entry.runs.map((run) => run.load.latencyP50)))}; server CPU ${int(cpu)} µs/req${databaseCpu === undefined ? '' : `; PostgreSQL backends ${int(databaseCpu)} µs/req`}`,
        i === 0 ? 'reference' : `${int(1e6 / firstRate)} µs at ${int(first.level)}${ratios.length > 1 ? `; rounds ${ratios.map((r) => fixed(r, 2)).join(' / ')}` : ''}`,
        fixed(ratio, 2),
        target(i),
        i === 0 ? '—' : verdict(ratio <= FLAT_LIMIT),
      ]);
    });
    const seeds = levels.filter((entry) => entry.seed !== undefined);
    if (seeds.length > 0) {
      ctx.note(
        `Scale (${label}): seeded ${seeds.map((entry) => `${int(entry.seed!.added)} in ${fixed(entry.seed!.seconds, 1)} s`).join(', ')} (in parallel, bypassing HTTP: ${
          store === 'sqlite' ? "the store's own putResource statement on a second connection, 50,000 rows per transaction" : 'INSERT … SELECT FROM unnest() of 20,000 ids per statement, then VACUUM ANALYZE'
        }; each seeded resource is one resources row, as a committed provisioning leaves). The runs provision on top: ${levels
          .filter((entry) => entry.problem === undefined)
          .map((entry) => `${int(entry.level)} → ${int(entry.storedAfter)}`)
          .join(', ')} stored by the last run.`,
      );
    }
  }
  ctx.note(
    `Scale runs: ${ctx.quick ? `one run of ${plan.amount} requests per level` : `${plan.rounds} interleaved rounds of ${plan.seconds} s per level, ratio = median over rounds of time per request against the same round's run at the first level`}; time per request = 1 / (req/s at ${ctx.connections} connections). PostgreSQL backends: CPU (user + system, /proc) of the server processes serving the store's pool, apart from the Node process's.`,
  );
}

async function measure(ctx: SectionContext, loader: Worker, entry: Level, warmup: number, seconds: number, amount: number | undefined): Promise<LevelRun> {
  const before = await entry.worker.call<Counters>('settle');
  const load = await loader.call<LoadResult>('run', {
    url: `http://127.0.0.1:${entry.port}`,
    host: `127.0.0.1:${entry.port}`,
    master: ctx.master.jwk,
    connections: ctx.connections,
    warmup,
    seconds,
    minRate: ctx.quick ? 4_000 : 3_000,
    ...(amount === undefined ? {} : { amount }),
  });
  const after = await entry.worker.call<Counters>('settle');
  const handled = after.handled - before.handled;
  const other = Object.entries(load.statusCodes).filter(([code]) => code !== '201');
  if (other.length > 0) throw new Error(`run invalid: answers other than 201: ${other.map(([code, n]) => `${n} × ${code}`).join(', ')}`);
  if (load.errors > 0 || load.timeouts > 0) throw new Error(`run invalid: ${load.errors} errors, ${load.timeouts} timeouts`);
  // Requests still in flight when autocannon stops are handled without being counted as answered.
  if (handled < load.succeeded || handled > load.succeeded + ctx.connections) throw new Error(`run invalid: ${handled} handled for ${load.succeeded} answered`);
  if (load.completed === 0) throw new Error('run invalid: no request completed');
  if (load.signedLate > 0) ctx.note(`Scale: the pre-signed pool ran out at ${int(entry.level)} stored resources; ${int(load.signedLate)} requests were signed during the run.`);
  return {
    load,
    handled,
    cpuMicros: after.cpuMicros - before.cpuMicros,
    ...(after.databaseCpuMicros === undefined ? {} : { databaseCpuMicros: after.databaseCpuMicros - (before.databaseCpuMicros ?? 0) }),
  };
}

// ---------------------------------------------------------------------------------------------
// 7. Replay records under a sustained load

/** The engine prunes replay records at most this often, after a commit (src/idempotency/engine.ts REPLAY_PRUNE_INTERVAL_MS). */
const PRUNE_INTERVAL_MS = 60_000;
/** The router keeps replay records twice the Date tolerance, at least a minute (src/provider/root.ts). */
const replayTtl = (toleranceMs: number) => Math.max(2 * toleranceMs, 60_000);
/** Growth of the replay table's largest size from the first to the second half after warm-in, allowed for "flat". */
const SIZE_LIMIT = 0.1;

const soakPlan = (quick: boolean) =>
  quick
    ? // Seconds long: the server's clock (and the Dates signed on it) runs 40 times faster, so the
      // 4-minute TTL and the once-a-minute prune happen within the run. Tolerance: 3 s of wall time.
      { seconds: 12, sampleSeconds: 0.75, rate: 150, connections: 16, resources: 1_000, toleranceMs: 120_000, speed: 40 }
    : // Real time. Tolerance 60 s (the default is 300 s) for a 2-minute TTL: 10 minutes then hold
      // several TTLs, and the level reached says what the default's would be (5 times as high).
      { seconds: 600, sampleSeconds: 20, rate: 250, connections: 16, resources: 10_000, toleranceMs: 60_000, speed: 1 };
type SoakPlan = ReturnType<typeof soakPlan>;

interface Sample {
  window: SoakWindow;
  stats: StoreStats;
  /** The most rows pruning may leave: requests sent within the last TTL + prune interval (+ the longest latency so far), plus those in flight. */
  bound: number;
  /** Rows no prune may have removed yet: requests sent within the last TTL (less one bucket) and answered 200 by the sample. */
  floor: number;
}

interface Soak {
  store: ScaleStore;
  label: string;
  /** Undefined when the store is skipped. */
  server?: Worker;
  load?: Worker;
  port: number;
  ids: string[];
  samples: Sample[];
  /** Requests sent and answered 200, by send-time bucket (bench/soak.ts), over the whole run. */
  sent: Map<number, number>;
  ok: Map<number, number>;
  /** The longest latency so far, seconds. */
  latest: number;
  handled: number;
  /** PostgreSQL: whether the server runs autovacuum (the store relies on it to reclaim deleted rows). */
  autovacuum?: boolean;
  problem?: string;
}

export async function soakSection(ctx: SectionContext): Promise<void> {
  const plan: SoakPlan = { ...soakPlan(ctx.quick), ...(ctx.soakSeconds === undefined ? {} : { seconds: ctx.soakSeconds }) };
  const ttl = replayTtl(plan.toleranceMs);
  const ttlWall = ttl / plan.speed / 1000;
  /** Wall-clock seconds a replay record may live: its TTL, then until the next prune. */
  const keep = (ttl + PRUNE_INTERVAL_MS) / plan.speed / 1000;
  const name = (label: string) =>
    `replay records under ${plan.seconds >= 120 ? `${fixed(plan.seconds / 60, 0)} min` : `${fixed(plan.seconds, 0)} s`} of signed PATCHes offered at ${plan.rate} req/s, TTL ${ttl / 1000} s (${label})`;
  const clock = { origin: Date.now(), speed: plan.speed };
  const soaks: Soak[] = [];
  try {
    for (const { store, label } of STORES) {
      const empty = { store, label, port: 0, ids: [], samples: [], sent: new Map(), ok: new Map(), latest: 0, handled: 0 };
      if (store === 'postgres' && ctx.databaseProblem !== undefined) soaks.push({ ...empty, problem: ctx.databaseProblem });
      else soaks.push({ ...empty, server: startScaleServer(), load: startWorker('soak.ts') });
    }
    const running = soaks.filter((soak) => soak.problem === undefined);
    ctx.progress(`(7) seeding ${int(plan.resources)} resources in ${running.map((soak) => soak.label).join(' and ')}`);
    await Promise.all(
      running.map(async (soak) => {
        try {
          const opened = await soak.server!.call<OpenResult>('open', {
            store: soak.store,
            masterPublicKey: ctx.master.publicKey,
            toleranceMs: plan.toleranceMs,
            ...(plan.speed === 1 ? {} : { clock }),
            ...(soak.store === 'postgres' ? { databaseUrl: ctx.databaseUrl } : {}),
          });
          soak.port = opened.port;
          if (opened.autovacuum !== undefined) soak.autovacuum = opened.autovacuum;
          soak.ids = (await soak.server!.call<SeedResult>('seed', { count: plan.resources, returnIds: plan.resources })).ids;
        } catch (error) {
          soak.problem = failure(error);
        }
      }),
    );
    const measured = running.filter((soak) => soak.problem === undefined);
    ctx.progress(`(7) ${plan.seconds} s of signed PATCHes at ${plan.rate} req/s on ${measured.map((soak) => soak.label).join(' and ')}${measured.length > 1 ? ' at once' : ''}; a sample every ${plan.sampleSeconds} s`);
    await Promise.all(
      measured.map((soak) =>
        soak.load!.call('start', {
          url: `http://127.0.0.1:${soak.port}`,
          host: `127.0.0.1:${soak.port}`,
          master: ctx.master.jwk,
          ids: soak.ids,
          rate: plan.rate,
          connections: plan.connections,
          bucketSeconds: bucketSeconds(plan),
          ...(plan.speed === 1 ? {} : { clock }),
        }),
      ),
    );
    const started = performance.now();
    const count = Math.max(1, Math.round(plan.seconds / plan.sampleSeconds));
    for (let i = 1; i <= count; i++) {
      const wait = started + i * plan.sampleSeconds * 1000 - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const last = i === count;
      await Promise.all(
        measured.map(async (soak) => {
          if (soak.problem !== undefined) return;
          try {
            const [window, stats] = await Promise.all([soak.load!.call<SoakWindow>(last ? 'stop' : 'window', undefined, 120_000), soak.server!.call<StoreStats>('stats', undefined, 120_000)]);
            soak.samples.push({ window, stats, ...limits(soak, window, plan, ttlWall, keep) });
          } catch (error) {
            soak.problem = failure(error);
          }
        }),
      );
      if (!ctx.quick && i % 3 === 0) {
        ctx.progress(`(7) ${fixed(i * plan.sampleSeconds, 0)} s: ${measured.map((soak) => `${soak.label} ${int(soak.samples.at(-1)?.stats.replayRows ?? 0)} replay rows`).join(', ')}`);
      }
    }
    for (const soak of measured) {
      if (soak.problem === undefined) soak.handled = (await soak.server!.call<Counters>('settle')).handled;
    }
  } finally {
    await Promise.all(soaks.flatMap((soak) => [soak.load?.close(), soak.server?.close(60_000)]).filter((closing) => closing !== undefined));
  }

  for (const soak of soaks) report(ctx, plan, soak, name(soak.label), keep);
  const ran = soaks.filter((soak) => soak.samples.length > 0);
  ctx.note(
    `Soak: ${ran.map((soak) => soak.label).join(' and ')}${ran.length > 1 ? ' at the same time, each with its own load generator' : ''}; ${int(plan.resources)} seeded resources changed round robin (plan high ↔ low, a new signature and Date each request, ${plan.connections} connections at most); replay TTL ${ttl / 1000} s (toleranceMs ${plan.toleranceMs}; the default 300,000 keeps them 600 s), pruned by the engine after a commit at most once a minute. Each sample's rows must lie between the floor (requests sent within the last TTL and answered 200: records no prune may have removed yet) and the bound (requests sent within the last TTL + 60 s + the longest latency so far, plus those in flight: all pruning may leave); ratio = the largest rows / bound after warm-in (TTL + 60 s + one sample). Flat: the replay table's largest size in the second half after warm-in within ${SIZE_LIMIT * 100}% of the first half's.${
      plan.speed === 1 ? '' : ` --quick: the server's clock runs ${plan.speed} times faster (the router's \`now\`, leases stretched to match; Dates signed on the same clock), so the TTL is ${fixed(ttlWall, 1)} s and the prune interval ${fixed(PRUNE_INTERVAL_MS / plan.speed / 1000, 1)} s of wall time.`
    }`,
  );
}

/** Requests are counted by send time in buckets of a twentieth of a sample period (1 s in a full run). */
const bucketSeconds = (plan: SoakPlan) => plan.sampleSeconds / 20;

/**
 * The floor and bound of a new sample. A replay record is written at its request's commit, after
 * the request was sent and before it was answered, and expires a TTL after the commit; the engine
 * prunes expired records at most once a prune interval. So at time t:
 * - a request sent at or after t − TTL and answered 200 has its record (floor), unless a prune
 *   removed it before its time;
 * - a record still there was committed after t − TTL − prune interval, so its request was sent
 *   after that less the longest latency (bound, with the requests in flight, sent after the count).
 */
function limits(soak: Soak, window: SoakWindow, plan: SoakPlan, ttlWall: number, keep: number): { bound: number; floor: number } {
  const add = (into: Map<number, number>, counts: Record<number, number>) => {
    for (const [bucket, n] of Object.entries(counts)) into.set(Number(bucket), (into.get(Number(bucket)) ?? 0) + n);
  };
  add(soak.sent, window.sentBySendBucket);
  add(soak.ok, window.okBySendBucket);
  soak.latest = Math.max(soak.latest, window.latencyMax / 1000);
  const width = bucketSeconds(plan);
  const t = window.at;
  let bound = plan.connections;
  for (const [bucket, n] of soak.sent) if ((bucket + 1) * width > t - keep - soak.latest) bound += n;
  let floor = 0;
  // One bucket of margin: the store is read a moment after t.
  for (const [bucket, n] of soak.ok) if (bucket * width >= t - ttlWall + width) floor += n;
  return { bound, floor };
}

function report(ctx: SectionContext, plan: SoakPlan, soak: Soak, name: string, keep: number): void {
  const target = `≤ 1.00, rows ≥ floor; table flat (≤ +${SIZE_LIMIT * 100}%)`;
  const samples = soak.samples;
  if (samples.length > 0) ctx.block(samplesTable(soak));
  const answered = samples.reduce((sum, s) => sum + s.window.answered, 0);
  const statuses: Record<string, number> = {};
  for (const s of samples) for (const [code, n] of Object.entries(s.window.statusCodes)) statuses[code] = (statuses[code] ?? 0) + n;
  const errors = samples.reduce((sum, s) => sum + s.window.errors, 0);
  const other = Object.entries(statuses).filter(([code]) => code !== '200');
  let problem = soak.problem;
  if (problem === undefined && other.length > 0) problem = `FAILED: answers other than 200: ${other.map(([code, n]) => `${n} × ${code}`).join(', ')}`;
  if (problem === undefined && errors > 0) problem = `FAILED: ${errors} requests got no answer`;
  // Every 200 ran changePlan once (the plan flips at each visit), so every answer was a distinct execution.
  if (problem === undefined && soak.handled !== (statuses['200'] ?? 0)) problem = `FAILED: changePlan ran ${soak.handled} times for ${statuses['200'] ?? 0} answers 200`;
  if (problem !== undefined) {
    if (problem.startsWith('FAILED')) ctx.failed();
    ctx.row(['7', name, problem, '', '', target, problem.startsWith('FAILED') ? '**FAILED**' : 'skipped']);
    return;
  }
  const warm = samples.filter((s) => s.window.at >= keep + plan.sampleSeconds);
  const halves = [warm.slice(0, Math.ceil(warm.length / 2)), warm.slice(Math.ceil(warm.length / 2))] as const;
  const largest = (part: readonly Sample[], of: (s: Sample) => number) => Math.max(0, ...part.map(of));
  const seconds = samples.reduce((sum, s) => sum + s.window.seconds, 0);
  const end = samples.at(-1)!;
  const pruned = samples.some((s, i) => i > 0 && s.stats.replayRows < samples[i - 1]!.stats.replayRows);
  const ratio = warm.length === 0 ? Number.NaN : Math.max(...warm.map((s) => s.stats.replayRows / s.bound));
  const kept = warm.every((s) => s.stats.replayRows >= s.floor);
  const tableBefore = largest(halves[0], (s) => s.stats.replayBytes);
  const tableAfter = largest(halves[1], (s) => s.stats.replayBytes);
  const growth = tableAfter / tableBefore - 1;
  const dbBefore = largest(halves[0], (s) => s.stats.databaseBytes);
  const dbAfter = largest(halves[1], (s) => s.stats.databaseBytes);
  const percent = (value: number) => `${value >= 0 ? '+' : '−'}${fixed(Math.abs(value) * 100, 0)}%`;
  const vacuum = soak.autovacuum === false ? '; autovacuum is off on this server: nothing reclaims the deleted rows' : '';
  const why =
    halves[1].length === 0 ? 'too short to pass a TTL and a prune'
    : !pruned ? 'no prune seen'
    : ratio > 1 ? 'rows above the bound'
    : !kept ? 'rows below the floor: records pruned before their TTL'
    : growth > SIZE_LIMIT ? `replay table still growing${soak.autovacuum === false ? ' (autovacuum off)' : ''}`
    : undefined;
  ctx.row([
    '7',
    name,
    `${int(end.stats.replayRows)} replay rows at the end, ${int(Math.min(...warm.map((s) => s.stats.replayRows)))}–${int(largest(warm, (s) => s.stats.replayRows))} after warm-in (${fixed(keep + plan.sampleSeconds, 0)} s), ${kept ? 'never below' : '**below**'} the floor; replay table at most ${size(tableBefore)} in the first half after warm-in, ${size(tableAfter)} in the second (${percent(growth)}); database at most ${size(dbBefore)}, then ${size(dbAfter)} (${percent(dbAfter / dbBefore - 1)})${vacuum}; ${int(answered / seconds)} req/s answered, latency p99 ${ms(median(samples.map((s) => s.window.latencyP99)))} (median of samples), max ${ms(Math.max(...samples.map((s) => s.window.latencyMax)))}`,
    `bound: requests sent in the last TTL + 60 s (${int(largest(warm, (s) => s.bound))} at most)`,
    Number.isNaN(ratio) ? '' : fixed(ratio, 2),
    target,
    why === undefined ? 'met' : `**MISSED** (${why})`,
  ]);
}

function samplesTable(soak: Soak): string {
  const dead = soak.store === 'postgres';
  const rows = soak.samples.map((s, i) => {
    const previous = soak.samples[i - 1];
    const drop = previous !== undefined && s.stats.replayRows < previous.stats.replayRows;
    return [
      fixed(s.window.at, 1),
      int(s.window.answered / s.window.seconds),
      `${int(s.stats.replayRows)}${drop ? ' ↓' : ''}`,
      int(s.floor),
      int(s.bound),
      size(s.stats.replayBytes),
      ...(dead ? [int(s.stats.replayDeadRows ?? 0)] : []),
      size(s.stats.databaseBytes),
      `${ms(s.window.latencyP99)} / ${ms(s.window.latencyMax)}`,
    ];
  });
  const header = ['t (s)', 'req/s', 'replay rows', 'floor', 'bound', 'replay table', ...(dead ? ['dead rows'] : []), soak.store === 'sqlite' ? 'file + WAL' : 'schema', 'p99 / max latency'];
  return `Soak samples, ${soak.label} (7; ↓: rows fell since the previous sample, a prune ran):\n\n${markdownTable(header, rows)}`;
}
