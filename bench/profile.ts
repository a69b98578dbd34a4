/**
 * Where a row of `npm run bench` spends its CPU (docs/performance.md, "Finding where the time goes").
 *
 *   npx tsx bench/profile.ts http <mode> [--seconds=N]
 *     One server of bench/server.ts (`memory`, `ceiling`, `fastify`, `sqlite`...) under the bench's
 *     load, with a V8 CPU profile of the server: prints its CPU per request and the files and
 *     functions of the main thread with the most self time, in µs per request.
 *   npx tsx bench/profile.ts keep [--records=N] [--calls=N]
 *     What keeping a provisioning's records costs (bench/lib/keep-floor.ts): memoryStore's claim and
 *     commit alone, with N provisionings already stored, against the same table operations on plain
 *     Maps that keep the two records (a resource, a replay record) or keep nothing; CPU per
 *     provisioning, median of five rounds of --calls.
 *   npx tsx bench/profile.ts engine <memory|sqlite|postgres> [--calls=N] [--profile]
 *     The operation engine and a store without HTTP or signature: N provisionings (32 at a time)
 *     through `engine.handle`, as the routes call it; prints CPU per call, and with --profile the
 *     functions with the most self time, with --allocations the bytes each function allocates per
 *     call (garbage included: what the scavenger pays for).
 *
 * Both load the compiled dist/ (run `npm run build` first), as the bench does. Profiles are written
 * to $BENCH_PROFILE_DIR (default ./profiles, which git ignores). A sampling profile shows where the
 * time goes, not how long things take: the sampling itself slows the process, so compare its shares
 * against each other, and take absolute figures from `npm run bench`.
 */
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { join, resolve } from 'node:path';
import type * as Compose from '../src/core/compose.js';
import type { OperationCall } from '../src/idempotency/operations.js';
import { REPO_ROOT, startWorker } from './lib/child.js';
import { positiveFlag, usageError } from './lib/cli.js';
import { startAllocationSampling, stopAllocationSampling, summarize, type CpuProfile } from './lib/profiles.js';
import { keepFloor } from './lib/keep-floor.js';
import { dist, openBenchStore } from './lib/serving.js';
import { benchHandlers, CATALOG, marketplaceId } from './lib/requests.js';
import { newKeyPair } from './lib/signing.js';
import type { LoadResult } from './load.js';
import type { ServerMode, StopResult } from './server.js';

const USAGE = 'usage: npx tsx bench/profile.ts http <mode> [--seconds=N] | engine <memory|sqlite|postgres> [--calls=N] [--profile | --allocations] | keep [--records=N] [--calls=N]';
const MODES: readonly ServerMode[] = ['bare', 'ceiling', 'memory', 'sqlite', 'postgres', 'fastify-ceiling', 'fastify', 'fetch-ceiling', 'fetch'];
const ENGINE_STORES = ['memory', 'sqlite', 'postgres'] as const;
type EngineStore = (typeof ENGINE_STORES)[number];

const fail: (message: string) => never = usageError('bench/profile', USAGE);

async function profileHttp(mode: ServerMode, seconds: number): Promise<void> {
  const dir = resolve(process.env.BENCH_PROFILE_DIR ?? join(REPO_ROOT, 'profiles'));
  mkdirSync(dir, { recursive: true });
  const before = new Set(readdirSync(dir));
  const master = newKeyPair();
  const loader = startWorker('load.ts');
  // Only the server is profiled: the variable is read when the worker starts.
  process.env.BENCH_PROFILE_DIR = dir;
  process.env.BENCH_PROFILE_INTERVAL ??= '250';
  const server = startWorker('server.ts', { env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' } });
  delete process.env.BENCH_PROFILE_DIR;
  let handled = 0;
  try {
    const databaseUrl = process.env.DATABASE_URL;
    if (mode === 'postgres' && databaseUrl === undefined) fail('mode postgres needs DATABASE_URL');
    const { port } = await server.call<{ port: number }>('start', { mode, masterPublicKey: master.publicKey, ...(mode === 'postgres' ? { databaseUrl } : {}) });
    const load = await loader.call<LoadResult>('run', { url: `http://127.0.0.1:${port}`, host: `127.0.0.1:${port}`, master: master.jwk, connections: 32, warmup: 3000, seconds, minRate: 3000 }, 300_000);
    const counters = await server.call<StopResult>('settle');
    handled = counters.handled;
    console.log(`${mode}: ${Math.round(load.requestsPerSecond)} req/s while profiled; ${handled} requests handled; server CPU ${Math.round(counters.cpuMicros / handled)} µs/request (every thread, profiler included)`);
  } finally {
    await server.close(10_000);
    await loader.close();
  }
  // The server's main thread is the busiest profile (the loader's thread writes one too).
  const written = readdirSync(dir).filter((name) => !before.has(name) && name.endsWith('.cpuprofile'));
  const busy = (profile: CpuProfile): number => profile.nodes.reduce((sum, node) => sum + (node.callFrame.functionName === '(idle)' ? 0 : node.hitCount ?? 0), 0);
  const main = written.map((name) => ({ name, profile: JSON.parse(readFileSync(join(dir, name), 'utf8')) as CpuProfile })).sort((a, b) => busy(b.profile) - busy(a.profile))[0];
  if (main === undefined) fail(`no profile written to ${dir}`);
  console.log(`${join(dir, main.name)} (open it in Chrome DevTools or speedscope)\n${summarize(main.profile, handled)}`);
}

async function profileEngine(kind: EngineStore, calls: number, profiled: boolean, allocations: boolean): Promise<void> {
  const { composeProvider } = await dist<typeof Compose>('core/compose.js');
  if (kind === 'postgres' && process.env.DATABASE_URL === undefined) fail('store postgres needs DATABASE_URL');
  const { store, cleanup } = await openBenchStore(kind, { prefix: 'em-profile', databaseUrl: process.env.DATABASE_URL });
  let handled = 0;
  const parts = composeProvider('bench/profile', {
    store,
    catalog: CATALOG,
    handlers: benchHandlers(() => {
      handled++;
    }),
  }, []);
  const warmup = Math.min(5000, calls);
  // Ids and signatures drawn before the clock starts: only the engine and the store are measured.
  const prepared = Array.from({ length: warmup + calls }, (): OperationCall => {
    const id = marketplaceId();
    return {
      kind: 'provision', id, body: { id, product: 'generator', plan: 'low', region: 'aws::us-east-1' },
      callbackId: undefined, callbackUrl: undefined, signedHeaders: ['host', 'date'], requestId: randomBytes(64).toString('base64url'), reqId: undefined,
    };
  });
  let next = 0;
  const run = async (count: number): Promise<void> => {
    const end = next + count;
    const lane = async (): Promise<void> => {
      while (next < end) {
        const answer = await parts.engine.handle(prepared[next++]!);
        if (answer.status !== 201) throw new Error(`bench/profile: a provisioning answered ${answer.status}`);
      }
    };
    await Promise.all(Array.from({ length: 32 }, lane));
  };
  try {
    await run(warmup);
    const session = new Session();
    if (allocations) {
      session.connect();
      await session.post('HeapProfiler.enable');
      await startAllocationSampling(session);
    } else if (profiled) {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_PROFILE_INTERVAL ?? '100') });
      await session.post('Profiler.start');
    }
    const cpu = process.cpuUsage();
    const started = performance.now();
    await run(calls);
    const used = process.cpuUsage(cpu);
    const wall = performance.now() - started;
    console.log(`engine on ${kind}: ${((used.user + used.system) / calls).toFixed(1)} µs CPU per provisioning (this process, every thread${profiled ? ', profiler included' : ''}), ${((wall * 1000) / calls).toFixed(1)} µs wall at 32 in flight; ${handled - warmup} handler calls`);
    if (allocations) {
      const summary = await stopAllocationSampling(session, calls);
      session.disconnect();
      console.log(summary);
    } else if (profiled) {
      const { profile } = (await session.post('Profiler.stop')) as { profile: CpuProfile };
      session.disconnect();
      console.log(summarize(profile, calls));
    }
  } finally {
    await parts.close();
    await cleanup();
  }
}

const [what, target, ...rest] = process.argv.slice(2);
if (what === 'http') {
  if (!MODES.includes(target as ServerMode)) fail(`unknown mode "${String(target)}" (one of ${MODES.join(', ')})`);
  await profileHttp(target as ServerMode, positiveFlag(rest, 'seconds', 8, fail));
} else if (what === 'engine') {
  if (!ENGINE_STORES.includes(target as EngineStore)) fail(`unknown store "${String(target)}" (one of ${ENGINE_STORES.join(', ')})`);
  await profileEngine(target as EngineStore, positiveFlag(rest, 'calls', 50_000, fail, true), rest.includes('--profile'), rest.includes('--allocations'));
} else if (what === 'keep') {
  const flags = [target, ...rest].filter((arg): arg is string => arg !== undefined);
  const unknown = flags.find((arg) => !/^--(records|calls)=/.test(arg));
  if (unknown !== undefined) fail(`keep takes --records=N and --calls=N, not "${unknown}"`);
  const records = positiveFlag(flags, 'records', 60_000, fail, true);
  const calls = positiveFlag(flags, 'calls', 20_000, fail, true);
  console.log(`a provisioning's store work, the tables already holding ${records.toLocaleString('en-US')} provisionings (CPU, this process, median of 5 rounds of ${calls.toLocaleString('en-US')}):`);
  for (const { label, micros, rounds } of await keepFloor(records, calls)) {
    console.log(`${label.padEnd(22)} ${micros.toFixed(2)} µs per provisioning; rounds ${rounds.map((round) => round.toFixed(2)).join(' ')}`);
  }
} else {
  fail(what === undefined ? 'what to profile?' : `unknown "${what}"`);
}
