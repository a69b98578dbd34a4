/**
 * The one place where the library reports what it does to metrics and tracing. The core (router,
 * operation engine, outbox, platform routers) calls these hooks; `src/observability/` implements
 * them with prom-client and @opentelemetry/api when the host app asks for them, and the default
 * does nothing, so a provider that wants neither pays for neither.
 *
 * Every label value passed here is low-cardinality by construction: route patterns, methods,
 * statuses, error codes, operation kinds and outcomes. Never an id, a token or a credential value
 * (span attributes may carry entity and callback ids; spans are not aggregated).
 */
import type { OperationKind } from '../domain/records.js';

/** How a handler call ended, for `marketplace_handler_duration_seconds{outcome}`. */
export type HandlerOutcome = 'done' | 'accepted' | 'refused' | 'failed';
/** How one callback delivery attempt ended, for `marketplace_outbox_deliveries_total{outcome}`. */
export type DeliveryOutcome = 'delivered' | 'retry' | 'rejected' | 'expired';
/** How one webhook event delivery ended, for `marketplace_events_total{outcome}`. */
export type EventOutcome = 'processed' | 'duplicate' | 'ignored' | 'refused' | 'failed';

/** The spans the library opens (children of the app's active HTTP span when there is one). */
export type SpanName =
  | 'marketplace.verify'
  | 'marketplace.operation'
  | 'marketplace.handler'
  | 'marketplace.store.commit'
  | 'marketplace.callback.send';

export type SpanAttributes = Readonly<Record<string, string | number | boolean | undefined>>;

export interface Instrumentation {
  /** One answered provider request. `route` is the route pattern (`/v1/resources/:id`), never a raw path; `code` is `''` on success. */
  request(event: { route: string; method: string; status: number; code: string; seconds: number }): void;
  /** A refused signature, by error code. */
  signatureFailure(code: string): void;
  /** One handler call. `refused` is a MarketplaceError with a 4xx status; `failed` anything else thrown. */
  handler(event: { operation: OperationKind; outcome: HandlerOutcome; seconds: number }): void;
  /** One callback delivery attempt's result. */
  delivery(outcome: DeliveryOutcome): void;
  /** One platform-side request (`route` a pattern). */
  platformRequest(event: { route: string; status: number }): void;
  /** One webhook event delivery. `type` is the event type when it is one the receiver knows, else `other`. */
  event(event: { type: string; outcome: EventOutcome }): void;
  /** One token endpoint answer of the deprecated OAuth flow. */
  oauthToken(event: { grant: string; outcome: 'issued' | 'refused' }): void;
  /**
   * Runs `fn` inside a span. Errors thrown by `fn` are recorded on the span (with their `code` when
   * they carry one) and rethrown unchanged.
   */
  span<T>(name: SpanName, attributes: SpanAttributes, fn: () => Promise<T>): Promise<T>;
}

/** The default: no metric, no span, no cost beyond a function call. */
export const noInstrumentation: Instrumentation = Object.freeze({
  request: () => undefined,
  signatureFailure: () => undefined,
  handler: () => undefined,
  delivery: () => undefined,
  platformRequest: () => undefined,
  event: () => undefined,
  oauthToken: () => undefined,
  span: <T>(_name: SpanName, _attributes: SpanAttributes, fn: () => Promise<T>): Promise<T> => fn(),
});
