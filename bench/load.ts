import { createRequire } from 'node:module';
import { serveCalls } from './lib/child.js';
import { provisionRequest } from './lib/requests.js';
import { rfc3339, signerFor, type BenchSigner, type SignedTarget } from './lib/signing.js';

/**
 * The load generator: autocannon's programmatic API in its own process. Every request is a
 * distinct, validly signed provisioning PUT, signed just before the run (Date must stay within
 * the verifier's 5-minute tolerance); a warm-up run sizes the pool for the measured run.
 */

interface AutocannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: Buffer;
}
interface Histogram {
  mean: number;
  p50: number;
  p99: number;
  total: number;
}
interface AutocannonResult {
  duration: number;
  latency: Histogram;
  requests: Histogram & { sent: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
}
type Autocannon = (
  options: {
    url: string;
    connections: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    sampleInt?: number;
    requests: { setupRequest: (request: AutocannonRequest) => AutocannonRequest }[];
  },
  callback: (error: Error | null, result: AutocannonResult) => void,
) => unknown;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

interface Prepared {
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

export interface LoadParams extends SignedTarget {
  connections: number;
  /** Requests in the warm-up run. */
  warmup: number;
  /** Seconds of the measured run. */
  seconds: number;
  /**
   * Requests of the measured run instead of a duration (--quick): a run then always completes
   * some requests, however busy the machine, where a short window might complete none.
   */
  amount?: number;
  /** Lowest rate the pool is sized for: a short warm-up underestimates a server that is still warming up. */
  minRate: number;
}

export interface LoadResult {
  requestsPerSecond: number;
  latencyP50: number;
  latencyP99: number;
  latencyMean: number;
  completed: number;
  statusCodes: Record<string, number>;
  errors: number;
  timeouts: number;
  /** Requests of the measured run signed while it ran, because the pre-signed pool ran out. */
  signedLate: number;
  poolSize: number;
  warmupRate: number;
  /** 2xx answers of the warm-up and the measured run together (each a distinct provisioning). */
  succeeded: number;
}

function prepare(signer: BenchSigner, host: string, count: number): Prepared[] {
  const date = rfc3339(Date.now());
  const pool: Prepared[] = [];
  for (let i = 0; i < count; i++) {
    const request = provisionRequest(host, date);
    const headers = signer.sign(request);
    // Autocannon writes its own Content-Length (the same value, which stays signed).
    delete headers['content-length'];
    pool.push({ path: request.url, headers, body: request.body });
  }
  return pool;
}

function fire(params: LoadParams, signer: BenchSigner, pool: Prepared[], limit: { amount: number } | { seconds: number }): Promise<{ result: AutocannonResult; taken: number }> {
  let taken = 0;
  const setupRequest = (request: AutocannonRequest): AutocannonRequest => {
    // Past the pool (the server outran the warm-up's estimate) each request is signed here: still
    // distinct and valid, at some cost to the load generator; the result reports how many.
    const next = taken < pool.length ? pool[taken]! : prepare(signer, params.host, 1)[0]!;
    taken++;
    request.method = 'PUT';
    request.path = next.path;
    request.headers = { ...next.headers };
    request.body = next.body;
    return request;
  };
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: params.url,
        connections: params.connections,
        timeout: 30,
        // Autocannon only notices the end of a run at a sample tick (1 s by default).
        sampleInt: 'amount' in limit ? 50 : Math.min(1000, limit.seconds * 250),
        ...('amount' in limit ? { amount: limit.amount } : { duration: limit.seconds }),
        requests: [{ setupRequest }],
      },
      (error, result) => (error === null ? resolve({ result, taken }) : reject(error)),
    );
  });
}

async function run(params: LoadParams): Promise<LoadResult> {
  const signer = signerFor(params);
  const warm = await fire(params, signer, prepare(signer, params.host, params.warmup + params.connections), { amount: params.warmup });
  const warmupRate = warm.result.requests.total / Math.max(warm.result.duration, 0.001);
  const poolSize =
    params.amount !== undefined
      ? params.amount + params.connections
      : Math.min(400_000, Math.ceil(Math.max(warmupRate * 2, params.minRate) * params.seconds) + 4 * params.connections);
  const pool = prepare(signer, params.host, poolSize);
  const { result, taken } = await fire(params, signer, pool, params.amount !== undefined ? { amount: params.amount } : { seconds: params.seconds });
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats)) statusCodes[code] = stats.count;
  return {
    requestsPerSecond: result.requests.total / result.duration,
    latencyP50: result.latency.p50,
    latencyP99: result.latency.p99,
    latencyMean: result.latency.mean,
    completed: result.requests.total,
    statusCodes,
    errors: result.errors,
    timeouts: result.timeouts,
    signedLate: Math.max(0, taken - pool.length),
    poolSize,
    warmupRate,
    succeeded: warm.result['2xx'] + result['2xx'],
  };
}

serveCalls({ run });
