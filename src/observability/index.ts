import { noInstrumentation, type Instrumentation } from './hooks.js';

export type { DeliveryOutcome, EventOutcome, HandlerOutcome, Instrumentation, SpanAttributes, SpanName } from './hooks.js';
export { noInstrumentation } from './hooks.js';

/**
 * The `metrics` option every factory takes (`marketplaceRouter`, `platformRouter`,
 * `marketplaceEvents`, `deprecatedOAuthRouter`): `{ registry }`, a prom-client `Registry`.
 */
export interface MetricsOptions {
  registry: unknown;
}

/**
 * Resolves a factory's `metrics` option (and the OpenTelemetry API when the app registered a
 * tracer provider) into the hooks the core calls. `factory` names the caller in option errors.
 *
 * Placeholder until the observability module lands: no metric, no span.
 */
export function resolveInstrumentation(_factory: string, _metrics: MetricsOptions | undefined): Instrumentation {
  return noInstrumentation;
}
