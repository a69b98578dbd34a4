/**
 * The one error family of the package. Every error the library raises on purpose is a
 * {@link MarketplaceError}: it carries a stable `code` to switch on, the HTTP `status` it maps to,
 * and a `message` that is safe to show to the caller (it never contains a secret). Detail that is
 * only for operators goes into `cause`, which is logged but never sent.
 *
 * @example
 * ```ts
 * import { BadRequestError } from 'embedded-marketplace/errors';
 * throw new BadRequestError('This plan cannot be changed once chosen');
 * ```
 */

/** Every stable error code the package emits. */
export type ErrorCode =
  // signature verification (401)
  | 'ERR_SIGNATURE_MISSING'
  | 'ERR_SIGNATURE_MALFORMED'
  | 'ERR_SIGNED_HEADERS_MISSING'
  | 'ERR_SIGNED_HEADERS_MALFORMED'
  | 'ERR_SIGNED_HEADER_ABSENT'
  | 'ERR_REQUIRED_HEADER_UNSIGNED'
  | 'ERR_DATE_MISSING'
  | 'ERR_DATE_MALFORMED'
  | 'ERR_DATE_STALE'
  | 'ERR_ENDORSEMENT_INVALID'
  | 'ERR_REQUEST_SIGNATURE_INVALID'
  | 'ERR_BODY_ALREADY_PARSED'
  // request problems
  | 'ERR_BAD_REQUEST'
  | 'ERR_VALIDATION'
  | 'ERR_UNKNOWN_PRODUCT'
  | 'ERR_UNKNOWN_PLAN'
  | 'ERR_UNKNOWN_REGION'
  | 'ERR_PLAN_CHANGE_REFUSED'
  | 'ERR_ID_MISMATCH'
  | 'ERR_CALLBACK_URL_REFUSED'
  | 'ERR_BODY_TOO_LARGE'
  /** 408: the body did not arrive within the body timeout (a slow or stalled sender). */
  | 'ERR_BODY_TIMEOUT'
  | 'ERR_UNSUPPORTED_MEDIA_TYPE'
  | 'ERR_UNAUTHORIZED'
  | 'ERR_FORBIDDEN'
  | 'ERR_NOT_FOUND'
  | 'ERR_CONFLICT'
  /** 409: another operation with other properties holds the entity (or its resource); wait for its outcome. */
  | 'ERR_OPERATION_CONFLICT'
  /** 503: the same operation is still running past the wait limit; retrying later is safe. */
  | 'ERR_OPERATION_IN_PROGRESS'
  /** 404: `complete()` found no pending operation for the target. */
  | 'ERR_OPERATION_NOT_PENDING'
  /** 409: a PUT for an id that was deprovisioned (ids are never reused, so it is a replay). */
  | 'ERR_ENTITY_DELETED'
  /** 409: `recordUsage` with a time inside a period whose answer is final (its end plus `usageGraceMs` has passed). */
  | 'ERR_USAGE_PERIOD_CLOSED'
  // the provider's or the library's side
  | 'ERR_INTERNAL'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_DECRYPTION_FAILED'
  | 'ERR_LEASE_LOST'
  | 'ERR_TIMEOUT'
  // connector client
  | 'ERR_CONNECTOR_UNREACHABLE'
  | 'ERR_CONNECTOR_RESPONSE'
  | 'ERR_CONNECTOR_AUTH'
  | 'ERR_CONNECTOR_INVALID_GRANT'
  // marketplace GraphQL client (platform side)
  | 'ERR_GRAPHQL'
  // sso
  | 'ERR_SSO_INVALID'
  | 'ERR_SSO_SESSION_MISSING'
  // options given to a factory
  | 'ERR_INVALID_OPTIONS';

export interface MarketplaceErrorOptions {
  /** Operator-only detail: logged, never sent in a response. */
  cause?: unknown;
}

/** Base of every error the package raises on purpose. */
export class MarketplaceError extends Error {
  /** A stable identifier for what went wrong; safe to switch on. */
  readonly code: ErrorCode;
  /** The HTTP status this error answers with. */
  readonly status: number;

  constructor(status: number, code: ErrorCode, message: string, options?: MarketplaceErrorOptions) {
    super(safeMessage(message), options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
  }

  /** The JSON body the interface expects for a non-2xx answer. */
  toJSON(): { message: string } {
    return { message: this.message };
  }
}

/** 401: the request's signature chain, headers or Date did not verify. */
export class SignatureError extends MarketplaceError {
  constructor(code: ErrorCode, message: string, options?: MarketplaceErrorOptions) {
    super(401, code, message, options);
  }
}

/** 400: the request is malformed or asks for something the provider refuses. */
export class BadRequestError extends MarketplaceError {
  constructor(message: string, code: ErrorCode = 'ERR_BAD_REQUEST', options?: MarketplaceErrorOptions) {
    super(400, code, message, options);
  }
}

/** 401 for anything but signatures (bearer tokens, SSO codes). */
export class UnauthorizedError extends MarketplaceError {
  constructor(message: string, code: ErrorCode = 'ERR_UNAUTHORIZED', options?: MarketplaceErrorOptions) {
    super(401, code, message, options);
  }
}

/** 403: authenticated, but not for this. */
export class ForbiddenError extends MarketplaceError {
  constructor(message: string, code: ErrorCode = 'ERR_FORBIDDEN', options?: MarketplaceErrorOptions) {
    super(403, code, message, options);
  }
}

/** 404: the entity does not exist (or no longer does). */
export class NotFoundError extends MarketplaceError {
  constructor(message: string, code: ErrorCode = 'ERR_NOT_FOUND', options?: MarketplaceErrorOptions) {
    super(404, code, message, options);
  }
}

/** 409: the entity exists with other properties, or another operation holds it. */
export class ConflictError extends MarketplaceError {
  constructor(message: string, code: ErrorCode = 'ERR_CONFLICT', options?: MarketplaceErrorOptions) {
    super(409, code, message, options);
  }
}

/** 413: the body is larger than the configured limit. */
export class PayloadTooLargeError extends MarketplaceError {
  constructor(message = 'Request body is too large', options?: MarketplaceErrorOptions) {
    super(413, 'ERR_BODY_TOO_LARGE', message, options);
  }
}

/** 408: the body did not arrive in time; the connection is closed after the answer. */
export class RequestTimeoutError extends MarketplaceError {
  constructor(message = 'Request body was not received in time', options?: MarketplaceErrorOptions) {
    super(408, 'ERR_BODY_TIMEOUT', message, options);
  }
}

/** 415: the body is not JSON. */
export class UnsupportedMediaTypeError extends MarketplaceError {
  constructor(message = 'Request body must be application/json', options?: MarketplaceErrorOptions) {
    super(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', message, options);
  }
}

/** 500: something unexpected; the message is deliberately generic. */
export class InternalError extends MarketplaceError {
  constructor(options?: MarketplaceErrorOptions) {
    super(500, 'ERR_INTERNAL', 'Internal error', options);
  }
}

/** 503: the store (or another dependency) is unavailable; retrying later is safe. */
export class ServiceUnavailableError extends MarketplaceError {
  constructor(message = 'Service temporarily unavailable, retry later', code: ErrorCode = 'ERR_STORE_UNAVAILABLE', options?: MarketplaceErrorOptions) {
    super(503, code, message, options);
  }
}

/**
 * The operation's lease passed to another process (this one stalled past it). Nothing was written;
 * retrying is safe, so it answers 503.
 */
export class LeaseLostError extends MarketplaceError {
  constructor(options?: MarketplaceErrorOptions) {
    super(503, 'ERR_LEASE_LOST', 'Operation was taken over by another worker, retry later', options);
  }
}

/**
 * `recordUsage` was given a time inside a closed period: a period's measures answer is final once
 * its end plus `usageGraceMs` (default 1 hour) has passed, so usage can no longer be added to it.
 * Nothing was recorded. Pass `{ late: 'current-period' }` to book such usage at the time of the
 * call instead (docs/usage.md).
 *
 * @example
 * ```ts
 * import { UsagePeriodClosedError } from 'embedded-marketplace';
 * try {
 *   await router.recordUsage(resourceId, 'requests', count, readingTime);
 * } catch (error) {
 *   if (!(error instanceof UsagePeriodClosedError)) throw error;
 *   await router.recordUsage(resourceId, 'requests', count, readingTime, { late: 'current-period' });
 * }
 * ```
 */
export class UsagePeriodClosedError extends MarketplaceError {
  /** The refused time (epoch ms). */
  readonly at: number;
  /** Usage earlier than this (epoch ms) was refused: every period ending by then is closed. */
  readonly closedBefore: number;
  constructor(at: number, closedBefore: number, options?: MarketplaceErrorOptions) {
    super(
      409,
      'ERR_USAGE_PERIOD_CLOSED',
      `Usage at ${new Date(at).toISOString()} falls in a closed period (usage before ${new Date(closedBefore).toISOString()} is final); pass { late: 'current-period' } to book it now`,
      options,
    );
    this.at = at;
    this.closedBefore = closedBefore;
  }
}

/** A call to the marketplace's connector failed (token endpoint, resource check, callback). */
export class ConnectorError extends MarketplaceError {
  /** The connector's HTTP status when it answered at all. */
  readonly upstreamStatus: number | undefined;
  constructor(code: ErrorCode, message: string, upstreamStatus?: number, options?: MarketplaceErrorOptions) {
    super(502, code, message, options);
    this.upstreamStatus = upstreamStatus;
  }
}

/**
 * Thrown by factories at construction when an option is missing, misspelled or of the wrong type.
 * A `TypeError` so that it reads as a programming error at start-up, never as a request failure.
 */
export class InvalidOptionsError extends TypeError {
  readonly code = 'ERR_INVALID_OPTIONS' as const;
  constructor(message: string) {
    super(message);
    this.name = 'InvalidOptionsError';
  }
}

export function isMarketplaceError(value: unknown): value is MarketplaceError {
  return value instanceof MarketplaceError;
}

const MIN_MESSAGE = 3;
const MAX_MESSAGE = 256;

/**
 * The interface bounds user-visible messages to 3..256 characters; enforce it at the one place
 * every error passes so no route can answer with an empty or oversized message.
 */
export function safeMessage(message: string): string {
  const text = typeof message === 'string' ? message.trim() : '';
  if (text.length < MIN_MESSAGE) return 'Request failed';
  if (text.length > MAX_MESSAGE) return `${text.slice(0, MAX_MESSAGE - 1)}…`;
  return text;
}
