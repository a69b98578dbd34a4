/**
 * The vocabulary of the differential run: what the marketplace (and the provider's own code) does,
 * as plain data that fast-check generates and shrinks, and that every backend and the model replay
 * identically. References to earlier requests and held handlers are picks taken modulo what exists
 * when the command runs, so a shrunk sequence stays meaningful.
 */
import fc from 'fast-check';

/** The operation kinds, as the router names them. */
export type OpKind = 'provision' | 'changePlan' | 'deprovision' | 'provisionCredentials' | 'deprovisionCredentials';

/**
 * What the provider's handler does when this request's invocation runs:
 * `ok` answers success, `refuse` throws a BadRequestError (400), `fail` throws a plain Error (500),
 * `accept` returns `accepted(...)` (202, completed later with `complete`).
 */
export type Behaviour = 'ok' | 'refuse' | 'fail' | 'accept';

/** Plans: `small` and `large` are in the catalog (`large` is refused by the validate hook while capacity is full); `huge` is not. */
export type Plan = 'small' | 'large' | 'huge';

/** One signed mutating request, as the marketplace would send it. */
export interface RequestSpec {
  kind: OpKind;
  /** Resource index (resource operations) or credential index (credential operations). */
  target: number;
  /** provision and changePlan. */
  plan?: Plan;
  /** provisionCredentials: the resource index in the body's `resource_id`. */
  parent?: number;
  /** What its handler does if it runs. */
  behaviour: Behaviour;
  /** The handler waits on a latch until a `release` command (or the end of the sequence) opens it. */
  hold: boolean;
  /** Sent with X-Callback-ID and X-Callback-URL (202 hand-over at the wait limit, callbacks on completion). */
  callback: boolean;
  /** Scheduling priority (lower runs first) when several requests can progress at once. */
  priority: number;
}

export type Command =
  /** A new signed request. */
  | { type: 'send'; request: RequestSpec }
  /** The marketplace's retry of an earlier request: same body, a new Date, so a new signature. */
  | { type: 'repeat'; pick: number; behaviour: Behaviour; hold: boolean; priority: number }
  /** An earlier request's very bytes again (same signature): a captured request replayed, or a retry within the same second. */
  | { type: 'replay'; pick: number; priority: number }
  /** A request to a second instance that dies once its handler started: it never renews its lease. */
  | { type: 'crash'; request: RequestSpec }
  /** Opens one held handler (the handler then does what its request said). */
  | { type: 'release'; pick: number }
  /** Moves the clock: past the wait limit, past the lease, past the 24 h callback deadline. */
  | { type: 'advance'; ms: number }
  /** The provider's `complete(...)` for a pending operation. */
  | { type: 'complete'; entity: 'resource' | 'credential'; target: number; state: 'done' | 'error' }
  /** The validate hook starts or stops refusing (provisioning anything, or a change to `large`). */
  | { type: 'capacity'; full: boolean };

/** Shape of a generated sequence. */
export interface SequenceShape {
  /** Resource ids in play. Default 2. */
  resources: number;
  /** Credential ids in play. Default 3. */
  credentials: number;
  /** Longest sequence. Default 24. */
  maxCommands: number;
}

/** The engine timings the harness runs with (the model reads the same ones). */
export const TIMING = Object.freeze({
  /** How long a request waits for a handler before answering 503 (or 202 with callback headers). */
  waitMs: 10_000,
  /** A claim's lease; a crashed instance's claim lapses after it. */
  leaseMs: 30_000,
  /** The 24 h callback deadline of a pending (202) operation. */
  pendingDeadlineMs: 86_400_000,
  /** How long a signature's answer is kept. */
  replayTtlMs: 600_000,
  /** A replayed request older than this would fail the signature's Date check (401) before reaching the engine: not sent. */
  signatureWindowMs: 300_000,
});

/** Clock moves: a little (wakes pollers), the wait limit, past the lease, past the callback deadline. */
export const ADVANCES: readonly number[] = [1_000, TIMING.waitMs, TIMING.leaseMs + 1_000, TIMING.pendingDeadlineMs + 1_000];

const behaviour = (): fc.Arbitrary<Behaviour> =>
  fc.oneof({ weight: 5, arbitrary: fc.constant<Behaviour>('ok') }, { weight: 1, arbitrary: fc.constant<Behaviour>('refuse') }, { weight: 1, arbitrary: fc.constant<Behaviour>('fail') }, { weight: 2, arbitrary: fc.constant<Behaviour>('accept') });

/** Held about one time in three. */
const held = (): fc.Arbitrary<boolean> => fc.oneof({ weight: 2, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) });

const plan = (): fc.Arbitrary<Plan> => fc.oneof({ weight: 4, arbitrary: fc.constantFrom<Plan>('small', 'large') }, { weight: 1, arbitrary: fc.constant<Plan>('huge') });

/** A generated request. */
export function requestArbitrary(shape: SequenceShape): fc.Arbitrary<RequestSpec> {
  const resource = fc.nat({ max: shape.resources - 1 });
  const credential = fc.nat({ max: shape.credentials - 1 });
  const common = { behaviour: behaviour(), hold: held(), callback: fc.boolean(), priority: fc.nat({ max: 3 }) };
  return fc.oneof(
    { weight: 3, arbitrary: fc.record({ kind: fc.constant<OpKind>('provision'), target: resource, plan: plan(), ...common }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant<OpKind>('changePlan'), target: resource, plan: plan(), ...common }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant<OpKind>('deprovision'), target: resource, ...common }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant<OpKind>('provisionCredentials'), target: credential, parent: resource, ...common }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant<OpKind>('deprovisionCredentials'), target: credential, ...common }) },
  );
}

/** A generated command sequence (fast-check shrinks it towards shorter, simpler sequences). */
export function sequenceArbitrary(shape: SequenceShape): fc.Arbitrary<Command[]> {
  const request = requestArbitrary(shape);
  const command: fc.Arbitrary<Command> = fc.oneof(
    { weight: 10, arbitrary: request.map((r): Command => ({ type: 'send', request: r })) },
    { weight: 3, arbitrary: fc.record({ type: fc.constant('repeat' as const), pick: fc.nat({ max: 63 }), behaviour: behaviour(), hold: held(), priority: fc.nat({ max: 3 }) }) },
    { weight: 4, arbitrary: fc.record({ type: fc.constant('replay' as const), pick: fc.nat({ max: 63 }), priority: fc.nat({ max: 3 }) }) },
    { weight: 2, arbitrary: requestArbitrary(shape).map((r): Command => ({ type: 'crash', request: { ...r, hold: true } })) },
    { weight: 6, arbitrary: fc.record({ type: fc.constant('release' as const), pick: fc.nat({ max: 63 }) }) },
    { weight: 3, arbitrary: fc.record({ type: fc.constant('advance' as const), ms: fc.constantFrom(...ADVANCES) }) },
    { weight: 2, arbitrary: fc.record({ type: fc.constant('complete' as const), entity: fc.constantFrom('resource' as const, 'credential' as const), target: fc.nat({ max: Math.max(shape.resources, shape.credentials) - 1 }), state: fc.constantFrom('done' as const, 'error' as const) }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('capacity' as const), full: fc.boolean() }) },
  );
  // Most sequences start from a few provisioned resources and credentials (as ordinary commands, so
  // shrinking drops what the counterexample does not need): without them most requests answer 404.
  const quick = { behaviour: 'ok' as const, hold: false, callback: false, priority: 0 };
  const prelude: Command[] = [];
  for (let r = 0; r < shape.resources; r++) prelude.push({ type: 'send', request: { kind: 'provision', target: r, plan: 'small', ...quick } });
  for (let c = 0; c < shape.credentials; c++) prelude.push({ type: 'send', request: { kind: 'provisionCredentials', target: c, parent: c % shape.resources, ...quick } });
  return fc
    .tuple(fc.subarray(prelude), fc.array(command, { maxLength: shape.maxCommands, size: 'medium' }))
    .map(([setup, rest]) => [...setup, ...rest].slice(0, shape.maxCommands + prelude.length));
}

/** A command as one line of a report. */
export function describeCommand(command: Command, ids: { resource(i: number): string; credential(i: number): string }): string {
  const flags = (r: Pick<RequestSpec, 'behaviour' | 'hold' | 'callback' | 'priority'>): string =>
    `[handler ${r.behaviour}${r.hold ? ', held' : ''}${r.callback ? ', callback headers' : ''}, priority ${r.priority}]`;
  switch (command.type) {
    case 'send':
    case 'crash':
      return `${command.type === 'crash' ? 'crash-bound instance: ' : ''}${describeRequest(command.request, ids)} ${flags(command.request)}`;
    case 'repeat':
      return `repeat (new signature) of request pick ${command.pick} [handler ${command.behaviour}${command.hold ? ', held' : ''}, priority ${command.priority}]`;
    case 'replay':
      return `replay (same signature) of request pick ${command.pick} [priority ${command.priority}]`;
    case 'release':
      return `release held handler pick ${command.pick}`;
    case 'advance':
      return `advance the clock ${command.ms} ms`;
    case 'complete':
      return `complete ${command.entity} ${command.entity === 'resource' ? ids.resource(command.target) : ids.credential(command.target)} with ${command.state}`;
    case 'capacity':
      return `validate hook: capacity ${command.full ? 'full (refuses)' : 'available'}`;
  }
}

/** A request as `METHOD path body`. */
export function describeRequest(r: RequestSpec, ids: { resource(i: number): string; credential(i: number): string }): string {
  switch (r.kind) {
    case 'provision':
      return `PUT /v1/resources/${ids.resource(r.target)} plan ${r.plan}`;
    case 'changePlan':
      return `PATCH /v1/resources/${ids.resource(r.target)} plan ${r.plan}`;
    case 'deprovision':
      return `DELETE /v1/resources/${ids.resource(r.target)}`;
    case 'provisionCredentials':
      return `PUT /v1/credentials/${ids.credential(r.target)} resource_id ${ids.resource(r.parent ?? 0)}`;
    case 'deprovisionCredentials':
      return `DELETE /v1/credentials/${ids.credential(r.target)}`;
  }
}
