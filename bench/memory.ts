import { OperationEngine } from '../src/idempotency/engine.js';
import { prepareOperation } from '../src/idempotency/operations.js';
import { systemClock } from '../src/lib/clock.js';
import { createLogger } from '../src/lib/logger.js';
import { createVerifier, DEFAULT_ENDORSEMENT_CACHE_SIZE, type SignedRequest } from '../src/signature/index.js';
import { memoryStore } from '../src/store/memory.js';
import { serveCalls } from './lib/child.js';
import { collect, slope } from './lib/measure.js';
import { marketplaceId, provisionRequest } from './lib/requests.js';
import { BenchSigner, newKeyPair, rfc3339 } from './lib/signing.js';

/**
 * Measurement 4, in its own process started with --expose-gc: memory after N resources provisioned
 * through the operation engine into the memory store, and the heap over a long run of
 * verifications whose live key keeps changing (the endorsement cache must stay bounded).
 */

export interface ResourcesResult {
  count: number;
  heapBytes: number;
  rssBytes: number;
  heapAfter: number;
  rssAfter: number;
  seconds: number;
}

/** Provisions `count` resources the way the router does (schema check, engine, store). */
async function resources(params: { count: number }): Promise<ResourcesResult> {
  const logger = createLogger(false);
  const store = memoryStore();
  const env = { catalog: undefined, validate: undefined, checkCallbackUrl: undefined };
  const engine = new OperationEngine({
    store,
    env,
    owner: 'bench',
    clock: systemClock(),
    leaseMs: 30_000,
    waitMs: 50_000,
    pendingDeadlineMs: 86_400_000,
    replayTtlMs: 600_000,
    callbacks: false,
    logger,
    handlers: {
      provision: () => 'Your generator is ready',
      changePlan: () => undefined,
      deprovision: () => undefined,
      provisionCredentials: () => ({ credentials: { GENERATOR_URL: 'https://generator.example/x' } }),
      deprovisionCredentials: () => undefined,
    },
  });

  collect();
  const before = process.memoryUsage();
  const started = performance.now();
  let lastId = '';
  for (let i = 0; i < params.count; i++) {
    lastId = marketplaceId();
    const parsed: unknown = JSON.parse(`{"id":"${lastId}","plan":"low","product":"generator","region":"aws::us-east-1"}`);
    const call = { kind: 'provision' as const, id: lastId, body: parsed, callbackId: undefined, callbackUrl: undefined, signedHeaders: [], requestId: undefined };
    const answer = await engine.execute(await prepareOperation(call, env));
    if (answer.status !== 201) throw new Error(`bench: provisioning answered ${answer.status}`);
  }
  const seconds = (performance.now() - started) / 1000;
  collect();
  const after = process.memoryUsage();
  if ((await store.getResource(lastId)) === undefined) throw new Error('bench: the last resource is missing');
  return {
    count: params.count,
    heapBytes: after.heapUsed - before.heapUsed,
    rssBytes: after.rss - before.rss,
    heapAfter: after.heapUsed,
    rssAfter: after.rss,
    seconds,
  };
}

export interface VerificationsParams {
  count: number;
  /** Distinct live keys, each endorsed by the master key; more than the cache holds. */
  keys: number;
  /** Consecutive verifications with one key before the next key takes over. */
  run: number;
  /** Endorsement cache capacity; undefined for the default. */
  cacheSize?: number;
  concurrency: number;
}

export interface VerificationsResult {
  count: number;
  keys: number;
  cacheCapacity: number;
  cacheMax: number;
  cacheEnd: number;
  /** Least-squares slope of heapUsed (after full GCs) over verifications, past the first tenth. */
  heapSlope: number;
  rssSlope: number;
  heapStart: number;
  heapEnd: number;
  rssStart: number;
  rssEnd: number;
  seconds: number;
}

async function verifications(params: VerificationsParams): Promise<VerificationsResult> {
  const master = newKeyPair();
  const signedAt = Date.now();
  const date = rfc3339(signedAt);
  const perKey = 4;
  const pool: SignedRequest[][] = [];
  for (let k = 0; k < params.keys; k++) {
    const signer = new BenchSigner(master);
    const block: SignedRequest[] = [];
    for (let j = 0; j < perKey; j++) {
      const request = provisionRequest('provider.example.com', date);
      const headers = signer.sign(request);
      const distinct: Record<string, string[]> = {};
      for (const [name, value] of Object.entries(headers)) distinct[name] = [value];
      block.push({ method: request.method, url: request.url, headers: distinct, body: request.body });
    }
    pool.push(block);
  }
  const cacheCapacity = params.cacheSize ?? DEFAULT_ENDORSEMENT_CACHE_SIZE;
  const verifier = createVerifier({ masterKey: master.publicKey, now: () => signedAt, endorsementCacheSize: cacheCapacity });

  const sampleEvery = Math.max(1, Math.floor(params.count / 20));
  const samples: { x: number; heap: number; rss: number }[] = [];
  let next = 0;
  let done = 0;
  let cacheMax = 0;
  const started = performance.now();
  const loop = async () => {
    for (let i = next++; i < params.count; i = next++) {
      const visit = Math.floor(i / params.run);
      await verifier.verify(pool[visit % params.keys]![i % perKey]!);
      cacheMax = Math.max(cacheMax, verifier.cachedEndorsements());
      done++;
      if (done % sampleEvery === 0) {
        collect();
        const usage = process.memoryUsage();
        samples.push({ x: done, heap: usage.heapUsed, rss: usage.rss });
      }
    }
  };
  await Promise.all(Array.from({ length: params.concurrency }, loop));
  const seconds = (performance.now() - started) / 1000;
  const steady = samples.slice(Math.max(1, Math.floor(samples.length / 10)));
  return {
    count: done,
    keys: params.keys,
    cacheCapacity,
    cacheMax,
    cacheEnd: verifier.cachedEndorsements(),
    heapSlope: slope(steady.map((s) => ({ x: s.x, y: s.heap }))),
    rssSlope: slope(steady.map((s) => ({ x: s.x, y: s.rss }))),
    heapStart: steady[0]?.heap ?? 0,
    heapEnd: steady.at(-1)?.heap ?? 0,
    rssStart: steady[0]?.rss ?? 0,
    rssEnd: steady.at(-1)?.rss ?? 0,
    seconds,
  };
}

serveCalls({ resources, verifications });
