import { Agent, request as httpRequest } from 'node:http';
import { serveCalls } from './lib/child.js';
import { clockTime, planChange, type BenchClock } from './lib/requests.js';
import { rfc3339, signerFor, type BenchSigner, type SignedTarget } from './lib/signing.js';

/**
 * The load generator of measurement 7: a steady stream of signed plan changes at a fixed rate,
 * for minutes. Unlike bench/load.ts (autocannon as fast as the server goes, pre-signed requests)
 * every request is signed when it is sent, with the current Date, so the stream can run longer
 * than the Date tolerance; and the rate is fixed, so the replay records it leaves should level off
 * at rate × TTL.
 *
 * Each request is `PATCH /v1/resources/:id` on one of the seeded resources, round robin, the plan
 * flipping between `high` and `low` at each visit (the seeds are `low`): every request runs
 * `changePlan` and leaves one replay record, and no two in flight touch the same resource while
 * there are more resources than connections. The store keeps a fixed number of resources, so what
 * grows in the database is the replay records (and whatever their churn leaves behind).
 *
 * The caller polls `window()`: what was sent and answered since the previous poll.
 */

export interface SoakParams extends SignedTarget {
  /** The seeded resources to change, round robin. */
  ids: readonly string[];
  /** Requests per second. */
  rate: number;
  /** Most requests in flight (one keep-alive connection each). */
  connections: number;
  /** The server's clock (bench/scale.ts `clock`): Dates are signed on it. */
  clock?: BenchClock;
  /** Width of the time buckets requests are counted in by when they were sent, seconds. */
  bucketSeconds: number;
}

export interface SoakWindow {
  /** Wall-clock seconds since `start`, at the end of this window. */
  at: number;
  /** Length of the window, seconds. */
  seconds: number;
  sent: number;
  answered: number;
  /** Answers by status code. */
  statusCodes: Record<string, number>;
  /** Network errors and timeouts. */
  errors: number;
  latencyP50: number;
  latencyP99: number;
  latencyMax: number;
  /** Most requests that were due but waited for a free connection, at any tick of the window. */
  maxBacklog: number;
  /**
   * Counts added since the previous window, by the bucket in which the request was SENT (bucket
   * `b` covers seconds [b × bucketSeconds, (b + 1) × bucketSeconds) since start): requests sent, and
   * requests answered 200 (an answer can land in a later window than its send).
   */
  sentBySendBucket: Record<number, number>;
  okBySendBucket: Record<number, number>;
}

let stream: Stream | undefined;

class Stream {
  readonly #params: SoakParams;
  readonly #signer: BenchSigner;
  readonly #agent: Agent;
  readonly #timer: NodeJS.Timeout;
  readonly #started = performance.now();
  #windowStart = this.#started;
  #sent = 0;
  #inFlight = 0;
  #stopping = false;
  #drained: (() => void) | undefined;
  // The current window.
  #wSent = 0;
  #wAnswered = 0;
  #wErrors = 0;
  #wStatus: Record<string, number> = {};
  #wLatencies: number[] = [];
  #wBacklog = 0;
  #wSentBuckets: Record<number, number> = {};
  #wOkBuckets: Record<number, number> = {};

  constructor(params: SoakParams) {
    if (params.ids.length <= params.connections) throw new Error('bench: the soak needs more resources than connections');
    this.#params = params;
    this.#signer = signerFor(params);
    this.#agent = new Agent({ keepAlive: true, maxSockets: params.connections });
    this.#timer = setInterval(() => this.#tick(), 5);
  }

  #tick(): void {
    if (this.#stopping) return;
    const due = Math.floor(((performance.now() - this.#started) / 1000) * this.#params.rate);
    while (this.#sent < due && this.#inFlight < this.#params.connections) this.#send();
    this.#wBacklog = Math.max(this.#wBacklog, due - this.#sent);
  }

  #send(): void {
    const { ids, host } = this.#params;
    const index = this.#sent++;
    const id = ids[index % ids.length]!;
    const plan = Math.floor(index / ids.length) % 2 === 0 ? 'high' : 'low';
    const signed = planChange(host, rfc3339(clockTime(this.#params.clock)), id, plan);
    const headers = this.#signer.sign(signed);
    this.#inFlight++;
    this.#wSent++;
    const began = performance.now();
    const bucket = Math.floor((began - this.#started) / 1000 / this.#params.bucketSeconds);
    this.#wSentBuckets[bucket] = (this.#wSentBuckets[bucket] ?? 0) + 1;
    const finish = (status: number | undefined) => {
      this.#inFlight--;
      if (status === undefined) this.#wErrors++;
      else {
        if (status === 200) this.#wOkBuckets[bucket] = (this.#wOkBuckets[bucket] ?? 0) + 1;
        this.#wAnswered++;
        this.#wStatus[status] = (this.#wStatus[status] ?? 0) + 1;
        this.#wLatencies.push(performance.now() - began);
      }
      if (this.#inFlight === 0) this.#drained?.();
    };
    const req = httpRequest(`${this.#params.url}${signed.url}`, { method: signed.method, headers, agent: this.#agent, timeout: 30_000 }, (res) => {
      res.resume();
      res.once('end', () => finish(res.statusCode));
      res.once('error', () => finish(undefined));
    });
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', () => finish(undefined));
    req.end(signed.body);
  }

  window(): SoakWindow {
    const end = performance.now();
    const latencies = this.#wLatencies.sort((a, b) => a - b);
    const pick = (q: number) => (latencies.length === 0 ? 0 : latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!);
    const window: SoakWindow = {
      at: (end - this.#started) / 1000,
      seconds: (end - this.#windowStart) / 1000,
      sent: this.#wSent,
      answered: this.#wAnswered,
      statusCodes: this.#wStatus,
      errors: this.#wErrors,
      latencyP50: pick(0.5),
      latencyP99: pick(0.99),
      latencyMax: latencies.at(-1) ?? 0,
      maxBacklog: this.#wBacklog,
      sentBySendBucket: this.#wSentBuckets,
      okBySendBucket: this.#wOkBuckets,
    };
    this.#wSentBuckets = {};
    this.#wOkBuckets = {};
    this.#windowStart = end;
    this.#wSent = this.#wAnswered = this.#wErrors = this.#wBacklog = 0;
    this.#wStatus = {};
    this.#wLatencies = [];
    return window;
  }

  /** Stops sending, waits for the answers in flight, answers the last window. */
  async stop(): Promise<SoakWindow> {
    this.#stopping = true;
    clearInterval(this.#timer);
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    this.#agent.destroy();
    return this.window();
  }
}

serveCalls(
  {
    start(params: SoakParams) {
      if (stream !== undefined) throw new Error('bench: a soak stream is already running');
      stream = new Stream(params);
    },
    window: () => stream!.window(),
    async stop() {
      const last = await stream!.stop();
      stream = undefined;
      return last;
    },
  },
  async () => {
    await stream?.stop();
  },
);
