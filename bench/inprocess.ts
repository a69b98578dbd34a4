/**
 * `npx tsx bench/inprocess.ts [config,...] [--rounds=N] [--requests=N] [--connections=N]`
 *
 * Servers and a raw-TCP client in ONE process: each configuration is driven in turn with
 * pre-signed provisioning PUTs (signing happens before the clock starts), and the process's CPU per
 * request is printed, the client's share included (the same for every configuration, so the
 * differences are the servers'). Without a second process there is no scheduling between a load
 * generator and a server to blur the comparison; and under valgrind the instruction count is the
 * same whatever else the machine runs (docs/performance.md, "Counting instructions"):
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null node --import tsx bench/inprocess.ts express --rounds=1 --requests=500
 *
 * Configurations: `ceiling` (the Express one-verify ceiling of bench/lib/ceilings.ts), `express`
 * (marketplaceRouter + memoryStore), `node` (provider.node on node:http), `fetch` (provider.fetch
 * behind @hono/node-server), `fastify-ceiling` and `fastify` (Fastify 5's one-verify ceiling, and
 * marketplacePlugin + memoryStore), `fetch-ceiling` (the fetch bridge's ceiling): each adapter can
 * be read against its own host's ceiling, as in `npm run bench`; `fastify-stub` is the plugin on a
 * store that claims and commits without reading or keeping anything (below), to part the engine's
 * cost from the memory store's. A configuration may name the
 * compiled package it loads, to compare two builds in one run:
 * `express@/path/to/other/checkout/dist` (default: this checkout's dist/, built by `npm run build`).
 *
 * With `--allocations`, one more round per configuration runs under V8's sampling heap profiler
 * (garbage included: what the scavenger pays for) and prints the bytes allocated per request, in
 * all and by the functions that allocate most; the client's share is the same in every
 * configuration.
 *
 * With `--promises`, one more round per configuration runs with an async hook counting what it
 * creates (promises, timers, ticks), per request, each kind created at least once in ten requests:
 * each promise is an allocation and a microtask or two; the client's share (`TickObject`s) is the
 * same in every configuration. The hook itself makes V8 create some promises it otherwise skips,
 * so compare the counts with each other.
 *
 * With `--gc`, every counted round starts from a full collection (the pre-signed requests are old
 * by then) and the main thread's time in V8's collector during the round is printed beside the
 * CPU, per request: the scavenges (young generation) and the full collections apart. What the
 * garbage of a request costs shows there, and so does what outlives a scavenge: the scavenger
 * copies every object still alive, so a request's objects that live on (a store's records, for
 * instance) cost more than the same bytes of short-lived garbage.
 */
import { createHook } from 'node:async_hooks';
import { createServer, type RequestListener, type Server } from 'node:http';
import { Session } from 'node:inspector/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { constants as perfConstants, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import express from 'express';
import type * as Canonicalize from '../src/signature/canonicalize.js';
import type * as Root from '../src/index.js';
import type * as Memory from '../src/store/memory.js';
import type * as Common from '../src/store/common.js';
import type * as FastifyAdapter from '../src/adapters/fastify.js';
import type { ClaimInput, ClaimResult, CommitResult, RecordedAnswer, ReplayRecord, Store } from '../src/store/types.js';
import { expressCeiling, fetchCeiling, mountFastifyCeiling } from './lib/ceilings.js';
import { REPO_ROOT } from './lib/child.js';
import { positiveFlag, usageError } from './lib/cli.js';
import { benchHandlers, CATALOG, provisionRequest } from './lib/requests.js';
import { startAllocationSampling, stopAllocationSampling } from './lib/profiles.js';
import { fastifyListener, fetchListener, listenLoopback } from './lib/serving.js';
import { BenchSigner, newKeyPair, rfc3339 } from './lib/signing.js';

const USAGE = 'usage: npx tsx bench/inprocess.ts [ceiling|express|node|fetch|fastify-ceiling|fastify|fastify-stub|fetch-ceiling[@DIST],...] [--rounds=N] [--requests=N] [--connections=N] [--allocations] [--promises] [--gc]';
const KINDS = ['ceiling', 'express', 'node', 'fetch', 'fastify-ceiling', 'fastify', 'fastify-stub', 'fetch-ceiling'] as const;

const fail: (message: string) => never = usageError('bench/inprocess', USAGE);
const option = (name: string, fallback: number): number => positiveFlag(process.argv.slice(2), name, fallback, fail, true);

const list = process.argv.slice(2).find((arg) => !arg.startsWith('--')) ?? 'ceiling,express';
const rounds = option('rounds', 6);
const requests = option('requests', 3000);
const connections = option('connections', 32);

const master = newKeyPair();
const signer = new BenchSigner(master);
const handlers = benchHandlers();

async function listener(config: string): Promise<RequestListener> {
  const [kind, root = join(REPO_ROOT, 'dist')] = config.split('@') as [string, string | undefined];
  const load = async <T>(module: string): Promise<T> => (await import(join(root, module))) as T;
  switch (kind) {
    case 'ceiling': {
      const { canonicalRequest } = await load<typeof Canonicalize>('signature/canonicalize.js');
      const app = express();
      app.put('/v1/resources/:id', express.raw({ type: () => true }), expressCeiling(canonicalRequest, () => undefined));
      return app;
    }
    case 'express': {
      const [{ marketplaceRouter }, { memoryStore }] = await Promise.all([load<typeof Root>('index.js'), load<typeof Memory>('store/memory.js')]);
      const app = express();
      app.use(marketplaceRouter({ store: memoryStore(), catalog: CATALOG, masterKey: master.publicKey, handlers }));
      return app;
    }
    case 'node':
    case 'fetch': {
      const [{ createProvider }, { memoryStore }] = await Promise.all([load<typeof Root>('index.js'), load<typeof Memory>('store/memory.js')]);
      const provider = createProvider({ store: memoryStore(), catalog: CATALOG, masterKey: master.publicKey, handlers });
      if (kind === 'node') return (req, res) => provider.node(req, res);
      return fetchListener((request) => provider.fetch(request));
    }
    case 'fastify':
    case 'fastify-stub': {
      const [{ marketplacePlugin }, { memoryStore }, { COMMITTED }] = await Promise.all([
        load<typeof FastifyAdapter>('adapters/fastify.js'),
        load<typeof Memory>('store/memory.js'),
        load<typeof Common>('store/common.js'),
      ]);
      const store = kind === 'fastify' ? memoryStore() : stubStore(memoryStore(), COMMITTED);
      return (await fastifyListener((app) => app.register(marketplacePlugin, { store, catalog: CATALOG, masterKey: master.publicKey, handlers }))).listener;
    }
    case 'fastify-ceiling': {
      const { canonicalRequest } = await load<typeof Canonicalize>('signature/canonicalize.js');
      return (await fastifyListener((app) => mountFastifyCeiling(app, canonicalRequest, () => undefined))).listener;
    }
    case 'fetch-ceiling': {
      const { canonicalRequest } = await load<typeof Canonicalize>('signature/canonicalize.js');
      return fetchListener(fetchCeiling(canonicalRequest, () => undefined));
    }
    default:
      return fail(`unknown configuration "${config}" (${KINDS.join(', ')}, each optionally @DIST)`);
  }
}

/**
 * `fastify-stub`'s store: every claim is granted on an empty snapshot and every commit succeeds,
 * with nothing read or kept. Its other methods are a memory store's (the plugin's start and its
 * callback worker call them, never a request). Right only for what this bench sends, distinct ids
 * never replayed; what it leaves out of a request's cost is the memory store's share: the claim
 * rule's reads, the records and their copies.
 */
function stubStore(base: Store, committed: CommitResult): Store {
  return {
    ...base,
    claimOperation: (input: ClaimInput): Promise<ClaimResult> => Promise.resolve({
      outcome: 'claimed',
      operation: { key: input.key, kind: input.kind, targetId: input.targetId, fingerprint: input.fingerprint, request: input.request, state: 'running', owner: input.owner, token: 'stub', createdAt: input.now, leaseExpiresAt: input.now + input.leaseMs },
      snapshot: { resource: undefined, resourceDeleted: false, credential: undefined, credentialDeleted: false, credentials: [] },
    }),
    commitOperation: (): Promise<CommitResult> => Promise.resolve(committed),
    recordReplay: (replay: ReplayRecord): Promise<RecordedAnswer> => Promise.resolve(replay.answer),
  };
}

/** The requests of one run, signed now and serialized as HTTP/1.1 bytes. */
function signedRequests(port: number, count: number): Buffer[] {
  const host = `127.0.0.1:${port}`;
  const date = rfc3339(Date.now());
  return Array.from({ length: count }, () => {
    const request = provisionRequest(host, date);
    let head = `PUT ${request.url} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(signer.sign(request))) head += `${name}: ${value}\r\n`;
    return Buffer.concat([Buffer.from(`${head}\r\n`), request.body]);
  });
}

/** Sends every request over `connections` keep-alive sockets, one at a time each; answers the count of 201s. */
function drive(port: number, pool: readonly Buffer[]): Promise<number> {
  let next = 0;
  let created = 0;
  return new Promise((resolve, reject) => {
    let open = connections;
    for (let c = 0; c < connections; c++) {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      const send = (): void => {
        if (next < pool.length) socket.write(pool[next++]!);
        else socket.end();
      };
      socket.on('connect', send);
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('latin1');
        for (;;) {
          const end = received.indexOf('\r\n\r\n');
          if (end === -1) return;
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(received.slice(0, end))?.[1] ?? '0');
          if (received.length < end + 4 + length) return;
          if (!received.startsWith('HTTP/1.1 201')) {
            reject(new Error(`bench/inprocess: answer other than 201: ${received.slice(0, 160)}`));
            socket.destroy();
            return;
          }
          created++;
          received = received.slice(end + 4 + length);
          send();
        }
      });
      socket.on('error', reject);
      socket.on('close', () => {
        if (--open === 0) resolve(created);
      });
    }
  });
}

/** Main-thread time in the collector per request of one round, in µs. */
interface GcTime {
  scavenges: number;
  full: number;
}

/**
 * `gc()` without starting node with --expose-gc: the flag set at run time exposes it to contexts
 * created afterwards. Only for `--gc`, so a plain run keeps V8's defaults.
 */
function exposedGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Runs `round` with the collector's main-thread pauses observed; its result and the time per request. */
async function observingGc<T>(count: number, round: () => Promise<T>): Promise<[T, GcTime]> {
  const time: GcTime = { scavenges: 0, full: 0 };
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      // A gc entry's detail says which collection it was (typed only on Node's GC entry class).
      const kind = (entry as { detail?: { kind?: number } | null }).detail?.kind;
      if (kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) time.scavenges += entry.duration;
      else time.full += entry.duration;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  let result: T;
  try {
    result = await round();
    // Entries are delivered asynchronously: one turn of the loop lets the last ones in.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    observer.disconnect();
  }
  return [result, { scavenges: (time.scavenges * 1000) / count, full: (time.full * 1000) / count }];
}

const collect = process.argv.includes('--gc') ? exposedGc() : undefined;
const targets: { config: string; server: Server; port: number; cpu: number[]; gc: GcTime[] }[] = [];
for (const config of list.split(',')) {
  const server = createServer(await listener(config));
  targets.push({ config, server, port: await listenLoopback(server), cpu: [], gc: [] });
}
// Round 0 warms up (JIT, caches) and is not counted; the order alternates between rounds.
for (let round = 0; round <= rounds; round++) {
  for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
    const pool = signedRequests(target.port, requests);
    collect?.();
    const driven = async (): Promise<{ created: number; used: NodeJS.CpuUsage }> => {
      const before = process.cpuUsage();
      const created = await drive(target.port, pool);
      return { created, used: process.cpuUsage(before) };
    };
    const [{ created, used }, gc] = collect === undefined ? [await driven(), undefined] : await observingGc(requests, driven);
    if (gc !== undefined && round > 0) target.gc.push(gc);
    if (created !== requests) fail(`${target.config}: ${created} of ${requests} requests answered 201`);
    if (round > 0) target.cpu.push((used.user + used.system) / requests);
  }
}
if (process.argv.includes('--promises')) {
  for (const target of targets) {
    const pool = signedRequests(target.port, requests);
    const created = new Map<string, number>();
    const hook = createHook({
      init(_id, type) {
        created.set(type, (created.get(type) ?? 0) + 1);
      },
    });
    hook.enable();
    try {
      await drive(target.port, pool);
    } finally {
      hook.disable();
    }
    const counts = [...created].filter(([, count]) => count >= requests / 10).sort((a, b) => b[1] - a[1]);
    console.log(`-- ${target.config}: created per request: ${counts.map(([type, count]) => `${type} ${(count / requests).toFixed(1)}`).join(', ')}`);
  }
}
if (process.argv.includes('--allocations')) {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  for (const target of targets) {
    const pool = signedRequests(target.port, requests);
    await startAllocationSampling(session);
    await drive(target.port, pool);
    console.log(`-- ${target.config}\n${await stopAllocationSampling(session, requests, 25)}`);
  }
  session.disconnect();
}
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const reference = median(targets[0]!.cpu);
for (const target of targets) {
  const mid = median(target.cpu);
  console.log(`${target.config.padEnd(12)} ${mid.toFixed(0).padStart(5)} µs CPU per request, client included (×${(mid / reference).toFixed(3)} of ${targets[0]!.config}); rounds ${target.cpu.map((v) => v.toFixed(0)).join(' ')}`);
  if (collect !== undefined) {
    const scavenges = median(target.gc.map((gc) => gc.scavenges));
    const full = median(target.gc.map((gc) => gc.full));
    console.log(`${''.padEnd(12)} collector on the main thread: ${scavenges.toFixed(1)} µs per request in scavenges, ${full.toFixed(1)} µs in full collections (medians of the rounds)`);
  }
}
for (const target of targets) target.server.close();
process.exit(0);
