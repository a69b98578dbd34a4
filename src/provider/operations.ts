import { BadRequestError, ConflictError, InternalError, NotFoundError } from '../errors.js';
import type { Answer, OperationSpec, RunOutcome } from '../idempotency/engine.js';
import type { Logger } from '../lib/logger.js';
import { entityDeletedError } from '../store/common.js';
import { operationKey, type CredentialRecord, type Features, type ResourceRecord, type Store } from '../store/types.js';
import { checkCredentialValues, featuresFingerprint, sameFeatures } from './schemas.js';
import { isAccepted, type Accepted, type HandlerContext, type MessageResult, type ProviderHandlers } from './types.js';

/** What every route's spec builder needs. */
export interface OperationDeps {
  store: Store;
  handlers: ProviderHandlers;
  now: () => number;
  logger: Logger;
  context: (target: { entity: 'resource' | 'credential'; id: string }, callbackId: string | undefined, logger: Logger) => HandlerContext;
}

interface CallbackHeaders {
  callbackId: string | undefined;
  callbackUrl: string | undefined;
}

const DEFAULT_MESSAGES = {
  provision: 'Resource provisioned',
  changePlan: 'Plan changed',
  deprovision: 'Resource deprovisioned',
  provisionCredentials: 'Credentials provisioned',
  deprovisionCredentials: 'Credentials deprovisioned',
} as const;

/** A handler's success value as a message, or `accepted` passed through. */
function messageOf(result: MessageResult | Accepted, fallback: string): string | Accepted {
  if (isAccepted(result)) return result;
  if (typeof result === 'string' && result.trim().length > 0) return result;
  if (typeof result === 'object' && result !== null && typeof result.message === 'string' && result.message.trim().length > 0) return result.message;
  return fallback;
}

function acceptedOr(result: string | Accepted, done: (message: string) => RunOutcome): RunOutcome {
  return isAccepted(result) ? { type: 'accepted', message: result.message } : done(result);
}

export function provisionSpec(
  deps: OperationDeps,
  input: { id: string; product: string; plan: string; region: string; features: Features; body: Readonly<Record<string, unknown>> },
  callback: CallbackHeaders,
  logger: Logger,
): OperationSpec {
  const { id, product, plan, region, features } = input;
  return {
    key: operationKey('resource', id),
    kind: 'provision',
    targetId: id,
    fingerprint: JSON.stringify(['provision', product, plan, region]),
    request: { kind: 'provision', product, plan, region, features },
    ...callback,
    async decide(): Promise<Answer | undefined> {
      const existing = await deps.store.getResource(id);
      if (existing === undefined) {
        // Ids are never reused: a PUT for a deprovisioned one is a replay of a captured request.
        if (await deps.store.isDeleted('resource', id)) throw entityDeletedError('resource');
        return undefined;
      }
      // Section 3: the compared properties are product, plan and region; features are not.
      if (existing.product === product && existing.plan === plan && existing.region === region) {
        return { status: 201, body: { message: existing.message } };
      }
      throw new ConflictError('Resource already exists with different properties');
    },
    async run(): Promise<RunOutcome> {
      const context = deps.context({ entity: 'resource', id }, callback.callbackId, logger);
      const result = messageOf(await deps.handlers.provision({ ...input }, context), DEFAULT_MESSAGES.provision);
      return acceptedOr(result, (message) => {
        const at = deps.now();
        const resource: ResourceRecord = { id, product, plan, region, features, message, createdAt: at, updatedAt: at };
        return { type: 'done', answer: { status: 201, body: { message } }, mutation: { type: 'putResource', resource } };
      });
    },
  };
}

export function changePlanSpec(
  deps: OperationDeps,
  input: { id: string; plan: string; features: Features | undefined; checkPlan: (resource: ResourceRecord) => Promise<void> },
  callback: CallbackHeaders,
  logger: Logger,
): OperationSpec {
  const { id, plan, features } = input;
  return {
    key: operationKey('resource', id),
    kind: 'changePlan',
    targetId: id,
    fingerprint: JSON.stringify(['changePlan', plan, featuresFingerprint(features)]),
    request: features === undefined ? { kind: 'changePlan', plan } : { kind: 'changePlan', plan, features },
    ...callback,
    async decide() {
      const resource = await deps.store.getResource(id);
      if (resource === undefined) throw new NotFoundError('Resource not found');
      if (resource.plan === plan && (features === undefined || sameFeatures(resource.features, features))) {
        return { status: 200, body: { message: `Resource is already on plan ${plan}` } };
      }
      await input.checkPlan(resource);
      return undefined;
    },
    async run() {
      const resource = (await deps.store.getResource(id))!;
      const context = deps.context({ entity: 'resource', id }, callback.callbackId, logger);
      const result = messageOf(await deps.handlers.changePlan({ id, resource, plan, features }, context), DEFAULT_MESSAGES.changePlan);
      return acceptedOr(result, (message) => ({
        type: 'done',
        answer: { status: 200, body: { message } },
        mutation: { type: 'putResource', resource: { ...resource, plan, features: features ?? resource.features, updatedAt: deps.now() } },
      }));
    },
  };
}

export function deprovisionSpec(deps: OperationDeps, id: string, callback: CallbackHeaders, logger: Logger): OperationSpec {
  return {
    key: operationKey('resource', id),
    kind: 'deprovision',
    targetId: id,
    fingerprint: '["deprovision"]',
    request: { kind: 'deprovision' },
    ...callback,
    async decide() {
      if ((await deps.store.getResource(id)) === undefined) throw new NotFoundError('Resource not found');
      return undefined;
    },
    async run() {
      const resource = (await deps.store.getResource(id))!;
      const credentials = await deps.store.listCredentials(id);
      const context = deps.context({ entity: 'resource', id }, callback.callbackId, logger);
      const result = messageOf(await deps.handlers.deprovision({ id, resource, credentials }, context), DEFAULT_MESSAGES.deprovision);
      return acceptedOr(result, () => ({ type: 'done', answer: { status: 204 }, mutation: { type: 'deleteResource', id, deletedAt: deps.now() } }));
    },
  };
}

export function provisionCredentialsSpec(deps: OperationDeps, input: { id: string; resourceId: string }, callback: CallbackHeaders, logger: Logger): OperationSpec {
  const { id, resourceId } = input;
  return {
    key: operationKey('credential', id),
    kind: 'provisionCredentials',
    targetId: id,
    fingerprint: JSON.stringify(['provisionCredentials', resourceId]),
    request: { kind: 'provisionCredentials', resourceId },
    ...callback,
    async decide() {
      const existing = await deps.store.getCredential(id);
      if (existing !== undefined) {
        if (existing.resourceId !== resourceId) throw new ConflictError('Credentials already exist for another resource');
        // The first answer again, values included: the marketplace may have lost it.
        return { status: 201, body: { message: existing.message, credentials: existing.values } };
      }
      // Section 7: an unknown resource answers 404, also when it was deprovisioned (with its credentials).
      if ((await deps.store.getResource(resourceId)) === undefined) throw new NotFoundError('Resource not found');
      if (await deps.store.isDeleted('credential', id)) throw entityDeletedError('credential');
      return undefined;
    },
    async run() {
      const resource = (await deps.store.getResource(resourceId))!;
      const context = deps.context({ entity: 'credential', id }, callback.callbackId, logger);
      const result = await deps.handlers.provisionCredentials({ id, resourceId, resource }, context);
      if (isAccepted(result)) return { type: 'accepted', message: result.message };
      const credential = credentialRecord(deps, id, resourceId, result?.credentials, result?.message, logger);
      return {
        type: 'done',
        answer: { status: 201, body: { message: credential.message, credentials: credential.values } },
        mutation: { type: 'putCredential', credential },
      };
    },
  };
}

/** Validate what a handler (or a completion) gave as a credential set, and build the record. */
export function credentialRecord(deps: Pick<OperationDeps, 'now'>, id: string, resourceId: string, values: unknown, message: string | undefined, logger: Logger): CredentialRecord {
  const problem = checkCredentialValues(values);
  if (problem !== undefined) {
    // The provider's bug, not the marketplace's: 500 for the caller, the reason in the log (no values).
    logger.error({ credentialId: id, problem }, 'provisionCredentials returned an invalid credential set');
    throw new InternalError();
  }
  const text = typeof message === 'string' && message.trim().length > 0 ? message : DEFAULT_MESSAGES.provisionCredentials;
  return { id, resourceId, values: { ...(values as Record<string, string>) }, message: text, createdAt: deps.now() };
}

export function deprovisionCredentialsSpec(deps: OperationDeps, id: string, callback: CallbackHeaders, logger: Logger): OperationSpec {
  return {
    key: operationKey('credential', id),
    kind: 'deprovisionCredentials',
    targetId: id,
    fingerprint: '["deprovisionCredentials"]',
    request: { kind: 'deprovisionCredentials' },
    ...callback,
    async decide() {
      if ((await deps.store.getCredential(id)) === undefined) throw new NotFoundError('Credentials not found');
      return undefined;
    },
    async run() {
      const credential = (await deps.store.getCredential(id))!;
      const context = deps.context({ entity: 'credential', id }, callback.callbackId, logger);
      const result = messageOf(await deps.handlers.deprovisionCredentials({ id, resourceId: credential.resourceId, credential }, context), DEFAULT_MESSAGES.deprovisionCredentials);
      return acceptedOr(result, () => ({ type: 'done', answer: { status: 204 }, mutation: { type: 'deleteCredential', id, deletedAt: deps.now() } }));
    },
  };
}

/** Catalog and hook checks shared by provisioning and plan changes. */
export function refuse(message: string, code: 'ERR_UNKNOWN_PRODUCT' | 'ERR_UNKNOWN_PLAN' | 'ERR_UNKNOWN_REGION' | 'ERR_PLAN_CHANGE_REFUSED'): never {
  throw new BadRequestError(message, code);
}
