/**
 * Label values are cut down to small known sets here, at the last step before prom-client, so that
 * no caller mistake can put an id, a token or a credential value into a time series (each would be
 * a leak and a new series per request). Whatever does not fit a set becomes `other`.
 */
import type { DeliveryOutcome, EventOutcome, HandlerOutcome } from './hooks.js';

const OTHER = 'other';

/** The provider routes of the interface; anything else (an unmatched path, a raw path) is `other`. */
const PROVIDER_ROUTES: ReadonlySet<string> = new Set(['/v1/resources/:id', '/v1/resources/:id/measures', '/v1/credentials/:id', '/v1/sso']);
const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const OPERATIONS: ReadonlySet<string> = new Set(['provision', 'changePlan', 'deprovision', 'provisionCredentials', 'deprovisionCredentials']);
const HANDLER_OUTCOMES: ReadonlySet<HandlerOutcome> = new Set(['done', 'accepted', 'refused', 'failed']);
const DELIVERY_OUTCOMES: ReadonlySet<DeliveryOutcome> = new Set(['delivered', 'retry', 'rejected', 'expired']);
const EVENT_OUTCOMES: ReadonlySet<EventOutcome> = new Set(['processed', 'duplicate', 'ignored', 'refused', 'failed']);
const EVENT_TYPES: ReadonlySet<string> = new Set(['resource:provisioned', 'resource:deprovisioned']);
const GRANTS: ReadonlySet<string> = new Set(['authorization_code', 'refresh_token', 'client_credentials']);

/** A provider route pattern, or `other`. */
export function providerRoute(route: string): string {
  return PROVIDER_ROUTES.has(route) ? route : OTHER;
}

/**
 * A platform route pattern (their paths are configurable, so no fixed set): every segment must be a
 * `:param`, a version (`v1`) or a word without digits, which ids, tokens and secrets never are in
 * practice; anything else makes the whole route `other`.
 */
export function patternRoute(route: string): string {
  if (route.length === 0 || route.length > 96 || !route.startsWith('/')) return OTHER;
  const segments = route.slice(1).split('/');
  const ok = route === '/' || segments.every((segment) => /^:[A-Za-z_]\w{0,31}$/.test(segment) || /^v\d{1,2}$/.test(segment)
    || /^[a-z][a-z_.-]{0,31}$/.test(segment));
  return ok ? route : OTHER;
}

export function method(value: string): string {
  const upper = value.toUpperCase();
  return METHODS.has(upper) ? upper : OTHER;
}

export function status(value: number): string {
  return Number.isInteger(value) && value >= 100 && value <= 599 ? String(value) : OTHER;
}

/** An error code of the package (`ERR_…`), `''` for success, else `other`. */
export function errorCode(value: string): string {
  return value === '' || /^ERR_[A-Z0-9_]{1,48}$/.test(value) ? value : OTHER;
}

export function operation(value: string): string {
  return OPERATIONS.has(value) ? value : OTHER;
}

export function handlerOutcome(value: string): string {
  return HANDLER_OUTCOMES.has(value as HandlerOutcome) ? value : OTHER;
}

export function deliveryOutcome(value: string): string {
  return DELIVERY_OUTCOMES.has(value as DeliveryOutcome) ? value : OTHER;
}

export function eventOutcome(value: string): string {
  return EVENT_OUTCOMES.has(value as EventOutcome) ? value : OTHER;
}

/**
 * The event types of the interface. The header is the sender's to choose, so an unknown type is
 * `other`, never echoed (a caller could otherwise create a series per request).
 */
export function eventType(value: string): string {
  return EVENT_TYPES.has(value) ? value : OTHER;
}

export function grant(value: string): string {
  return GRANTS.has(value) ? value : OTHER;
}

export function tokenOutcome(value: string): string {
  return value === 'issued' || value === 'refused' ? value : OTHER;
}
