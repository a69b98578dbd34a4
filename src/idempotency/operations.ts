import { BadRequestError, ConflictError, InternalError, NotFoundError, SignatureError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import type {
  CallbackPayload,
  CredentialRecord,
  EntityKind,
  EntityReads,
  EntitySnapshot,
  Features,
  Mutation,
  OperationKind,
  OperationRequest,
  ResourceRecord,
} from '../store/types.js';
import {
  checkCredentialValues,
  cleanFeatures,
  featuresFingerprint,
  sameFeatures,
  validateChangePlan,
  validateCredential,
  validateProvision,
} from '../domain/schemas.js';
import { isAccepted, type Catalog, type HandlerContext, type ProviderHandlers, type ValidateHook } from '../domain/handlers.js';
import { operationKey } from '../domain/records.js';

/**
 * The operation table: everything that makes one kind of state-changing request what it is, in one
 * descriptor per kind, with no HTTP in it. The engine (engine.ts) drives every descriptor the same
 * way, for a request and for `complete()`:
 *
 *   prepare (schema, catalog, hook, callback headers) → claim (the store reads the snapshot) →
 *   decide (an answer, or the entity to act on) → the handler → settle (the mutation, the answer,
 *   the callback payload) → commit.
 */

/** An HTTP answer, rendered as is by the router. */
export interface Answer {
  status: number;
  body?: unknown;
}

/** A request as the router hands it over: HTTP already mapped to plain data. */
export interface OperationCall {
  kind: OperationKind;
  /** The id in the path (already checked against the id pattern). */
  id: string;
  /** The parsed JSON body (`undefined` for DELETE). */
  body: unknown;
  /** X-Callback-ID and X-Callback-URL as sent, once each. */
  callbackId: string | undefined;
  callbackUrl: string | undefined;
  /** The headers the verified signature covers (lower case). */
  signedHeaders: readonly string[];
  /** The request's own signature: a signed request executed once answers the same when sent again. */
  requestId: string | undefined;
  /** The app's id for the request (pino-http's `req.id`), handed to the handler for its logs. */
  reqId?: string | undefined;
}

/** What validation needs besides the request. */
export interface TableEnv {
  catalog: Catalog | undefined;
  validate: ValidateHook | undefined;
  /** The connector's X-Callback-URL check; undefined without a connector (no callback is ever sent then). */
  checkCallbackUrl: ((url: string, callbackId: string | undefined) => { allowed: true } | { allowed: false; reason: string }) | undefined;
}

/** A validated request, ready for the engine. */
export interface PreparedOperation {
  kind: OperationKind;
  key: string;
  entity: EntityKind;
  targetId: string;
  /** Credential PUT: the body's resource id (see ClaimInput.parentId). */
  parentId: string | undefined;
  fingerprint: string;
  request: OperationRequest;
  callbackId: string | undefined;
  callbackUrl: string | undefined;
  requestId: string | undefined;
  /** The app's id for the request (pino-http's `req.id`), for the handler's logs. Never stored. */
  reqId?: string | undefined;
  /** The whole request body, unknown fields included: the provision handler sees it. Never stored. */
  body: Readonly<Record<string, unknown>>;
}

/** The result of `decide`: the final answer, or the entity the handler is given (read by the claim). */
export type Decision = { type: 'answer'; answer: Answer } | { type: 'proceed'; entity: Entity };

/** What a handler acts on: whatever `decide` read from the claim's snapshot. */
export interface Entity {
  resource?: ResourceRecord;
  credential?: CredentialRecord;
  credentials?: CredentialRecord[];
}

/** A finished operation: what to commit, what to answer and what to report by callback. */
export interface Settled {
  mutation: Mutation;
  answer: Answer;
  payload: CallbackPayload;
}

/** A handler's success value, or a completion's, reduced to what settling needs. */
export interface Outcome {
  message: string | undefined;
  credentials?: unknown;
}

/**
 * What the claim rule (claim-rule.ts) and the stores need to know of a kind, and nothing else: its
 * entity, where a credential operation's parent comes from, and whether it keeps the resource's
 * children out (the parent/child exclusion).
 */
export interface ClaimShape {
  /** The entity acted on: the operation's key is `<entity>:<id>`. */
  entity: EntityKind;
  /**
   * Credential kinds: where the parent resource comes from: the request (`resourceId`, a PUT's
   * `resource_id`) or the stored credential set (a DELETE).
   */
  parent?: 'request' | 'stored';
  /**
   * Resource kinds that remove the resource's children (`deprovision`): while one is live, claims of
   * credential operations of that resource are held back (`blocked`, or `conflict` once it is
   * pending); it is itself held back while a credential operation of the resource runs; and its
   * claim reads every credential set of the resource.
   */
  excludesChildren?: boolean;
}

/** What `prepare` makes of a call. */
interface Prepared<R extends OperationRequest> {
  targetId: string;
  parentId?: string;
  fingerprint: string;
  request: R;
}

interface Descriptor<R extends OperationRequest> {
  /** What the claim rule needs of this kind (see ClaimShape); `claim.entity` is the entity acted on. */
  claim: ClaimShape;
  /** The message answered when the handler gives none. */
  defaultMessage: string;
  /** Synchronous unless the `validate` hook has a say (its promise is awaited then): most requests await nothing here. */
  prepare(call: OperationCall, env: TableEnv): Prepared<R> | Promise<Prepared<R>>;
  /** Runs under the claim, on what the claim read: an answer (replay, 404, 409), or proceed. May throw a MarketplaceError. */
  decide(targetId: string, request: R, snapshot: EntitySnapshot, env: TableEnv): Promise<Decision> | Decision;
  /** Calls the provider's handler with the entity `decide` read. */
  invoke(handlers: ProviderHandlers, operation: { targetId: string; request: R; body: Readonly<Record<string, unknown>> }, entity: Entity, context: HandlerContext): Promise<unknown>;
  settle(targetId: string, request: R, entity: Entity, outcome: Outcome, now: number, logger: Logger): Settled;
  /** For `complete()`: the entity `settle` needs, read afresh (the operation is still held). */
  reload?(reads: EntityReads, targetId: string): Promise<Entity>;
}

const proceed = (entity: Entity): Decision => ({ type: 'proceed', entity });
const answer = (status: number, body?: unknown): Decision => ({ type: 'answer', answer: body === undefined ? { status } : { status, body } });

function sameId(path: string, body: { id: string }): void {
  if (body.id !== path) throw new BadRequestError('Body id does not match the id in the path', 'ERR_ID_MISMATCH');
}

function refuse(message: string, code: 'ERR_UNKNOWN_PRODUCT' | 'ERR_UNKNOWN_PLAN' | 'ERR_UNKNOWN_REGION'): never {
  throw new BadRequestError(message, code);
}

/**
 * Catalog and hook checks shared by provisioning and plan changes: a catalog refusal throws, and the
 * `validate` hook's promise is returned when there is a hook (undefined otherwise, so that the common
 * case awaits nothing). A refusal, or a hook that throws, throws synchronously: `prepare` passes it
 * on and the engine's `handle` answers it like a rejection; `decide` is async, so there it becomes one.
 */
function checkOffer(env: TableEnv, operation: 'provision' | 'changePlan', id: string, product: string, plan: string, region: string, features: Features | undefined): Promise<void> | undefined {
  if (env.catalog !== undefined) {
    const entry = Object.prototype.hasOwnProperty.call(env.catalog, product) ? env.catalog[product] : undefined;
    if (entry === undefined) refuse(`Unknown product ${product}`, 'ERR_UNKNOWN_PRODUCT');
    if (!entry.plans.includes(plan)) refuse(`Unknown plan ${plan} for product ${product}`, 'ERR_UNKNOWN_PLAN');
    if (!(entry.regions ?? ['all::global']).includes(region)) refuse(`Unknown region ${region} for product ${product}`, 'ERR_UNKNOWN_REGION');
  }
  if (env.validate === undefined) return undefined;
  const verdict: unknown = env.validate({ operation, id, product, plan, region, features });
  return Promise.resolve(verdict).then(() => undefined);
}

const provision: Descriptor<Extract<OperationRequest, { kind: 'provision' }>> = {
  claim: { entity: 'resource' },
  defaultMessage: 'Resource provisioned',
  prepare(call, env) {
    const body = validateProvision(call.body);
    sameId(call.id, body);
    const features = cleanFeatures(body.features);
    const offered = checkOffer(env, 'provision', call.id, body.product, body.plan, body.region, features);
    const prepared: Prepared<Extract<OperationRequest, { kind: 'provision' }>> = {
      targetId: call.id,
      // Section 3: the compared properties are product, plan and region; features are not.
      fingerprint: JSON.stringify(['provision', body.product, body.plan, body.region]),
      request: { kind: 'provision', product: body.product, plan: body.plan, region: body.region, features },
    };
    return offered === undefined ? prepared : offered.then(() => prepared);
  },
  decide(_id, request, snapshot) {
    const existing = snapshot.resource;
    if (existing === undefined) {
      // Ids are never reused: a PUT for a deprovisioned one is a replay of a captured request.
      if (snapshot.resourceDeleted) throw entityDeletedError('resource');
      return proceed({});
    }
    if (existing.product === request.product && existing.plan === request.plan && existing.region === request.region) {
      return answer(201, { message: existing.message });
    }
    throw new ConflictError('Resource already exists with different properties');
  },
  invoke: (handlers, { targetId: id, request, body }, _entity, context) =>
    Promise.resolve(handlers.provision({ id, product: request.product, plan: request.plan, region: request.region, features: request.features, body }, context)),
  settle(id, request, _entity, outcome, now) {
    const message = outcome.message ?? this.defaultMessage;
    const resource: ResourceRecord = { id, product: request.product, plan: request.plan, region: request.region, features: request.features, message, createdAt: now, updatedAt: now };
    return { mutation: { type: 'putResource', resource }, answer: { status: 201, body: { message } }, payload: { state: 'done', message } };
  },
};

const changePlan: Descriptor<Extract<OperationRequest, { kind: 'changePlan' }>> = {
  claim: { entity: 'resource' },
  defaultMessage: 'Plan changed',
  prepare(call) {
    const body = validateChangePlan(call.body);
    const features = body.features === undefined ? undefined : cleanFeatures(body.features);
    return {
      targetId: call.id,
      fingerprint: JSON.stringify(['changePlan', body.plan, featuresFingerprint(features)]),
      request: features === undefined ? { kind: 'changePlan', plan: body.plan } : { kind: 'changePlan', plan: body.plan, features },
    };
  },
  async decide(id, request, snapshot, env) {
    const resource = snapshot.resource;
    if (resource === undefined) throw new NotFoundError('Resource not found');
    if (resource.plan === request.plan && (request.features === undefined || sameFeatures(resource.features, request.features))) {
      return answer(200, { message: `Resource is already on plan ${request.plan}` });
    }
    // The catalog and hook need the resource's product and region, which only the snapshot has.
    const offered = checkOffer(env, 'changePlan', id, resource.product, request.plan, resource.region, request.features);
    if (offered !== undefined) await offered;
    return proceed({ resource });
  },
  invoke: (handlers, { targetId: id, request }, entity, context) =>
    Promise.resolve(handlers.changePlan({ id, resource: entity.resource!, plan: request.plan, features: request.features }, context)),
  async reload(reads, id) {
    const resource = await reads.getResource(id);
    if (resource === undefined) throw new NotFoundError('Resource not found');
    return { resource };
  },
  settle(_id, request, entity, outcome, now) {
    const message = outcome.message ?? this.defaultMessage;
    const resource = entity.resource!;
    return {
      mutation: { type: 'putResource', resource: { ...resource, plan: request.plan, features: request.features ?? resource.features, updatedAt: now } },
      answer: { status: 200, body: { message } },
      payload: { state: 'done', message },
    };
  },
};

const deprovision: Descriptor<Extract<OperationRequest, { kind: 'deprovision' }>> = {
  claim: { entity: 'resource', excludesChildren: true },
  defaultMessage: 'Resource deprovisioned',
  prepare(call) {
    return { targetId: call.id, fingerprint: '["deprovision"]', request: { kind: 'deprovision' } };
  },
  decide(_id, _request, snapshot) {
    if (snapshot.resource === undefined) throw new NotFoundError('Resource not found');
    // Every credential set as it is under the claim: no credential operation runs now (the store
    // blocks them), so none can appear or vanish before the commit.
    return proceed({ resource: snapshot.resource, credentials: snapshot.credentials });
  },
  invoke: (handlers, { targetId: id }, entity, context) =>
    Promise.resolve(handlers.deprovision({ id, resource: entity.resource!, credentials: entity.credentials ?? [] }, context)),
  settle(id, _request, _entity, outcome, now) {
    return { mutation: { type: 'deleteResource', id, deletedAt: now }, answer: { status: 204 }, payload: { state: 'done', message: outcome.message ?? this.defaultMessage } };
  },
};

const provisionCredentials: Descriptor<Extract<OperationRequest, { kind: 'provisionCredentials' }>> = {
  claim: { entity: 'credential', parent: 'request' },
  defaultMessage: 'Credentials provisioned',
  prepare(call) {
    const body = validateCredential(call.body);
    sameId(call.id, body);
    return {
      targetId: call.id,
      parentId: body.resource_id,
      fingerprint: JSON.stringify(['provisionCredentials', body.resource_id]),
      request: { kind: 'provisionCredentials', resourceId: body.resource_id },
    };
  },
  decide(_id, request, snapshot) {
    const existing = snapshot.credential;
    if (existing !== undefined) {
      if (existing.resourceId !== request.resourceId) throw new ConflictError('Credentials already exist for another resource');
      // The first answer again, values included: the marketplace may have lost it.
      return answer(201, { message: existing.message, credentials: existing.values });
    }
    // Section 7: an unknown resource answers 404, also when it was deprovisioned (with its credentials).
    if (snapshot.resource === undefined) throw new NotFoundError('Resource not found');
    if (snapshot.credentialDeleted) throw entityDeletedError('credential');
    return proceed({ resource: snapshot.resource });
  },
  invoke: (handlers, { targetId: id, request }, entity, context) =>
    Promise.resolve(handlers.provisionCredentials({ id, resourceId: request.resourceId, resource: entity.resource! }, context)),
  settle(id, request, _entity, outcome, now, logger) {
    const problem = checkCredentialValues(outcome.credentials);
    if (problem !== undefined) {
      // The provider's bug, not the marketplace's: 500 for the caller, the reason in the log (no values).
      logger.error({ credentialId: id, problem }, 'provisionCredentials returned an invalid credential set');
      throw new InternalError();
    }
    const message = outcome.message ?? this.defaultMessage;
    const values = { ...(outcome.credentials as Record<string, string>) };
    const credential: CredentialRecord = { id, resourceId: request.resourceId, values, message, createdAt: now };
    return {
      mutation: { type: 'putCredential', credential },
      answer: { status: 201, body: { message, credentials: values } },
      payload: { state: 'done', message, credentials: values },
    };
  },
};

const deprovisionCredentials: Descriptor<Extract<OperationRequest, { kind: 'deprovisionCredentials' }>> = {
  claim: { entity: 'credential', parent: 'stored' },
  defaultMessage: 'Credentials deprovisioned',
  prepare(call) {
    return { targetId: call.id, fingerprint: '["deprovisionCredentials"]', request: { kind: 'deprovisionCredentials' } };
  },
  decide(_id, _request, snapshot) {
    if (snapshot.credential === undefined) throw new NotFoundError('Credentials not found');
    return proceed({ credential: snapshot.credential });
  },
  invoke: (handlers, { targetId: id }, entity, context) =>
    Promise.resolve(handlers.deprovisionCredentials({ id, resourceId: entity.credential!.resourceId, credential: entity.credential! }, context)),
  settle(id, _request, _entity, outcome, now) {
    return { mutation: { type: 'deleteCredential', id, deletedAt: now }, answer: { status: 204 }, payload: { state: 'done', message: outcome.message ?? this.defaultMessage } };
  },
};

type AnyDescriptor = Descriptor<OperationRequest>;

/** The table itself: one descriptor per operation kind. */
export const OPERATIONS: Readonly<Record<OperationKind, AnyDescriptor>> = Object.freeze({
  provision: provision,
  changePlan: changePlan,
  deprovision: deprovision,
  provisionCredentials: provisionCredentials,
  deprovisionCredentials: deprovisionCredentials,
});

/**
 * The claim shape of a kind (see ClaimShape), for the claim rule and the stores.
 *
 * @example
 * ```ts
 * claimShape('deprovision'); // { entity: 'resource', excludesChildren: true }
 * ```
 */
export function claimShape(kind: OperationKind): ClaimShape {
  return OPERATIONS[kind].claim;
}

/**
 * The refusal of a PUT for a tombstoned id (ids are never reused, so it is a replay of a captured
 * request): from the claim's snapshot in `decide`, and from a commit that answered `tombstoned`.
 */
export function entityDeletedError(entity: EntityKind): ConflictError {
  return new ConflictError(
    entity === 'resource'
      ? 'Resource was deprovisioned; its id cannot be provisioned again'
      : 'Credentials were deprovisioned; their id cannot be provisioned again',
    'ERR_ENTITY_DELETED',
  );
}

/**
 * Validates a call (schema, catalog, hook, callback headers) into what the engine runs. A refusal
 * throws; the result is a promise only when the `validate` hook answered with one, so the common
 * request spends no microtask here.
 */
export function prepareOperation(call: OperationCall, env: TableEnv): PreparedOperation | Promise<PreparedOperation> {
  const descriptor = OPERATIONS[call.kind];
  const prepared = descriptor.prepare(call, env);
  const entity = descriptor.claim.entity;
  return prepared instanceof Promise ? prepared.then((done) => preparedOperation(call, env, entity, done)) : preparedOperation(call, env, entity, prepared);
}

function preparedOperation(call: OperationCall, env: TableEnv, entity: EntityKind, prepared: Prepared<OperationRequest>): PreparedOperation {
  checkCallbackHeaders(call, env);
  return {
    kind: call.kind,
    key: operationKey(entity, prepared.targetId),
    entity,
    targetId: prepared.targetId,
    parentId: prepared.parentId,
    fingerprint: prepared.fingerprint,
    request: prepared.request,
    callbackId: call.callbackId,
    callbackUrl: call.callbackUrl,
    requestId: call.requestId,
    reqId: call.reqId,
    body: typeof call.body === 'object' && call.body !== null ? (call.body as Record<string, unknown>) : {},
  };
}

function checkCallbackHeaders(call: OperationCall, env: TableEnv): void {
  const { callbackId, callbackUrl, signedHeaders } = call;
  // They decide where the outcome (credentials included) goes, so a replayed request must not be
  // able to add or swap them: the marketplace signs them whenever it sends them (section 5.2).
  if ((callbackId !== undefined && !signedHeaders.includes('x-callback-id')) || (callbackUrl !== undefined && !signedHeaders.includes('x-callback-url'))) {
    throw new SignatureError('ERR_REQUIRED_HEADER_UNSIGNED', 'X-Callback-ID and X-Callback-URL must be listed in X-Signed-Headers');
  }
  // Without a connector no callback is ever sent, so the URL is never dereferenced.
  if (callbackUrl !== undefined && env.checkCallbackUrl !== undefined) {
    const verdict = env.checkCallbackUrl(callbackUrl, callbackId);
    if (!verdict.allowed) throw new BadRequestError(verdict.reason, 'ERR_CALLBACK_URL_REFUSED');
  }
  if (callbackId !== undefined && !/^[A-Za-z0-9]{1,64}$/.test(callbackId)) throw new BadRequestError('Invalid X-Callback-ID', 'ERR_VALIDATION');
}

/**
 * A handler's (or a completion's) success value as an {@link Outcome}, or `accepted` passed through.
 * Blank messages fall back to the kind's default in `settle`.
 */
export function outcomeOf(kind: OperationKind, result: unknown): Outcome | 'accepted' {
  if (isAccepted(result)) return 'accepted';
  const text = (value: unknown): string | undefined => (typeof value === 'string' && value.trim().length > 0 ? value : undefined);
  if (typeof result === 'string') return { message: text(result) };
  if (typeof result !== 'object' || result === null) return { message: undefined };
  const record = result as { message?: unknown; credentials?: unknown };
  return kind === 'provisionCredentials' ? { message: text(record.message), credentials: record.credentials } : { message: text(record.message) };
}
