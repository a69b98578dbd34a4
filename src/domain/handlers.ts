import type { Logger } from 'pino';
import type { CredentialRecord, CredentialValues, Features, ResourceRecord } from './records.js';

const ACCEPTED = Symbol.for('embedded-marketplace.accepted');

/** A handler's answer that the operation continues in the background (HTTP 202 + callback later). */
export interface Accepted {
  readonly [ACCEPTED]: true;
  readonly message: string;
}

/**
 * Return this from a handler when the work takes longer than the marketplace waits (60 s): the
 * router answers 202 with `message`, keeps the operation pending in the store, and you finish it
 * later with `router.complete(...)` (or `context.complete(...)`), which sends the callback.
 *
 * @example
 * ```ts
 * async provision(request, context) {
 *   queue.push(request.id);
 *   return accepted("We're racking servers");
 * }
 * ```
 */
export function accepted(message = 'The operation is in progress'): Accepted {
  return { [ACCEPTED]: true, message };
}

export function isAccepted(value: unknown): value is Accepted {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[ACCEPTED] === true;
}

/** What a handler may answer for success: a message, an object with one, or nothing (a default message). */
export type MessageResult = string | { message?: string } | void | undefined;

/** The outcome of a long-running operation, reported with `complete`. */
export type Completion =
  | { state: 'done'; message?: string; credentials?: CredentialValues }
  | { state: 'error'; message: string };

/** Given to every handler. */
export interface HandlerContext {
  /** X-Callback-ID when the marketplace sent one (for your logs). */
  callbackId: string | undefined;
  /** The request's id from pino-http (`req.id`) when the app mounts it; its log lines carry it as `reqId`. */
  reqId?: string | undefined;
  /** A child logger bound to the operation (entity, id, callback id). Never log credential values. */
  logger: Logger;
  /**
   * Finish this operation later when the handler returned `accepted(...)`. Equivalent to
   * `router.complete(target, completion)`.
   */
  complete(completion: Completion): Promise<void>;
}

export interface ProvisionRequest {
  id: string;
  product: string;
  plan: string;
  region: string;
  features: Features;
  /** The whole request body, unknown fields included (null prototype, never polluted). */
  body: Readonly<Record<string, unknown>>;
}

export interface ChangePlanRequest {
  id: string;
  /** The resource as stored before the change. */
  resource: ResourceRecord;
  plan: string;
  /** New features for a custom plan, when the marketplace sent them. */
  features: Features | undefined;
}

export interface DeprovisionRequest {
  id: string;
  resource: ResourceRecord;
  /** Its credential sets, which are deprovisioned with it: revoke them too. */
  credentials: CredentialRecord[];
}

export interface ProvisionCredentialsRequest {
  id: string;
  resourceId: string;
  resource: ResourceRecord;
}

export interface DeprovisionCredentialsRequest {
  id: string;
  resourceId: string;
  credential: CredentialRecord;
}

export interface MeasuresRequest {
  resource: ResourceRecord;
  /** Inclusive. */
  periodStart: Date;
  /** Exclusive. */
  periodEnd: Date;
}

/** What `provisionCredentials` answers: the credential set (keys like `DATABASE_URL`). */
export interface CredentialsResult {
  credentials: CredentialValues;
  message?: string;
}

/**
 * Your business logic. The router calls each at most once per operation (identical repeats and
 * concurrent duplicates are answered from the store) and persists the outcome. Throw a
 * `MarketplaceError` (e.g. `BadRequestError`) to refuse; any other throw answers 500 and leaves the
 * operation retryable.
 */
export interface ProviderHandlers {
  provision(request: ProvisionRequest, context: HandlerContext): Promise<MessageResult | Accepted> | MessageResult | Accepted;
  changePlan(request: ChangePlanRequest, context: HandlerContext): Promise<MessageResult | Accepted> | MessageResult | Accepted;
  deprovision(request: DeprovisionRequest, context: HandlerContext): Promise<MessageResult | Accepted> | MessageResult | Accepted;
  provisionCredentials(request: ProvisionCredentialsRequest, context: HandlerContext): Promise<CredentialsResult | Accepted> | CredentialsResult | Accepted;
  deprovisionCredentials(request: DeprovisionCredentialsRequest, context: HandlerContext): Promise<MessageResult | Accepted> | MessageResult | Accepted;
  /**
   * Usage totals by feature for `[periodStart, periodEnd)`, integers. Return `undefined`, `null`
   * or `{}` when there is no data yet (answers 204). Leave it out to answer from the usage ledger
   * (`router.recordUsage`).
   */
  measures?(request: MeasuresRequest, context: Omit<HandlerContext, 'complete'>): Promise<Record<string, number> | null | undefined> | Record<string, number> | null | undefined;
}

/** Product → its plans and regions. Regions default to `['all::global']`. */
export type Catalog = Record<string, { plans: readonly string[]; regions?: readonly string[] }>;

/** Checked before any handler runs; throw a BadRequestError to refuse with 400. */
export type ValidateHook = (input: { operation: 'provision' | 'changePlan'; id: string; product: string; plan: string; region: string; features: Features | undefined }) => void | Promise<void>;
