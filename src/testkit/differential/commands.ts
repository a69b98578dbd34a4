/**
 * The vocabulary of the differential run: what the marketplace (and the provider's own code) does,
 * as plain data that fast-check generates and shrinks (arbitrary.ts), and that every backend and
 * the model replay identically. References to earlier requests and held handlers are picks taken modulo what exists
 * when the command runs, so a shrunk sequence stays meaningful.
 */
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
  /** provision and changePlan: the body's `features` (`{ seats }`), or none. Features are stored, never compared on a PUT, compared on a PATCH. */
  seats?: number;
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

/** A request as `METHOD path body`. */
export function describeRequest(r: RequestSpec, ids: { resource(i: number): string; credential(i: number): string }): string {
  switch (r.kind) {
    case 'provision':
      return `PUT /v1/resources/${ids.resource(r.target)} plan ${r.plan}${r.seats === undefined ? '' : ` seats ${r.seats}`}`;
    case 'changePlan':
      return `PATCH /v1/resources/${ids.resource(r.target)} plan ${r.plan}${r.seats === undefined ? '' : ` seats ${r.seats}`}`;
    case 'deprovision':
      return `DELETE /v1/resources/${ids.resource(r.target)}`;
    case 'provisionCredentials':
      return `PUT /v1/credentials/${ids.credential(r.target)} resource_id ${ids.resource(r.parent ?? 0)}`;
    case 'deprovisionCredentials':
      return `DELETE /v1/credentials/${ids.credential(r.target)}`;
  }
}
