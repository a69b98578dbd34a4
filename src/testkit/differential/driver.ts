/**
 * Plays the steps of a run through the real OperationEngine on one store, and reads back what the
 * run shows: every answer, every handler call and the end state. Two engines share the store: the
 * harness's own instance, and one whose clock never fires (a process that crashed once its handler
 * started, so its lease lapses). Handlers wait on latches the steps open; the store is reached
 * through the turnstile, so the interleaving is the steps' and never the database's.
 */
import { accepted, type ProviderHandlers } from '../../domain/handlers.js';
import { BadRequestError, MarketplaceError } from '../../errors.js';
import { OperationEngine } from '../../idempotency/engine.js';
import type { OperationCall, TableEnv } from '../../idempotency/operations.js';
import { createLogger } from '../../lib/logger.js';
import type { CredentialRecord, Store } from '../../store/types.js';
import { TIMING } from './commands.js';
import { HarnessClock, Turnstile, deadClock } from './scheduler.js';
import {
  CATALOG,
  PRODUCT,
  REGION,
  callbackUrlOf,
  canonical,
  handlerText,
  targetOf,
  type AnswerView,
  type EndState,
  type RequestStep,
  type RunIds,
  type Step,
} from './script.js';

/** What a run on a store showed. */
export interface StoreRun {
  answers: Map<number, { answer: AnswerView; at: number | 'end' }>;
  handlers: Map<number, string[]>;
  state: EndState;
  /** Release steps: whose handler each opened. */
  releases: Map<number, number>;
  /** Store calls the run made (for the report). */
  storeCalls: number;
}

interface Held {
  index: number;
  open: () => void;
}

/**
 * Plays `steps` on `store` (shared with other runs: ids are the run's own) starting at `start`.
 */
export async function runOnStore(store: Store, steps: readonly Step[], ids: RunIds, shape: { resources: number; credentials: number }, start: number, callTimeoutMs: number): Promise<StoreRun> {
  const clock = new HarnessClock(start);
  const turnstile = new Turnstile(callTimeoutMs);
  const { flows } = turnstile;
  const shared = turnstile.wrap(store);
  const answers = new Map<number, { answer: AnswerView; at: number | 'end' }>();
  const handlerCalls = new Map<number, string[]>();
  const specs = new Map<number, RequestStep>();
  let held: Held[] = [];
  const releases = new Map<number, number>();
  let current: number | 'end' = 0;
  let capacityFull = false;
  const s = ids.short;

  const env: TableEnv = {
    catalog: CATALOG,
    validate({ operation, plan }) {
      if (capacityFull && (operation === 'provision' || plan === 'large')) throw new BadRequestError(handlerText.capacity);
    },
    checkCallbackUrl: undefined,
  };

  /** The request whose invocation this is, its call recorded, held if it says so. */
  async function enter(line: string): Promise<RequestStep> {
    const tag = flows.getStore();
    const step = tag === undefined ? undefined : specs.get(tag.index);
    if (step === undefined) throw new Error('differential: a handler ran outside any request of the run');
    handlerCalls.set(step.index, [...(handlerCalls.get(step.index) ?? []), line]);
    if (step.spec.hold) {
      await new Promise<void>((resolve) => {
        held.push({ index: step.index, open: resolve });
      });
    }
    return step;
  }

  function outcome<T>(step: RequestStep, success: () => T): T | ReturnType<typeof accepted> {
    switch (step.spec.behaviour) {
      case 'refuse':
        throw new BadRequestError(handlerText.refused(step.index));
      case 'fail':
        throw new Error(handlerText.failure(step.index));
      case 'accept':
        return accepted(handlerText.accepted(targetOf(step.spec, ids).id, step.index));
      case 'ok':
        return success();
    }
  }

  const handlers: ProviderHandlers = {
    async provision({ id, plan }) {
      const step = await enter(`provision ${s(id)} plan ${plan}`);
      return outcome(step, () => handlerText.provision(id, plan, step.index));
    },
    async changePlan({ id, resource, plan, features }) {
      const step = await enter(`changePlan ${s(id)} ${resource.plan} ${canonical(resource.features)} -> ${plan} ${features === undefined ? 'same features' : canonical(features)}`);
      return outcome(step, () => handlerText.changePlan(id, plan, step.index));
    },
    async deprovision({ id, credentials }) {
      const step = await enter(`deprovision ${s(id)} with credentials [${credentials.map((c: CredentialRecord) => s(c.id)).join(', ')}]`);
      return outcome(step, () => handlerText.deprovision(id, step.index));
    },
    async provisionCredentials({ id, resourceId }) {
      const step = await enter(`provisionCredentials ${s(id)} for ${s(resourceId)}`);
      return outcome(step, () => ({ message: handlerText.provisionCredentials(id, step.index), credentials: handlerText.credentialValues(id, step.index) }));
    },
    async deprovisionCredentials({ id, resourceId }) {
      const step = await enter(`deprovisionCredentials ${s(id)} of ${s(resourceId)}`);
      return outcome(step, () => handlerText.deprovisionCredentials(id, step.index));
    },
  };

  const common = {
    store: shared,
    handlers,
    env,
    leaseMs: TIMING.leaseMs,
    waitMs: TIMING.waitMs,
    pendingDeadlineMs: TIMING.pendingDeadlineMs,
    replayTtlMs: TIMING.replayTtlMs,
    callbacks: true,
    logger: createLogger(false),
  };
  const engines = {
    main: new OperationEngine({ ...common, owner: 'main', clock }),
    zombie: new OperationEngine({ ...common, owner: 'zombie', clock: deadClock(clock) }),
  };

  const settle = (index: number) => ({
    answered: (answer: AnswerView) => {
      answers.set(index, { answer, at: current });
    },
    failed: (error: unknown) => {
      answers.set(index, { answer: errorAnswer(error), at: current });
    },
  });

  function send(step: RequestStep): void {
    specs.set(step.index, step);
    const { id } = targetOf(step.spec, ids);
    const call: OperationCall = {
      kind: step.spec.kind,
      id,
      body: bodyOf(step, ids),
      callbackId: step.callbackId,
      callbackUrl: step.callbackId === undefined ? undefined : callbackUrlOf(step.callbackId),
      signedHeaders: ['date', 'host', 'x-callback-id', 'x-callback-url'],
      requestId: step.requestId,
    };
    const engine = engines[step.engine];
    const { answered, failed } = settle(step.index);
    flows.run({ index: step.index, priority: step.spec.priority }, () => {
      engine.handle(call).then((answer) => answered(answerView(answer.status, answer.body)), failed);
    });
  }

  async function release(entry: Held): Promise<void> {
    held = held.filter((h) => h !== entry);
    entry.open();
    await turnstile.drain();
  }

  const heldInOrder = (): Held[] => [...held].sort((a, b) => a.index - b.index);

  for (const step of steps) {
    current = step.index;
    switch (step.type) {
      case 'request':
        send(step);
        await turnstile.drain();
        break;
      case 'release': {
        const list = heldInOrder();
        const entry = list[step.pick % Math.max(1, list.length)];
        if (entry !== undefined) {
          releases.set(step.index, entry.index);
          await release(entry);
        }
        break;
      }
      case 'advance':
        clock.advance(step.ms);
        await turnstile.drain();
        break;
      case 'complete': {
        const { answered, failed } = settle(step.index);
        const completion =
          step.state === 'error'
            ? { state: 'error' as const, message: handlerText.completedError(step.index) }
            : step.entity === 'credential'
              ? { state: 'done' as const, message: handlerText.completedDone(step.index), credentials: handlerText.credentialValues(step.id, `done${step.index}`) }
              : { state: 'done' as const, message: handlerText.completedDone(step.index) };
        flows.run({ index: step.index, priority: 0 }, () => {
          engines.main.complete({ entity: step.entity, id: step.id }, completion).then(() => answered({ status: 204 }), failed);
        });
        await turnstile.drain();
        break;
      }
      case 'capacity':
        capacityFull = step.full;
        break;
      case 'skip':
        break;
    }
  }
  // The end: every held handler opened, in index order, until none is left.
  current = 'end';
  for (let round = 0; round <= steps.length; round++) {
    const list = heldInOrder();
    if (list.length === 0) break;
    for (const entry of list) await release(entry);
  }
  return { answers, handlers: handlerCalls, releases, state: await readState(store, ids, shape, start), storeCalls: turnstile.calls };
}

function bodyOf(step: RequestStep, ids: RunIds): unknown {
  const { spec } = step;
  switch (spec.kind) {
    case 'provision':
      return { id: ids.resource(spec.target), product: PRODUCT, plan: spec.plan, region: REGION, ...featuresOf(spec) };
    case 'changePlan':
      return { plan: spec.plan, ...featuresOf(spec) };
    case 'provisionCredentials':
      return { id: ids.credential(spec.target), resource_id: ids.resource(spec.parent ?? 0) };
    default:
      return undefined;
  }
}

function featuresOf(spec: RequestStep['spec']): { features?: { seats: number } } {
  return spec.seats === undefined ? {} : { features: { seats: spec.seats } };
}

function answerView(status: number, body: unknown): AnswerView {
  const view: AnswerView = { status };
  if (body !== null && typeof body === 'object') {
    const { message, credentials } = body as { message?: unknown; credentials?: unknown };
    if (typeof message === 'string') view.message = message;
    if (credentials !== undefined) view.credentials = credentials as Record<string, string>;
  }
  return view;
}

/** An error as the router renders it: a MarketplaceError's status and message, anything else 500. */
function errorAnswer(error: unknown): AnswerView {
  if (error instanceof MarketplaceError) return { status: error.status, message: error.message };
  return { status: 500, message: 'Internal error' };
}

/** The run's end state, read through the store's own methods (never through the turnstile). */
async function readState(store: Store, ids: RunIds, shape: { resources: number; credentials: number }, start: number): Promise<EndState> {
  const rel = (t: number): number => t - start;
  const resourceIds = Array.from({ length: shape.resources }, (_, i) => ids.resource(i));
  const credentialIds = Array.from({ length: shape.credentials }, (_, i) => ids.credential(i));
  const resources: EndState['resources'] = [];
  for (const id of resourceIds) {
    const r = await store.getResource(id);
    resources.push({
      id,
      record: r === undefined ? undefined : { product: r.product, plan: r.plan, region: r.region, features: { ...r.features }, message: r.message, createdAt: rel(r.createdAt), updatedAt: rel(r.updatedAt) },
      tombstone: await store.isDeleted('resource', id),
      credentials: (await store.listCredentials(id)).map((c) => c.id).sort(),
    });
  }
  const credentials: EndState['credentials'] = [];
  for (const id of credentialIds) {
    const c = await store.getCredential(id);
    credentials.push({
      id,
      record: c === undefined ? undefined : { resourceId: c.resourceId, values: { ...c.values }, message: c.message, createdAt: rel(c.createdAt) },
      tombstone: await store.isDeleted('credential', id),
    });
  }
  const operations: EndState['operations'] = [];
  for (const key of [...resourceIds.map((id) => `resource:${id}`), ...credentialIds.map((id) => `credential:${id}`)]) {
    const op = await store.getOperation(key);
    if (op === undefined) continue;
    operations.push({ key, kind: op.kind, state: op.state, owner: op.owner, message: op.message, deadlineAt: op.deadlineAt === undefined ? undefined : rel(op.deadlineAt), callbackId: op.callbackId });
  }
  const deliveries = store.listDeliveries === undefined
    ? undefined
    : (await store.listDeliveries())
      .filter((d) => d.callbackId.startsWith(ids.prefix))
      .map((d) => ({ callbackId: d.callbackId, url: d.url, state: d.state, payload: d.payload, createdAt: rel(d.createdAt), deadlineAt: rel(d.deadlineAt) }));
  return { resources, credentials, operations, deliveries };
}
