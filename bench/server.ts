import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import express from 'express';
import type * as Canonicalize from '../src/signature/canonicalize.js';
import type * as Router from '../src/provider/router.js';
import type * as Root from '../src/index.js';
import type * as FastifyAdapter from '../src/adapters/fastify.js';
import type * as StoreTypes from '../src/store/types.js';
import { serveCalls } from './lib/child.js';
import { expressCeiling, fetchCeiling, mountFastifyCeiling } from './lib/ceilings.js';
import { benchHandlers, CATALOG, marketplaceId, storedProvisioning } from './lib/requests.js';
import { closeServer, dist, fastifyListener, fetchListener, listenLoopback, openBenchStore, settle } from './lib/serving.js';

// The package as users run it: the compiled dist/ (bench/lib/serving.ts).
const [{ canonicalRequest }, { marketplaceRouter }, { operationKey }] = await Promise.all([
  dist<typeof Canonicalize>('signature/canonicalize.js'),
  dist<typeof Router>('provider/router.js'),
  dist<typeof StoreTypes>('store/types.js'),
]);

/**
 * The server under test, one process per configuration: a bare Express route, the one-verify
 * ceiling of each host (the least any correct provider must do per signed request), or an adapter
 * on one of the stores. The adapters keep their default logger; run.ts sets
 * LOG_LEVEL=warn, so the per-request info line is off, as in a quiet production deployment.
 */

/**
 * `bare`: Express with `express.json()`; `ceiling`, `fastify-ceiling`, `fetch-ceiling`: the
 * one-verify ceiling written for Express, Fastify and the fetch bridge (bench/lib/ceilings.ts);
 * `memory`, `sqlite`, `postgres`: the Express adapter (`marketplaceRouter`) on that store;
 * `fastify`: `marketplacePlugin` on the memory store; `fetch`: `provider.fetch` on the memory
 * store behind @hono/node-server's `getRequestListener`, the bridge the fetch ceiling uses.
 */
export type ServerMode = 'bare' | 'ceiling' | 'memory' | 'sqlite' | 'postgres' | 'fastify-ceiling' | 'fastify' | 'fetch-ceiling' | 'fetch';

export interface StartParams {
  mode: ServerMode;
  masterPublicKey: string;
  /** Resources stored before the server listens. */
  prefill?: number;
  /** For `postgres`. */
  databaseUrl?: string;
}

export interface StopResult {
  /** Times the provision handler (or the bare route) ran. */
  handled: number;
  /** CPU time (user + system, every thread of this process) since start, in microseconds. */
  cpuMicros: number;
  /** The main thread's CPU time since the process started, in microseconds: see {@link mainThreadMicros}. */
  mainThreadMicros: number | undefined;
  rss: number;
}

let server: Server | undefined;
/** What the running configuration releases once its server has closed (the provider, a Fastify instance). */
let release: (() => Promise<void>) | undefined;
let handled = 0;
let cpuStart = process.cpuUsage();
const cleanups: (() => Promise<void> | void)[] = [];
const countHandled = () => {
  handled++;
};

/** The provider options every adapter runs with: the same handlers and catalog. */
function providerOptions(store: StoreTypes.Store, masterKey: string) {
  return {
    store,
    catalog: CATALOG,
    masterKey,
    handlers: benchHandlers(countHandled),
  };
}

async function start(params: StartParams): Promise<{ port: number }> {
  // --quick reuses one process for every configuration; a full run starts a fresh one each time.
  await close();
  handled = 0;
  const listening = await serverFor(params);
  server = listening;
  const port = await listenLoopback(listening);
  cpuStart = process.cpuUsage();
  return { port };
}

/** The configuration's HTTP server, not listening yet. */
async function serverFor(params: StartParams): Promise<Server> {
  switch (params.mode) {
    case 'bare': {
      const app = express();
      app.put('/v1/resources/:id', express.json(), (_req, res) => {
        handled++;
        res.status(201).json({ message: 'Resource provisioned' });
      });
      return createServer(app);
    }
    case 'ceiling': {
      const app = express();
      app.put('/v1/resources/:id', express.raw({ type: () => true }), expressCeiling(canonicalRequest, countHandled));
      return createServer(app);
    }
    case 'fastify-ceiling': {
      const { listener, close } = await fastifyListener((app) => mountFastifyCeiling(app, canonicalRequest, countHandled));
      release = close;
      return createServer(listener);
    }
    case 'fetch-ceiling':
      return createServer(await fetchListener(fetchCeiling(canonicalRequest, countHandled)));
    case 'fastify': {
      const [{ marketplacePlugin }, store] = await Promise.all([dist<typeof FastifyAdapter>('adapters/fastify.js'), openStore(params)]);
      const { listener, close } = await fastifyListener((app) => app.register(marketplacePlugin, providerOptions(store, params.masterPublicKey)));
      // The plugin closes the provider (outbox, store) from Fastify's onClose.
      release = close;
      return createServer(listener);
    }
    case 'fetch': {
      const { createProvider } = await dist<typeof Root>('index.js');
      const provider = createProvider(providerOptions(await openStore(params), params.masterPublicKey));
      release = () => provider.close();
      return createServer(await fetchListener((request) => provider.fetch(request)));
    }
    default: {
      const store = await openStore(params);
      if (params.prefill !== undefined && params.prefill > 0) await prefill(store, params.prefill);
      const router = marketplaceRouter(providerOptions(store, params.masterPublicKey));
      release = () => router.close();
      const app = express();
      app.use(router);
      return createServer(app);
    }
  }
}

async function openStore(params: StartParams): Promise<StoreTypes.Store> {
  // The adapters other than Express's all run on the memory store.
  const kind = params.mode === 'sqlite' || params.mode === 'postgres' ? params.mode : params.mode === 'memory' || params.mode === 'fastify' || params.mode === 'fetch' ? 'memory' : undefined;
  if (kind === undefined) throw new Error(`bench: no store for mode ${params.mode}`);
  const { store, cleanup } = await openBenchStore(kind, { prefix: 'em-bench', databaseUrl: params.databaseUrl });
  cleanups.push(cleanup);
  return store;
}

/** Stores resources through the store's own operations, as the engine would after a handler ran. */
async function prefill(store: StoreTypes.Store, count: number): Promise<void> {
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    const id = marketplaceId();
    const { input, commit } = storedProvisioning(operationKey('resource', id), id, now);
    const claim = await store.claimOperation(input);
    if (claim.outcome !== 'claimed') throw new Error('bench: prefill claim refused');
    await store.commitOperation(input.key, claim.operation.token, commit);
  }
}

/**
 * The main thread's CPU time (user + system) since the process started, in microseconds, or
 * undefined where /proc does not say (not Linux). The main thread runs the event loop: the
 * JavaScript and the collector's pauses. The rest of a server's CPU is its other threads': the
 * thread pool's verifications, the collector's and the compiler's helpers. /proc counts in clock
 * ticks of 10 ms (Linux's USER_HZ is 100), a fraction of a µs per request over a run of seconds.
 */
function mainThreadMicros(): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // After the command name in parentheses: state is field 3, utime and stime fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks) ? ticks * 10_000 : undefined;
}

/** Counters since the server started listening (warm-up included). */
function counters(): StopResult {
  const cpu = process.cpuUsage(cpuStart);
  return { handled, cpuMicros: cpu.user + cpu.system, mainThreadMicros: mainThreadMicros(), rss: process.memoryUsage().rss };
}

const handledSoFar = () => handled;

async function close(): Promise<void> {
  if (server !== undefined) {
    const closing = server;
    server = undefined;
    await closeServer(closing, handledSoFar);
  }
  const releasing = release;
  release = undefined;
  await releasing?.();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}

/** Counters once the requests cut off at the end of a run have finished. */
async function settled(): Promise<StopResult> {
  await settle(handledSoFar);
  return counters();
}

serveCalls({ start, counters, settle: settled }, close);
