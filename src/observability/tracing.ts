/**
 * The tracing side of the hooks, on @opentelemetry/api (an optional peer dependency). The API is
 * looked for once per process; when it is absent `span` is the plain call of the default hooks.
 * When present, spans go to whatever tracer provider the app registered (none: the API's no-op
 * tracer, which costs little), as children of the active context, i.e. the app's HTTP span.
 */
import { createRequire } from 'node:module';
import type * as OtelApi from '@opentelemetry/api';
import { noInstrumentation, type Instrumentation, type SpanAttributes, type SpanName } from './hooks.js';

type Api = typeof OtelApi;

const TRACER_NAME = 'embedded-marketplace';
const require = createRequire(import.meta.url);
let api: Api | null | undefined;

/** The OpenTelemetry API when the app has it installed; looked for only once. */
function loadApi(): Api | null {
  if (api === undefined) {
    try {
      api = require('@opentelemetry/api') as Api;
    } catch {
      api = null;
    }
  }
  return api;
}

/** `entityId` → `marketplace.entity_id`: one namespace, the OpenTelemetry snake_case habit. */
function attributeName(key: string): string {
  return `marketplace.${key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
}

function toAttributes(attributes: SpanAttributes): OtelApi.Attributes {
  const out: OtelApi.Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (value !== undefined) out[attributeName(key)] = value;
  }
  return out;
}

/**
 * Records a thrown error on the span: the exception event, an ERROR status and, for the package's
 * own errors, their stable `code` (what dashboards group by). The message of a MarketplaceError is
 * safe by construction; other errors keep their name and message, as the logs do.
 */
function recordError(otel: Api, span: OtelApi.Span, err: unknown): void {
  const code = typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : undefined;
  if (err instanceof Error) span.recordException(err);
  if (code !== undefined) span.setAttributes({ 'marketplace.error.code': code, 'error.type': code });
  else span.setAttribute('error.type', err instanceof Error ? err.name : typeof err);
  span.setStatus({ code: otel.SpanStatusCode.ERROR, ...(code === undefined ? {} : { message: code }) });
}

/**
 * Whether a tracer provider is registered. Looked up per span, not once: the app may register its
 * provider after building the router. Without one the API would hand out a new ProxyTracer per span
 * and run `fn` in a non-recording span that records nothing; four of those per request cost more
 * than the rest of the hooks, so the span hook is then the plain call of the default hooks.
 */
function recording(otel: Api): boolean {
  const provider = otel.trace.getTracerProvider();
  return !(provider instanceof otel.ProxyTracerProvider && provider.getDelegateTracer(TRACER_NAME) === undefined);
}

// The span hooks made here, and how each tells whether it records right now.
const recorders = new WeakMap<Instrumentation['span'], () => boolean>();

/**
 * False when `span` is sure to be the plain call of `fn` right now (the default hooks, or ours with
 * no tracer provider registered): a hot path may then skip wrapping its work in a function and a
 * promise. Any other hook may record.
 */
export function spanMayRecord(span: Instrumentation['span']): boolean {
  if (span === noInstrumentation.span) return false;
  const check = recorders.get(span);
  return check === undefined || check();
}

/** The `span` hook over OpenTelemetry, or undefined when the API is not installed. */
export function tracingSpan(): Instrumentation['span'] | undefined {
  const otel = loadApi();
  if (otel === null) return undefined;
  const hook = <T>(name: SpanName, attributes: SpanAttributes, fn: () => Promise<T>): Promise<T> => {
    if (!recording(otel)) return fn();
    return otel.trace.getTracer(TRACER_NAME).startActiveSpan(name, { attributes: toAttributes(attributes) }, async (span) => {
      try {
        return await fn();
      } catch (err) {
        recordError(otel, span, err);
        throw err;
      } finally {
        span.end();
      }
    });
  };
  recorders.set(hook, () => recording(otel));
  return hook;
}
