/**
 * The reference model: the documented rule (docs/idempotency.md, the store contract in
 * docs/stores.md, issue 19's "every path") as a small synchronous state machine. It never calls a
 * store or the engine: it keeps its own resources, credentials, tombstones, operations, replay
 * records and deliveries, and plays the requests of a run the way the harness schedules them:
 *
 * - A request runs until it parks (answers, waits for a holder, or sits in a held handler); when
 *   several can move, the one with the lowest priority number (then the lowest index) goes first.
 * - A waiting request wakes when the holder it waits for in its own process finishes, at its own
 *   wait limit, or (holder in another process) at the next clock move, and claims again.
 * - Claims of the instance that runs the harness never lapse (it renews them before anything else
 *   moves); the crashed instance never renews, so its claims lapse after the lease.
 *
 * The rule for a signed request (issue 19, "every path"): the first answer given for its signature,
 * whatever it was (success, 202, 409, 404, 400 from the catalog or the hook, 500, 503), is recorded
 * against it, once, and the same signature again never runs a handler: it gets the state's answer
 * when it can take the operation and the state needs no work, otherwise the recorded answer. The
 * answer recorded for a request still running at its wait limit (its 503, or its 202 hand-over) is
 * what that handler's end gives.
 */
import { TIMING, type OpKind, type RequestSpec } from './commands.js';
import {
  CATALOG,
  handlerText,
  PRODUCT,
  REGION,
  targetOf,
  type AnswerView,
  type EndState,
  type RequestStep,
  type RunIds,
  canonical,
  type Step,
} from './script.js';

/** The engine's fixed messages (the answers a marketplace sees). */
export const MESSAGES = Object.freeze({
  resourceNotFound: 'Resource not found',
  credentialsNotFound: 'Credentials not found',
  resourceDifferent: 'Resource already exists with different properties',
  credentialsOtherResource: 'Credentials already exist for another resource',
  resourceDeleted: 'Resource was deprovisioned; its id cannot be provisioned again',
  credentialsDeleted: 'Credentials were deprovisioned; their id cannot be provisioned again',
  busyRunning: 'Another operation on this entity is in progress',
  busyPending: 'Another operation on this entity is pending; wait for its outcome',
  inProgress: 'The operation is still in progress, retry later',
  leaseLost: 'Operation was taken over by another worker, retry later',
  internal: 'Internal error',
  handoff: 'The operation is taking longer than expected; its outcome will follow by callback',
  handedOffFailed: 'The provider could not complete the operation',
  orphaned: 'The resource was deprovisioned',
  alreadyOnPlan: (plan: string): string => `Resource is already on plan ${plan}`,
  unknownPlan: (plan: string): string => `Unknown plan ${plan} for product ${PRODUCT}`,
  notPending: (entity: string, id: string): string => `No pending operation for ${entity} ${id} (completed already, past its deadline, or its resource was deprovisioned)`,
  defaults: {
    provision: 'Resource provisioned',
    changePlan: 'Plan changed',
    deprovision: 'Resource deprovisioned',
    provisionCredentials: 'Credentials provisioned',
    deprovisionCredentials: 'Credentials deprovisioned',
  } satisfies Record<OpKind, string>,
});


interface Resource { product: string; plan: string; region: string; features: Record<string, number>; message: string; createdAt: number; updatedAt: number }
interface Credential { resourceId: string; values: Record<string, string>; message: string; createdAt: number }
interface Operation {
  key: string;
  kind: OpKind;
  targetId: string;
  fingerprint: string;
  state: 'running' | 'pending';
  token: number;
  owner: 'main' | 'zombie';
  leaseExpiresAt: number;
  /** The parent resource of a credential operation (the PUT's resource_id, or the stored credential's resource at claim time). */
  parentId: string | undefined;
  /** provisionCredentials: the body's resource id. */
  resourceId: string | undefined;
  plan: string | undefined;
  /** provision and changePlan: the body's features, if any. */
  features: Record<string, number> | undefined;
  createdAt: number;
  message?: string;
  deadlineAt?: number;
  callbackId?: string;
}
interface Delivery { callbackId: string; payload: Record<string, unknown>; createdAt: number; deadlineAt: number }

/**
 * Where the engine is known to differ from its documentation, the model follows the engine and the
 * harness says so on every run (so the difference is never silent). Each is reported; when the
 * engine is fixed, set it to false and the property checks the documented behaviour.
 */
export const KNOWN_DIFFERENCES = Object.freeze({
  /**
   * `complete()` of a pending operation past its 24 h deadline: docs/idempotency.md and the
   * method's own comment say it rejects with ERR_OPERATION_NOT_PENDING ("abandoned after its 24 h
   * deadline"); the engine completes it (mutation and callback) as long as no repeat replaced it.
   */
  lateCompleteAccepted: true,
});

/** The known differences in force, one line each, for the run's log. */
export function knownDifferenceNotes(): string[] {
  return KNOWN_DIFFERENCES.lateCompleteAccepted
    ? ['complete() after the 24 h callback deadline is accepted by the engine although docs/idempotency.md says it is refused: the model follows the engine (known difference, reported)']
    : [];
}

/** A failure the engine turns into an answer. `refusal`: a 4xx the provider or the rule gives. */
class Refusal {
  constructor(readonly status: number, readonly message: string) {}
}

interface Flow {
  step: RequestStep;
  engine: 'main' | 'zombie';
  key: string;
  entity: 'resource' | 'credential';
  targetId: string;
  fingerprint: string;
  /** The signature as the claims carry it: dropped once a record of it is found (the request is a replay). */
  requestId: string | undefined;
  /** The answer recorded for the signature, once found. */
  recorded: AnswerView | undefined;
  /** Whether the request's answer is recorded already. */
  runRecorded: boolean;
  /** Whether the recording belongs to its handler running on past the wait limit (it records its outcome, not the 503 or 202 answered meanwhile). */
  deferred: boolean;
  deadline: number;
  status: 'runnable' | 'waiting' | 'held' | 'done';
  next: 'start' | 'claim' | 'handler';
  /** While waiting: the flow (same instance) whose end wakes it, if any. */
  waitingOn: number | undefined;
  token: number | undefined;
  /** What decide gave the handler. */
  entityResource: Resource | undefined;
  phase: 'running' | 'committing' | 'handedOff';
  handedOffAt: number;
  answered: boolean;
}

interface Instance {
  inflight: Map<string, number>;
  handedOff: Map<string, AnswerView>;
}

/** The model's observation of one run, in the same form the harness reads from a store. */
export interface ModelRun {
  answers: Map<number, { answer: AnswerView; at: number | 'end' }>;
  handlers: Map<number, string[]>;
  releases: Map<number, number>;
  state: EndState;
}

/** Plays `steps` through the model. `ids` must be the run's. */
export function runModel(steps: readonly Step[], ids: RunIds, shape: { resources: number; credentials: number }): ModelRun {
  return new Model(ids).run(steps, shape);
}

class Model {
  t = 0;
  readonly resources = new Map<string, Resource>();
  readonly credentials = new Map<string, Credential>();
  readonly tombstones = new Set<string>();
  readonly operations = new Map<string, Operation>();
  readonly replays = new Map<string, { answer: AnswerView; expiresAt: number }>();
  readonly deliveries: Delivery[] = [];
  capacityFull = false;
  tokens = 0;
  readonly flows = new Map<number, Flow>();
  readonly instances: Record<'main' | 'zombie', Instance> = {
    main: { inflight: new Map(), handedOff: new Map() },
    zombie: { inflight: new Map(), handedOff: new Map() },
  };
  readonly answers = new Map<number, { answer: AnswerView; at: number | 'end' }>();
  readonly handlers = new Map<number, string[]>();
  readonly releases = new Map<number, number>();
  current: number | 'end' = 0;

  /** When each instance last pruned expired replay records (at most once a minute, after a commit). */
  readonly lastPrune = { main: Number.NEGATIVE_INFINITY, zombie: Number.NEGATIVE_INFINITY };

  constructor(readonly ids: RunIds) {}

  run(steps: readonly Step[], shape: { resources: number; credentials: number }): ModelRun {
    for (const step of steps) {
      this.current = step.index;
      switch (step.type) {
        case 'request':
          this.send(step);
          break;
        case 'release': {
          const held = this.held();
          const flow = held[step.pick % Math.max(1, held.length)];
          if (flow !== undefined) {
            this.releases.set(step.index, flow.step.index);
            this.release(flow);
          }
          break;
        }
        case 'advance':
          this.advance(step.ms);
          break;
        case 'complete':
          this.complete(step);
          break;
        case 'capacity':
          this.capacityFull = step.full;
          break;
        case 'skip':
          break;
      }
    }
    // The end: every held handler opened, in index order, until none is left.
    this.current = 'end';
    for (let round = 0; round <= steps.length; round++) {
      const held = this.held();
      if (held.length === 0) break;
      for (const flow of held) this.release(flow);
    }
    return { answers: this.answers, handlers: this.handlers, releases: this.releases, state: this.endState(shape) };
  }

  // ---- the harness's moves ----

  held(): Flow[] {
    return [...this.flows.values()].filter((f) => f.status === 'held').sort((a, b) => a.step.index - b.step.index);
  }

  send(step: RequestStep): void {
    const { entity, id } = targetOf(step.spec, this.ids);
    const flow: Flow = {
      step,
      engine: step.engine,
      key: `${entity}:${id}`,
      entity,
      targetId: id,
      fingerprint: fingerprintOf(step.spec, this.ids),
      requestId: step.requestId,
      recorded: undefined,
      runRecorded: false,
      deferred: false,
      deadline: 0,
      status: 'runnable',
      next: 'start',
      waitingOn: undefined,
      token: undefined,
      entityResource: undefined,
      phase: 'running',
      handedOffAt: 0,
      answered: false,
    };
    this.flows.set(step.index, flow);
    this.runAll();
  }

  release(flow: Flow): void {
    flow.status = 'runnable';
    flow.next = 'handler';
    this.runAll();
  }

  advance(ms: number): void {
    this.t += ms;
    // Renewals first: the harness's own instance never loses a claim; the crashed one renews nothing.
    for (const flow of this.flows.values()) {
      if (flow.engine !== 'main' || flow.status !== 'held') continue;
      const op = this.operations.get(flow.key);
      if (op !== undefined && op.token === flow.token && op.state === 'running') op.leaseExpiresAt = this.t + TIMING.leaseMs;
    }
    // Handlers still running at their request's wait limit: 202 hand-over with callback headers, else 503.
    for (const flow of this.flows.values()) {
      if (flow.engine !== 'main' || flow.status !== 'held' || flow.answered || flow.deadline > this.t) continue;
      if (flow.step.callbackId !== undefined) {
        flow.phase = 'handedOff';
        flow.handedOffAt = this.t;
        const answer = { status: 202, message: MESSAGES.handoff };
        this.instances.main.handedOff.set(flow.key, answer);
        // Not recorded now: the handler's end records its outcome (here, this 202 again).
        flow.deferred = true;
        this.respond(flow, answer);
      } else {
        flow.deferred = true;
        this.respond(flow, { status: 503, message: MESSAGES.inProgress });
      }
    }
    // Waiters: those polling another instance wake at every clock move; those waiting for a request
    // of their own instance wake at their wait limit. The crashed instance's never wake.
    for (const flow of this.flows.values()) {
      if (flow.status !== 'waiting' || flow.engine !== 'main') continue;
      if (flow.waitingOn === undefined || flow.deadline <= this.t) {
        flow.status = 'runnable';
        flow.next = 'claim';
      }
    }
    this.runAll();
  }

  complete(step: Extract<Step, { type: 'complete' }>): void {
    const key = `${step.entity}:${step.id}`;
    const op = this.operations.get(key);
    const refuse = (status: number, message: string): void => {
      this.answers.set(step.index, { answer: { status, message }, at: this.current });
    };
    // docs: rejects "when no operation is pending: completed already, past its 24 h deadline, or its
    // resource was deprovisioned". See KNOWN_DIFFERENCES for the deadline.
    const abandoned = !KNOWN_DIFFERENCES.lateCompleteAccepted && op?.deadlineAt !== undefined && op.deadlineAt <= this.t;
    if (op === undefined || op.state !== 'pending' || abandoned) {
      refuse(404, MESSAGES.notPending(step.entity, step.id));
      return;
    }
    let mutation: Mutation;
    let payload: Record<string, unknown>;
    if (step.state === 'done') {
      const message = handlerText.completedDone(step.index);
      let resource: Resource | undefined;
      if (op.kind === 'changePlan') {
        resource = this.resources.get(op.targetId);
        if (resource === undefined) {
          refuse(404, MESSAGES.resourceNotFound);
          return;
        }
      }
      const values = handlerText.credentialValues(op.targetId, `done${step.index}`);
      const settled = this.settle(op.kind, op.targetId, { plan: op.plan, features: op.features, resourceId: op.resourceId }, resource, { message, values });
      mutation = settled.mutation;
      payload = settled.payload;
    } else {
      mutation = { type: 'none' };
      payload = { state: 'error', message: handlerText.completedError(step.index) };
    }
    const delivery = op.callbackId === undefined ? undefined : { callbackId: op.callbackId, payload, createdAt: this.t, deadlineAt: op.deadlineAt ?? this.t + TIMING.pendingDeadlineMs };
    const failed = this.commit(key, op.token, mutation, delivery);
    if (failed !== undefined) {
      refuse(failed.status, failed.message);
      return;
    }
    this.answers.set(step.index, { answer: { status: 204 }, at: this.current });
  }

  // ---- scheduling ----

  runAll(): void {
    for (;;) {
      let best: Flow | undefined;
      for (const flow of this.flows.values()) {
        if (flow.status !== 'runnable') continue;
        if (best === undefined || flow.step.spec.priority < best.step.spec.priority || (flow.step.spec.priority === best.step.spec.priority && flow.step.index < best.step.index)) best = flow;
      }
      if (best === undefined) return;
      best.status = 'done'; // until it parks again
      if (best.next === 'start') this.start(best);
      else if (best.next === 'claim') this.claimLoop(best);
      else this.handlerReturns(best);
    }
  }

  // ---- one request ----

  /**
   * The request's answer, given once. One that no claim, commit or pending mark recorded is
   * recorded now, unless its signature has a record already: then that record's answer is given,
   * so every copy of a signed request answers alike.
   */
  respond(flow: Flow, answer: AnswerView): void {
    if (flow.answered) return;
    let given = answer;
    if (!flow.runRecorded && !flow.deferred) {
      given = this.recordReplay(flow.step.requestId, answer);
      flow.runRecorded = true;
    }
    flow.answered = true;
    this.answers.set(flow.step.index, { answer: given, at: this.current });
  }

  /** Writes a record unless the signature has one (even expired, until pruned); answers the one that stands. */
  recordReplay(requestId: string, answer: AnswerView): AnswerView {
    const existing = this.replays.get(requestId);
    if (existing === undefined) {
      this.replays.set(requestId, { answer, expiresAt: this.t + TIMING.replayTtlMs });
      return answer;
    }
    return existing.expiresAt >= this.t ? existing.answer : answer;
  }

  /** Records the answer in the same atomic step as a claim, commit or pending mark. */
  recordWith(flow: Flow, answer: AnswerView): void {
    if (flow.requestId === undefined) return;
    this.recordReplay(flow.requestId, answer);
    flow.runRecorded = true;
  }

  finish(flow: Flow, answer: AnswerView): void {
    this.respond(flow, answer);
    flow.status = 'done';
  }

  start(flow: Flow): void {
    flow.deadline = this.t + TIMING.waitMs;
    const spec = flow.step.spec;
    // Validation (the catalog and the hook of now) comes first; its refusal is recorded like any
    // first answer, and a signature answered before keeps its recorded answer.
    if (spec.kind === 'provision') {
      if (!CATALOG.bonnets.plans.includes(spec.plan!)) return this.finish(flow, { status: 400, message: MESSAGES.unknownPlan(spec.plan!) });
      if (this.capacityFull) return this.finish(flow, { status: 400, message: handlerText.capacity });
    }
    this.claimLoop(flow);
  }

  liveReplay(requestId: string): { answer: AnswerView } | undefined {
    const replay = this.replays.get(requestId);
    return replay !== undefined && replay.expiresAt >= this.t ? replay : undefined;
  }

  live(op: Operation): boolean {
    return op.state === 'running' ? op.leaseExpiresAt > this.t : op.deadlineAt === undefined || op.deadlineAt > this.t;
  }

  parentOfFlow(flow: Flow): string | undefined {
    if (flow.entity !== 'credential') return undefined;
    if (flow.step.spec.kind === 'provisionCredentials') return this.ids.resource(flow.step.spec.parent ?? 0);
    return this.credentials.get(flow.targetId)?.resourceId;
  }

  /** The live operation that keeps `flow` out although its key is free (the parent/child rule). */
  blocker(flow: Flow, parentId: string | undefined): Operation | undefined {
    if (flow.entity === 'credential') {
      if (parentId === undefined) return undefined;
      const parent = this.operations.get(`resource:${parentId}`);
      return parent !== undefined && parent.kind === 'deprovision' && this.live(parent) ? parent : undefined;
    }
    if (flow.step.spec.kind !== 'deprovision') return undefined;
    return [...this.operations.values()]
      .filter((op) => op.key.startsWith('credential:') && op.state === 'running' && this.live(op) && op.parentId === flow.targetId)
      .sort((a, b) => a.createdAt - b.createdAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))[0];
  }

  claimLoop(flow: Flow): void {
    const instance = this.instances[flow.engine];
    for (;;) {
      if (flow.requestId !== undefined) {
        const replay = this.liveReplay(flow.requestId);
        if (replay !== undefined) {
          // A replay: from now on it answers from the state (when it can take the operation and
          // that needs no work) or from its record, and never waits.
          flow.recorded = replay.answer;
          flow.requestId = undefined;
          flow.runRecorded = true;
          continue;
        }
      }
      const existing = this.operations.get(flow.key);
      let holder: Operation | undefined;
      if (existing !== undefined && this.live(existing)) {
        if (existing.fingerprint !== flow.fingerprint) return this.refusedByClaim(flow, { status: 409, message: existing.state === 'pending' ? MESSAGES.busyPending : MESSAGES.busyRunning });
        if (existing.state === 'pending') return this.refusedByClaim(flow, { status: 202, message: existing.message ?? 'The operation is in progress' });
        if (flow.recorded !== undefined) return this.finish(flow, flow.recorded);
        const handedOff = instance.handedOff.get(flow.key);
        if (handedOff !== undefined) return this.finish(flow, handedOff);
        holder = existing;
      }
      const parentId = this.parentOfFlow(flow);
      if (holder === undefined) {
        const blocking = this.blocker(flow, parentId);
        if (blocking !== undefined) {
          if (blocking.state === 'pending') return this.refusedByClaim(flow, { status: 409, message: MESSAGES.busyPending });
          if (flow.recorded !== undefined) return this.finish(flow, flow.recorded);
          holder = blocking;
        }
      }
      if (holder !== undefined) {
        if (this.t >= flow.deadline) return this.finish(flow, { status: 503, message: MESSAGES.inProgress });
        flow.waitingOn = instance.inflight.get(holder.key);
        flow.status = 'waiting';
        return;
      }
      return this.claimed(flow, parentId);
    }
  }

  /** A 409 or a pending 202 decided by the claim: recorded with it; a replay gives its record instead. */
  refusedByClaim(flow: Flow, answer: AnswerView): void {
    if (flow.recorded !== undefined) return this.finish(flow, flow.recorded);
    this.recordWith(flow, answer);
    this.finish(flow, answer);
  }

  claimed(flow: Flow, parentId: string | undefined): void {
    const spec = flow.step.spec;
    const token = ++this.tokens;
    this.operations.set(flow.key, {
      key: flow.key,
      kind: spec.kind,
      targetId: flow.targetId,
      fingerprint: flow.fingerprint,
      state: 'running',
      token,
      owner: flow.engine,
      leaseExpiresAt: this.t + TIMING.leaseMs,
      parentId,
      resourceId: spec.kind === 'provisionCredentials' ? parentId : undefined,
      plan: spec.plan,
      features: featuresOf(spec),
      createdAt: this.t,
    });
    flow.token = token;
    flow.phase = 'running';
    this.instances[flow.engine].inflight.set(flow.key, flow.step.index);

    const resourceId = flow.entity === 'resource' ? flow.targetId : parentId;
    let decision: { answer: AnswerView } | { proceed: true };
    try {
      // A replay's decision reads the state only: the catalog and the hook had their say when it was first answered.
      decision = this.decide(flow, resourceId, flow.recorded === undefined);
    } catch (error) {
      return this.refused(flow, error as Refusal);
    }
    if ('answer' in decision || flow.recorded !== undefined) {
      const answer = 'answer' in decision ? decision.answer : flow.recorded!;
      return this.commitFlow(flow, { mutation: { type: 'none' }, answer, payload: {} });
    }
    // The handler runs, once, with what the claim read.
    flow.entityResource = resourceId === undefined ? undefined : this.resources.get(resourceId);
    this.handlers.set(flow.step.index, [this.handlerLine(flow)]);
    if (spec.hold) {
      flow.status = 'held';
      return;
    }
    this.handlerReturns(flow);
  }

  handlerLine(flow: Flow): string {
    const spec = flow.step.spec;
    const s = this.ids.short;
    switch (spec.kind) {
      case 'provision':
        return `provision ${s(flow.targetId)} plan ${spec.plan}`;
      case 'changePlan':
        return `changePlan ${s(flow.targetId)} ${flow.entityResource?.plan} ${canonical(flow.entityResource?.features)} -> ${spec.plan} ${spec.seats === undefined ? 'same features' : canonical(featuresOf(spec))}`;
      case 'deprovision':
        return `deprovision ${s(flow.targetId)} with credentials [${this.credentialsOf(flow.targetId).map(s).join(', ')}]`;
      case 'provisionCredentials':
        return `provisionCredentials ${s(flow.targetId)} for ${s(this.ids.resource(spec.parent ?? 0))}`;
      case 'deprovisionCredentials':
        return `deprovisionCredentials ${s(flow.targetId)} of ${s(this.credentials.get(flow.targetId)?.resourceId ?? '?')}`;
    }
  }

  credentialsOf(resourceId: string): string[] {
    return [...this.credentials.entries()]
      .filter(([, c]) => c.resourceId === resourceId)
      .sort(([a, x], [b, y]) => x.createdAt - y.createdAt || (a < b ? -1 : a > b ? 1 : 0))
      .map(([id]) => id);
  }

  decide(flow: Flow, resourceId: string | undefined, validate: boolean): { answer: AnswerView } | { proceed: true } {
    const spec = flow.step.spec;
    const resource = resourceId === undefined ? undefined : this.resources.get(resourceId);
    switch (spec.kind) {
      case 'provision':
        if (resource === undefined) {
          if (this.tombstones.has(flow.key)) throw new Refusal(409, MESSAGES.resourceDeleted);
          return { proceed: true };
        }
        if (resource.product === PRODUCT && resource.plan === spec.plan && resource.region === REGION) return { answer: { status: 201, message: resource.message } };
        throw new Refusal(409, MESSAGES.resourceDifferent);
      case 'changePlan':
        if (resource === undefined) throw new Refusal(404, MESSAGES.resourceNotFound);
        // Already there: the plan, and the features when the request names them (key by key).
        if (resource.plan === spec.plan && (spec.seats === undefined || sameFeatures(resource.features, featuresOf(spec)!))) return { answer: { status: 200, message: MESSAGES.alreadyOnPlan(spec.plan) } };
        if (validate && !CATALOG.bonnets.plans.includes(spec.plan!)) throw new Refusal(400, MESSAGES.unknownPlan(spec.plan!));
        if (validate && this.capacityFull && spec.plan === 'large') throw new Refusal(400, handlerText.capacity);
        return { proceed: true };
      case 'deprovision':
        if (resource === undefined) throw new Refusal(404, MESSAGES.resourceNotFound);
        return { proceed: true };
      case 'provisionCredentials': {
        const existing = this.credentials.get(flow.targetId);
        if (existing !== undefined) {
          if (existing.resourceId !== resourceId) throw new Refusal(409, MESSAGES.credentialsOtherResource);
          return { answer: { status: 201, message: existing.message, credentials: existing.values } };
        }
        if (resource === undefined) throw new Refusal(404, MESSAGES.resourceNotFound);
        if (this.tombstones.has(flow.key)) throw new Refusal(409, MESSAGES.credentialsDeleted);
        return { proceed: true };
      }
      case 'deprovisionCredentials':
        if (!this.credentials.has(flow.targetId)) throw new Refusal(404, MESSAGES.credentialsNotFound);
        return { proceed: true };
    }
  }

  /** The handler returned (or threw) what its request said. */
  handlerReturns(flow: Flow): void {
    const spec = flow.step.spec;
    const index = flow.step.index;
    const id = flow.targetId;
    switch (spec.behaviour) {
      case 'refuse':
        return this.refused(flow, new Refusal(400, handlerText.refused(index)));
      case 'fail':
        return this.refused(flow, new Refusal(500, MESSAGES.internal));
      case 'accept':
        return this.markPending(flow, handlerText.accepted(id, index));
      case 'ok': {
        const message =
          spec.kind === 'provision' ? handlerText.provision(id, spec.plan!, index)
            : spec.kind === 'changePlan' ? handlerText.changePlan(id, spec.plan!, index)
              : spec.kind === 'deprovision' ? handlerText.deprovision(id, index)
                : spec.kind === 'provisionCredentials' ? handlerText.provisionCredentials(id, index)
                  : handlerText.deprovisionCredentials(id, index);
        const settled = this.settle(spec.kind, id, { plan: spec.plan, features: featuresOf(spec), resourceId: this.parentOfFlowAtClaim(flow) }, flow.entityResource, { message, values: handlerText.credentialValues(id, index) });
        return this.commitFlow(flow, settled);
      }
    }
  }

  parentOfFlowAtClaim(flow: Flow): string | undefined {
    return flow.step.spec.kind === 'provisionCredentials' ? this.ids.resource(flow.step.spec.parent ?? 0) : undefined;
  }

  settle(kind: OpKind, id: string, request: { plan: string | undefined; features: Record<string, number> | undefined; resourceId: string | undefined }, resource: Resource | undefined, outcome: { message: string; values: Record<string, string> }): Settled {
    const t = this.t;
    const message = outcome.message;
    switch (kind) {
      case 'provision':
        return {
          mutation: { type: 'putResource', id, resource: { product: PRODUCT, plan: request.plan!, region: REGION, features: { ...request.features }, message, createdAt: t, updatedAt: t } },
          answer: { status: 201, message },
          payload: { state: 'done', message },
        };
      case 'changePlan':
        return {
          mutation: { type: 'putResource', id, resource: { ...resource!, plan: request.plan!, features: { ...(request.features ?? resource!.features) }, updatedAt: t } },
          answer: { status: 200, message },
          payload: { state: 'done', message },
        };
      case 'deprovision':
        return { mutation: { type: 'deleteResource', id }, answer: { status: 204 }, payload: { state: 'done', message } };
      case 'provisionCredentials':
        return {
          mutation: { type: 'putCredential', id, credential: { resourceId: request.resourceId!, values: outcome.values, message, createdAt: t } },
          answer: { status: 201, message, credentials: outcome.values },
          payload: { state: 'done', message, credentials: outcome.values },
        };
      case 'deprovisionCredentials':
        return { mutation: { type: 'deleteCredential', id }, answer: { status: 204 }, payload: { state: 'done', message } };
    }
  }

  commitFlow(flow: Flow, settled: Settled): void {
    if (flow.phase === 'running') flow.phase = 'committing';
    const handedOff = flow.phase === 'handedOff';
    const answer = handedOff ? (this.instances[flow.engine].handedOff.get(flow.key) ?? settled.answer) : settled.answer;
    const delivery = handedOff && flow.step.callbackId !== undefined
      ? { callbackId: flow.step.callbackId, payload: settled.payload, createdAt: this.t, deadlineAt: flow.handedOffAt + TIMING.pendingDeadlineMs }
      : undefined;
    const failed = this.commit(flow.key, flow.token!, settled.mutation, delivery, flow.requestId === undefined ? undefined : { requestId: flow.requestId, answer });
    if (failed !== undefined) return this.refused(flow, failed);
    if (flow.requestId !== undefined) flow.runRecorded = true;
    // Expired replay records go at most once a minute, after a commit.
    if (this.t - this.lastPrune[flow.engine] >= 60_000) {
      this.lastPrune[flow.engine] = this.t;
      for (const [requestId, replay] of this.replays) if (replay.expiresAt < this.t) this.replays.delete(requestId);
    }
    this.respond(flow, answer);
    this.settleWork(flow);
  }

  markPending(flow: Flow, message: string): void {
    if (flow.phase === 'running') flow.phase = 'committing';
    const handedOff = flow.phase === 'handedOff';
    const answer = handedOff ? this.instances[flow.engine].handedOff.get(flow.key)! : { status: 202, message };
    const op = this.operations.get(flow.key);
    if (op === undefined || op.token !== flow.token) return this.refused(flow, new Refusal(503, MESSAGES.leaseLost));
    op.state = 'pending';
    op.message = message;
    op.deadlineAt = (handedOff ? flow.handedOffAt : this.t) + TIMING.pendingDeadlineMs;
    if (flow.step.callbackId !== undefined) op.callbackId = flow.step.callbackId;
    this.recordWith(flow, answer);
    this.respond(flow, answer);
    this.settleWork(flow);
  }

  /**
   * A decision (404, 409), a refusal, a failure, or a commit that could not be made: recorded with
   * the claim's release in one commit (or on its own when the claim was lost); after a hand-over the
   * claim is closed with an error callback too.
   */
  refused(flow: Flow, error: Refusal): void {
    if (flow.phase === 'running') flow.phase = 'committing';
    const isRefusal = error.status < 500;
    const handedOff = flow.phase === 'handedOff';
    const given = { status: error.status, message: error.message };
    const answer = handedOff ? (this.instances[flow.engine].handedOff.get(flow.key) ?? given) : given;
    const delivery = handedOff && flow.step.callbackId !== undefined
      ? { callbackId: flow.step.callbackId, payload: { state: 'error', message: isRefusal ? error.message : MESSAGES.handedOffFailed }, createdAt: this.t, deadlineAt: flow.handedOffAt + TIMING.pendingDeadlineMs }
      : undefined;
    if (delivery === undefined && flow.requestId === undefined) {
      const op = this.operations.get(flow.key);
      if (op !== undefined && op.token === flow.token) this.operations.delete(flow.key);
    } else {
      const failed = this.commit(flow.key, flow.token!, { type: 'none' }, delivery, flow.requestId === undefined ? undefined : { requestId: flow.requestId, answer });
      if (failed === undefined && flow.requestId !== undefined) flow.runRecorded = true;
    }
    if (flow.requestId !== undefined && !flow.runRecorded) {
      this.recordReplay(flow.requestId, answer);
      flow.runRecorded = true;
    }
    this.respond(flow, given);
    this.settleWork(flow);
  }

  /** The claimed part of a request is over: its own instance forgets it, and the requests waiting for it claim again. */
  settleWork(flow: Flow): void {
    flow.status = 'done';
    const instance = this.instances[flow.engine];
    if (instance.inflight.get(flow.key) === flow.step.index) instance.inflight.delete(flow.key);
    instance.handedOff.delete(flow.key);
    for (const other of this.flows.values()) {
      if (other.status === 'waiting' && other.engine === flow.engine && other.waitingOn === flow.step.index) {
        other.status = 'runnable';
        other.next = 'claim';
      }
    }
  }

  // ---- the store's commit ----

  /** Applies a commit atomically; answers the refusal when it cannot be made (nothing is written then). */
  commit(key: string, token: number, mutation: Mutation, delivery: Delivery | undefined, replay?: { requestId: string; answer: AnswerView }): Refusal | undefined {
    const op = this.operations.get(key);
    if (op === undefined || op.token !== token) return new Refusal(503, MESSAGES.leaseLost);
    if (mutation.type === 'putCredential' && !this.resources.has(mutation.credential.resourceId)) return new Refusal(404, MESSAGES.resourceNotFound);
    if (mutation.type === 'putResource' && this.tombstones.has(`resource:${mutation.id}`)) return new Refusal(409, MESSAGES.resourceDeleted);
    if (mutation.type === 'putCredential' && this.tombstones.has(`credential:${mutation.id}`)) return new Refusal(409, MESSAGES.credentialsDeleted);
    switch (mutation.type) {
      case 'none':
        break;
      case 'putResource':
        this.resources.set(mutation.id, { ...mutation.resource });
        break;
      case 'deleteResource': {
        // Pending credential operations of the resource go, each with an error callback if it has headers.
        for (const other of [...this.operations.values()]) {
          if (other.state !== 'pending' || !other.key.startsWith('credential:')) continue;
          const parent = other.kind === 'provisionCredentials' ? other.resourceId : this.credentials.get(other.targetId)?.resourceId;
          if (parent !== mutation.id) continue;
          this.operations.delete(other.key);
          if (other.callbackId !== undefined) this.deliveries.push({ callbackId: other.callbackId, payload: { state: 'error', message: MESSAGES.orphaned }, createdAt: this.t, deadlineAt: other.deadlineAt ?? this.t });
        }
        for (const credentialId of this.credentialsOf(mutation.id)) {
          this.credentials.delete(credentialId);
          this.tombstones.add(`credential:${credentialId}`);
        }
        this.resources.delete(mutation.id);
        this.tombstones.add(`resource:${mutation.id}`);
        break;
      }
      case 'putCredential':
        this.credentials.set(mutation.id, { ...mutation.credential });
        break;
      case 'deleteCredential':
        this.credentials.delete(mutation.id);
        this.tombstones.add(`credential:${mutation.id}`);
        break;
    }
    this.operations.delete(key);
    if (delivery !== undefined) this.deliveries.push(delivery);
    if (replay !== undefined) this.recordReplay(replay.requestId, replay.answer);
    return undefined;
  }

  // ---- the end ----

  endState(shape: { resources: number; credentials: number }): EndState {
    const ids = this.ids;
    const rel = (t: number): number => t;
    const resourceIds = Array.from({ length: shape.resources }, (_, i) => ids.resource(i));
    const credentialIds = Array.from({ length: shape.credentials }, (_, i) => ids.credential(i));
    return {
      resources: resourceIds.map((id) => {
        const r = this.resources.get(id);
        return {
          id,
          record: r === undefined ? undefined : { product: r.product, plan: r.plan, region: r.region, features: { ...r.features }, message: r.message, createdAt: rel(r.createdAt), updatedAt: rel(r.updatedAt) },
          tombstone: this.tombstones.has(`resource:${id}`),
          credentials: this.credentialsOf(id).sort(),
        };
      }),
      credentials: credentialIds.map((id) => {
        const c = this.credentials.get(id);
        return { id, record: c === undefined ? undefined : { ...c, values: { ...c.values } }, tombstone: this.tombstones.has(`credential:${id}`) };
      }),
      operations: [...resourceIds.map((id) => `resource:${id}`), ...credentialIds.map((id) => `credential:${id}`)]
        .map((key) => this.operations.get(key))
        .filter((op): op is Operation => op !== undefined)
        .map((op) => ({ key: op.key, kind: op.kind, state: op.state, owner: op.owner, message: op.message, deadlineAt: op.deadlineAt, callbackId: op.callbackId })),
      deliveries: this.deliveries.map((d) => ({ callbackId: d.callbackId, url: `https://connector.example/v1/callbacks/${d.callbackId}`, state: 'pending', payload: d.payload, createdAt: d.createdAt, deadlineAt: d.deadlineAt })),
    };
  }
}

type Mutation =
  | { type: 'none' }
  | { type: 'putResource'; id: string; resource: Resource }
  | { type: 'deleteResource'; id: string }
  | { type: 'putCredential'; id: string; credential: Credential }
  | { type: 'deleteCredential'; id: string };

interface Settled {
  mutation: Mutation;
  answer: AnswerView;
  payload: Record<string, unknown>;
}

/** Equal fingerprints: the same request (for resources: product, plan and region; for a credential PUT: its resource). */
function fingerprintOf(spec: RequestSpec, ids: RunIds): string {
  switch (spec.kind) {
    case 'provision':
      return `provision ${PRODUCT} ${spec.plan} ${REGION}`;
    case 'changePlan':
      // The features count when the request names them.
      return `changePlan ${spec.plan} ${spec.seats === undefined ? '-' : canonical(featuresOf(spec))}`;
    case 'deprovision':
      return 'deprovision';
    case 'provisionCredentials':
      return `provisionCredentials ${ids.resource(spec.parent ?? 0)}`;
    case 'deprovisionCredentials':
      return 'deprovisionCredentials';
  }
}

/** The request's features (`{ seats }`), or undefined when it names none. */
function featuresOf(spec: RequestSpec): Record<string, number> | undefined {
  return spec.seats === undefined ? undefined : { seats: spec.seats };
}

/** Same keys, same values. */
function sameFeatures(a: Record<string, number>, b: Record<string, number>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.prototype.hasOwnProperty.call(b, key) && a[key] === b[key]);
}
