/**
 * The Prometheus side of the hooks, on prom-client (an optional peer dependency, loaded only when a
 * factory is given `metrics`). One set of metrics per registry: a second router on the same
 * registry reuses the first one's, so an app may mount several without "already registered".
 */
import { createRequire } from 'node:module';
import type * as PromClientModule from 'prom-client';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { InvalidOptionsError } from '../errors.js';
import type { Instrumentation } from './hooks.js';
import * as label from './labels.js';
import type { StoreView } from './store-view.js';
import { within } from './timeout.js';

type PromClient = typeof PromClientModule;
type Require = (id: string) => unknown;

const defaultRequire: Require = createRequire(import.meta.url);

/** Seconds; handlers may run up to `handlerTimeoutMs` (50 s by default), hence the long tail. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Every metric this package registers, with its labels (docs/observability.md describes each). */
export const METRIC_DEFINITIONS = {
  requests: { name: 'marketplace_requests_total', type: 'counter', labelNames: ['route', 'method', 'status', 'code'], help: 'Answered provider requests, by route pattern, method, status and error code ("" on success).' },
  requestDuration: { name: 'marketplace_request_duration_seconds', type: 'histogram', labelNames: ['route', 'method'], help: 'Time to answer a provider request, in seconds.' },
  signatureFailures: { name: 'marketplace_signature_failures_total', type: 'counter', labelNames: ['code'], help: 'Requests refused by signature verification, by error code.' },
  handlerDuration: { name: 'marketplace_handler_duration_seconds', type: 'histogram', labelNames: ['operation', 'outcome'], help: 'Time spent in provider handlers, by operation and outcome (done, accepted, refused, failed).' },
  operationsPending: { name: 'marketplace_operations_pending', type: 'gauge', labelNames: [], help: 'Long-running (202) operations awaiting completion, read from the store at scrape time.' },
  deliveries: { name: 'marketplace_outbox_deliveries_total', type: 'counter', labelNames: ['outcome'], help: 'Callback delivery attempts, by outcome (delivered, retry, rejected, expired).' },
  outboxPending: { name: 'marketplace_outbox_pending', type: 'gauge', labelNames: [], help: 'Callback deliveries waiting to be delivered, read from the store at scrape time.' },
  outboxOldest: { name: 'marketplace_outbox_oldest_pending_seconds', type: 'gauge', labelNames: [], help: 'Age of the oldest pending callback delivery in seconds (0 when none), read from the store at scrape time.' },
  platformRequests: { name: 'marketplace_platform_requests_total', type: 'counter', labelNames: ['route', 'status'], help: 'Answered platform-side requests, by route pattern and status.' },
  events: { name: 'marketplace_events_total', type: 'counter', labelNames: ['type', 'outcome'], help: 'Marketplace webhook events received, by type and outcome (processed, duplicate, ignored, refused, failed).' },
  oauthTokens: { name: 'marketplace_oauth_tokens_total', type: 'counter', labelNames: ['grant', 'outcome'], help: 'Token endpoint answers of the deprecated OAuth flow, by grant type and outcome (issued, refused).' },
} as const;

type Definitions = typeof METRIC_DEFINITIONS;
type Labels<K extends keyof Definitions> = Definitions[K]['labelNames'][number];

/** Where the scrape-time gauges read from: a store (or a getter, for a store built later) and its clock. */
export interface StoreSource {
  store: StoreView | (() => StoreView | undefined);
  now: () => number;
  /** How long one read may take before the store counts as unreadable for this scrape. */
  timeoutMs: number;
}

interface MetricSet {
  requests: Counter<Labels<'requests'>>;
  requestDuration: Histogram<Labels<'requestDuration'>>;
  signatureFailures: Counter<Labels<'signatureFailures'>>;
  handlerDuration: Histogram<Labels<'handlerDuration'>>;
  deliveries: Counter<Labels<'deliveries'>>;
  platformRequests: Counter<Labels<'platformRequests'>>;
  events: Counter<Labels<'events'>>;
  oauthTokens: Counter<Labels<'oauthTokens'>>;
  sources: Set<StoreSource>;
}

const metricSets = new WeakMap<object, MetricSet>();

/** Loads prom-client, or explains how to get it. `load` is the module loader (a seam for tests). */
export function loadPromClient(factory: string, load: Require = defaultRequire): PromClient {
  try {
    return load('prom-client') as PromClient;
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'MODULE_NOT_FOUND') throw err;
    throw new InvalidOptionsError(`${factory}: option "metrics" needs prom-client, an optional peer dependency: run "npm install prom-client"`);
  }
}

/**
 * Duck-typed rather than `instanceof`: an app and this package may each resolve their own copy of
 * prom-client, and a registry of either works.
 */
export function isRegistry(value: unknown): value is Registry {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return ['registerMetric', 'getSingleMetric', 'metrics', 'getMetricsAsJSON'].every((m) => typeof candidate[m] === 'function');
}

/** The metrics of this package on `registry`, registered on first use and shared after. */
export function metricsFor(factory: string, client: PromClient, registry: unknown): MetricSet {
  if (!isRegistry(registry)) {
    throw new InvalidOptionsError(`${factory}: option "metrics.registry" must be a prom-client Registry (e.g. new Registry() or the default "register" of prom-client)`);
  }
  const known = metricSets.get(registry);
  if (known !== undefined) return known;
  for (const def of Object.values(METRIC_DEFINITIONS)) {
    if (registry.getSingleMetric(def.name) !== undefined) {
      throw new InvalidOptionsError(`${factory}: the registry already has a metric named ${def.name} that this package did not register; give the router a registry of its own`);
    }
  }
  const sources = new Set<StoreSource>();
  const registers = [registry];
  const counter = <K extends keyof Definitions>(key: K) => {
    const { name, help, labelNames } = METRIC_DEFINITIONS[key];
    return new client.Counter<Labels<K>>({ name, help, labelNames: labelNames, registers });
  };
  const histogram = <K extends keyof Definitions>(key: K) => {
    const { name, help, labelNames } = METRIC_DEFINITIONS[key];
    return new client.Histogram<Labels<K>>({ name, help, labelNames: labelNames, buckets: DURATION_BUCKETS, registers });
  };
  const readings = scrapeReader(sources);
  const gauge = (key: 'operationsPending' | 'outboxPending' | 'outboxOldest', read: (r: Readings) => number) => {
    const { name, help } = METRIC_DEFINITIONS[key];
    const metric: Gauge = new client.Gauge({ name, help, registers, collect: async () => metric.set(read(await readings())) });
    return metric;
  };
  const set: MetricSet = {
    requests: counter('requests'),
    requestDuration: histogram('requestDuration'),
    signatureFailures: counter('signatureFailures'),
    handlerDuration: histogram('handlerDuration'),
    deliveries: counter('deliveries'),
    platformRequests: counter('platformRequests'),
    events: counter('events'),
    oauthTokens: counter('oauthTokens'),
    sources,
  };
  gauge('operationsPending', (r) => r.operationsPending);
  gauge('outboxPending', (r) => r.outboxPending);
  gauge('outboxOldest', (r) => r.outboxOldestSeconds);
  metricSets.set(registry, set);
  return set;
}

interface Readings {
  operationsPending: number;
  outboxPending: number;
  outboxOldestSeconds: number;
}

/**
 * Reads the store-backed gauges once per scrape: prom-client collects every metric of a scrape at
 * once, so the three gauges share one in-flight read instead of querying the store three times.
 *
 * Several routers may share a registry: their distinct stores are summed (the oldest delivery is the
 * oldest of all). A store that cannot be read in time (closed, or the database down) is left out; when
 * none can be read the gauges are NaN, so that an alert on them does not see a reassuring zero.
 */
function scrapeReader(sources: Set<StoreSource>): () => Promise<Readings> {
  let inFlight: Promise<Readings> | undefined;
  async function read(): Promise<Readings> {
    const seen = new Set<StoreView>();
    let operations: number | undefined;
    let pending: number | undefined;
    let oldest: number | undefined;
    let anyOutbox = false;
    for (const source of sources) {
      const store = typeof source.store === 'function' ? source.store() : source.store;
      if (store === undefined || seen.has(store)) continue;
      seen.add(store);
      const read = <T>(fn: (() => Promise<T>) | undefined) => (fn === undefined ? Promise.resolve(undefined) : within(fn.call(store), source.timeoutMs));
      const [count, stats] = await Promise.allSettled([read(store.countPendingOperations), read(store.outboxStats)]);
      if (count.status === 'fulfilled' && count.value !== undefined) operations = (operations ?? 0) + count.value;
      if (stats.status === 'fulfilled' && stats.value !== undefined) {
        anyOutbox = true;
        pending = (pending ?? 0) + stats.value.pending;
        const created = stats.value.oldestPendingCreatedAt;
        if (created !== undefined) oldest = Math.max(oldest ?? 0, Math.max(0, (source.now() - created) / 1000));
      }
    }
    return {
      operationsPending: operations ?? Number.NaN,
      outboxPending: pending ?? Number.NaN,
      outboxOldestSeconds: anyOutbox ? (oldest ?? 0) : Number.NaN,
    };
  }
  return () => {
    inFlight ??= read().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
}

/** The metric half of {@link Instrumentation}: every label value goes through ./labels.ts first. */
export function metricHooks(set: MetricSet): Omit<Instrumentation, 'span'> {
  return {
    request: ({ route, method, status, code, seconds }) => {
      const r = label.providerRoute(route);
      const m = label.method(method);
      set.requests.inc({ route: r, method: m, status: label.status(status), code: label.errorCode(code) });
      if (validSeconds(seconds)) set.requestDuration.observe({ route: r, method: m }, seconds);
    },
    signatureFailure: (code) => set.signatureFailures.inc({ code: label.errorCode(code) }),
    handler: ({ operation, outcome, seconds }) => {
      if (validSeconds(seconds)) set.handlerDuration.observe({ operation: label.operation(operation), outcome: label.handlerOutcome(outcome) }, seconds);
    },
    delivery: (outcome) => set.deliveries.inc({ outcome: label.deliveryOutcome(outcome) }),
    platformRequest: ({ route, status }) => set.platformRequests.inc({ route: label.patternRoute(route), status: label.status(status) }),
    event: ({ type, outcome }) => set.events.inc({ type: label.eventType(type), outcome: label.eventOutcome(outcome) }),
    oauthToken: ({ grant, outcome }) => set.oauthTokens.inc({ grant: label.grant(grant), outcome: label.tokenOutcome(outcome) }),
  };
}

/** prom-client throws on a non-number; a hook must never throw into the request it measures. */
function validSeconds(seconds: number): boolean {
  return Number.isFinite(seconds) && seconds >= 0;
}
