import { noInstrumentation, type Instrumentation } from './hooks.js';
import { asOptionsObject, rejectUnknownKeys } from '../lib/options.js';
import { loadPromClient, metricHooks, metricsFor } from './metrics.js';
import { tracingSpan } from './tracing.js';
import type { StoreView } from './store-view.js';

export type { DeliveryOutcome, EventOutcome, HandlerOutcome, Instrumentation, SpanAttributes, SpanName } from './hooks.js';
export { noInstrumentation } from './hooks.js';
export type { StoreView, DeliverySummary, OutboxStats, StoreDiagnostics } from './store-view.js';

/** A scrape must answer within Prometheus's scrape timeout (10 s by default), store or not. */
const DEFAULT_READ_TIMEOUT_MS = 3000;

/**
 * The `metrics` option every factory takes (`marketplaceRouter`, `platformRouter`,
 * `marketplaceEvents`, `deprecatedOAuthRouter`): `{ registry }`, a prom-client `Registry`.
 *
 * @example
 * ```ts
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * app.use(marketplaceRouter({ handlers, store, metrics: { registry } }));
 * ```
 */
export interface MetricsOptions {
  /** A prom-client `Registry` (`new Registry()`, or prom-client's default `register`). */
  registry: unknown;
}

/** What a factory knows besides its options: where the scrape-time gauges read from. */
export interface InstrumentationContext {
  /**
   * The store behind `marketplace_operations_pending`, `marketplace_outbox_pending` and
   * `marketplace_outbox_oldest_pending_seconds`, or a getter for one built after the call.
   */
  store?: StoreView | (() => StoreView | undefined);
  /** The factory's clock, for the age of the oldest delivery. Default `Date.now`. */
  now?: () => number;
  /** How long a scrape waits for the store before reporting the gauges as NaN. Default 3000 ms. */
  readTimeoutMs?: number;
}

/**
 * Resolves a factory's `metrics` option (and the OpenTelemetry API when the app has it) into the
 * hooks the core calls. `factory` names the caller in option errors. Throws InvalidOptionsError when
 * `metrics` is not `{ registry }` with a prom-client Registry, or when prom-client is not installed.
 *
 * Metrics are registered once per registry: routers sharing one reuse them, and their stores are
 * all read at scrape time. Without `metrics` no metric exists; spans still go to OpenTelemetry when
 * its API is installed.
 *
 * @example
 * ```ts
 * const instrumentation = resolveInstrumentation('marketplaceRouter', options.metrics, { store: () => store, now });
 * ```
 */
export function resolveInstrumentation(factory: string, metrics: MetricsOptions | undefined, context: InstrumentationContext = {}): Instrumentation {
  const span = tracingSpan() ?? noInstrumentation.span;
  if (metrics === undefined) return span === noInstrumentation.span ? noInstrumentation : { ...noInstrumentation, span };
  const option = asOptionsObject(`${factory}: option "metrics"`, metrics);
  rejectUnknownKeys(`${factory}: option "metrics"`, option, ['registry']);
  const set = metricsFor(factory, loadPromClient(factory), option.registry);
  if (context.store !== undefined) set.sources.add({ store: context.store, now: context.now ?? Date.now, timeoutMs: context.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS });
  return Object.freeze({ ...metricHooks(set), span });
}
