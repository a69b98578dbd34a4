/**
 * A generated command sequence compiled once into concrete steps (ids, signatures, callback ids,
 * which earlier request a repeat or replay copies), so that every backend and the model run exactly
 * the same requests; and the observation every run produces, as lines that compare and diff plainly.
 */
import { TIMING, type Command, type OpKind, type RequestSpec, type SequenceShape } from './commands.js';

/** The ids of one run: unique per run, so runs can share one database. */
export interface RunIds {
  /** Alphanumeric, unique per run. */
  prefix: string;
  resource(i: number): string;
  credential(i: number): string;
  /** An id as the report shows it (without the run's prefix). */
  short(id: string): string;
}

export function runIds(prefix: string): RunIds {
  if (!/^[A-Za-z0-9]{1,24}$/.test(prefix)) throw new TypeError('differential: the run prefix must be 1 to 24 letters or digits');
  return {
    prefix,
    resource: (i) => `${prefix}r${i}`,
    credential: (i) => `${prefix}c${i}`,
    short: (id) => (id.startsWith(prefix) ? id.slice(prefix.length) : id),
  };
}

/** One request the harness sends. */
export interface RequestStep {
  type: 'request';
  index: number;
  spec: RequestSpec;
  /** `zombie`: the instance that crashes once the handler started (its timers never fire). */
  engine: 'main' | 'zombie';
  /** The request's signature: new for a send or repeat, the original's for a replay. */
  requestId: string;
  callbackId: string | undefined;
  /** For a repeat or replay: the step index of the request it copies. */
  copyOf?: number;
  replay: boolean;
  /** The clock's offset from the run's start when it is sent. */
  sentAt: number;
}

export type Step =
  | RequestStep
  | { type: 'release'; index: number; pick: number }
  | { type: 'advance'; index: number; ms: number }
  | { type: 'complete'; index: number; entity: 'resource' | 'credential'; id: string; state: 'done' | 'error' }
  | { type: 'capacity'; index: number; full: boolean }
  | { type: 'skip'; index: number; reason: string };

/** The key of a request's target: `resource:<id>` or `credential:<id>`. */
export function targetOf(spec: RequestSpec, ids: RunIds): { entity: 'resource' | 'credential'; id: string } {
  return isCredentialKind(spec.kind) ? { entity: 'credential', id: ids.credential(spec.target) } : { entity: 'resource', id: ids.resource(spec.target) };
}

export function isCredentialKind(kind: OpKind): boolean {
  return kind === 'provisionCredentials' || kind === 'deprovisionCredentials';
}

/** The callback URL of a callback id (never dereferenced: no outbox runs). */
export const callbackUrlOf = (callbackId: string): string => `https://connector.example/v1/callbacks/${callbackId}`;

/** Resolves picks and ids. Time is known statically: only `advance` moves it. */
export function compile(commands: readonly Command[], shape: SequenceShape, ids: RunIds): Step[] {
  const steps: Step[] = [];
  const requests: RequestStep[] = [];
  let clock = 0;
  commands.forEach((command, index) => {
    const newRequest = (spec: RequestSpec, engine: 'main' | 'zombie', copyOf?: number): RequestStep => {
      const step: RequestStep = {
        type: 'request',
        index,
        spec,
        engine,
        requestId: `${ids.prefix}-sig-${index}`,
        callbackId: spec.callback ? `${ids.prefix}cb${index}` : undefined,
        replay: false,
        sentAt: clock,
        ...(copyOf === undefined ? {} : { copyOf }),
      };
      requests.push(step);
      return step;
    };
    switch (command.type) {
      case 'send':
        steps.push(newRequest(normalize(command.request, shape), 'main'));
        return;
      case 'crash':
        steps.push(newRequest({ ...normalize(command.request, shape), hold: true }, 'zombie'));
        return;
      case 'repeat': {
        const original = requests[command.pick % Math.max(1, requests.length)];
        if (original === undefined) {
          steps.push({ type: 'skip', index, reason: 'repeat: no earlier request' });
          return;
        }
        steps.push(newRequest({ ...original.spec, behaviour: command.behaviour, hold: command.hold, priority: command.priority }, 'main', original.index));
        return;
      }
      case 'replay': {
        const original = requests[command.pick % Math.max(1, requests.length)];
        if (original === undefined) {
          steps.push({ type: 'skip', index, reason: 'replay: no earlier request' });
          return;
        }
        if (clock - original.sentAt > TIMING.signatureWindowMs) {
          // The signature check refuses it (401, stale Date) before the engine sees it.
          steps.push({ type: 'skip', index, reason: `replay of #${original.index}: outside the signature's Date window` });
          return;
        }
        // The same bytes again: same signature, same callback headers. Should its handler run (it
        // must not), it succeeds at once, so that the difference shows.
        steps.push({
          type: 'request',
          index,
          spec: { ...original.spec, behaviour: 'ok', hold: false, priority: command.priority },
          engine: 'main',
          requestId: original.requestId,
          callbackId: original.callbackId,
          copyOf: original.index,
          replay: true,
          sentAt: clock,
        });
        return;
      }
      case 'release':
        steps.push({ type: 'release', index, pick: command.pick });
        return;
      case 'advance':
        clock += command.ms;
        steps.push({ type: 'advance', index, ms: command.ms });
        return;
      case 'complete':
        steps.push({
          type: 'complete',
          index,
          entity: command.entity,
          id: command.entity === 'resource' ? ids.resource(command.target % shape.resources) : ids.credential(command.target % shape.credentials),
          state: command.state,
        });
        return;
      case 'capacity':
        steps.push({ type: 'capacity', index, full: command.full });
        return;
    }
  });
  return steps;
}

/** Indexes within the shape (a shrunk or hand-written command may carry any number). */
function normalize(spec: RequestSpec, shape: SequenceShape): RequestSpec {
  const count = isCredentialKind(spec.kind) ? shape.credentials : shape.resources;
  const out: RequestSpec = { ...spec, target: spec.target % count };
  if (spec.kind === 'provisionCredentials') out.parent = (spec.parent ?? 0) % shape.resources;
  if ((spec.kind === 'provision' || spec.kind === 'changePlan') && spec.plan === undefined) out.plan = 'small';
  return out;
}

/** What a request, or a `complete` call, was answered. */
export interface AnswerView {
  status: number;
  message?: string;
  credentials?: Record<string, string>;
}

/**
 * Everything one run shows, as lines: the answer of every request and `complete` call (and the step
 * during which it came), every handler call with what it was given, and the end state.
 */
export interface Observation {
  answers: string[];
  handlers: string[];
  state: string[];
}

/** An answer as one line. */
export function answerLine(index: number, answer: AnswerView | undefined, at: number | 'end' | undefined): string {
  if (answer === undefined) return `#${index} no answer`;
  const parts = [`#${index} ${answer.status}`];
  if (answer.message !== undefined) parts.push(JSON.stringify(answer.message));
  if (answer.credentials !== undefined) parts.push(`credentials ${JSON.stringify(answer.credentials)}`);
  parts.push(at === 'end' ? '(at the end)' : `(during step ${at})`);
  return parts.join(' ');
}

/** The handler messages and values: they name the request whose invocation produced them. */
export const handlerText = {
  provision: (id: string, plan: string, index: number): string => `Bonnet ${id} is ${plan} (#${index})`,
  changePlan: (id: string, plan: string, index: number): string => `Bonnet ${id} resized to ${plan} (#${index})`,
  deprovision: (id: string, index: number): string => `Bonnet ${id} unravelled (#${index})`,
  provisionCredentials: (id: string, index: number): string => `Credentials ${id} issued (#${index})`,
  credentialValues: (id: string, index: number | string): Record<string, string> => ({ BONNETS_URL: `https://${id}-${index}@bonnets.example` }),
  deprovisionCredentials: (id: string, index: number): string => `Credentials ${id} revoked (#${index})`,
  accepted: (id: string, index: number): string => `Working on ${id} (#${index})`,
  refused: (index: number): string => `Refused by the provider (#${index})`,
  /** The plain Error a failing handler throws (never shown: the answer is 500 "Internal error"). */
  failure: (index: number): string => `handler of #${index} crashed`,
  completedDone: (index: number): string => `Completed by step #${index}`,
  completedError: (index: number): string => `Failed, step #${index}`,
  capacity: 'No capacity left for that plan',
};

/** The catalog the harness runs with: `huge` is unknown. */
export const CATALOG = Object.freeze({ bonnets: Object.freeze({ plans: Object.freeze(['small', 'large']) }) });
export const PRODUCT = 'bonnets';
export const REGION = 'all::global';

/** The end state of a run, as read back from a store (or kept by the model). Times are offsets from the run's start. */
export interface EndState {
  resources: {
    id: string;
    record: { product: string; plan: string; region: string; features: Record<string, unknown>; message: string; createdAt: number; updatedAt: number } | undefined;
    tombstone: boolean;
    /** Its credential sets' ids (listCredentials), sorted. */
    credentials: string[];
  }[];
  credentials: {
    id: string;
    record: { resourceId: string; values: Record<string, string>; message: string; createdAt: number } | undefined;
    tombstone: boolean;
  }[];
  operations: { key: string; kind: string; state: string; owner: string; message: string | undefined; deadlineAt: number | undefined; callbackId: string | undefined }[];
  /** Deliveries of this run's callback ids; `undefined` when the store cannot list them. */
  deliveries: { callbackId: string; url: string; state: string; payload: unknown; createdAt: number; deadlineAt: number }[] | undefined;
}

/** The end state as lines, in a fixed order. */
export function stateLines(state: EndState, ids: RunIds): string[] {
  const s = ids.short;
  const lines: string[] = [];
  for (const r of state.resources) {
    const body = r.record === undefined ? 'absent' : `${r.record.product} ${r.record.plan} ${r.record.region}, features ${canonical(r.record.features)}, message ${JSON.stringify(r.record.message)}, created +${r.record.createdAt}, updated +${r.record.updatedAt}`;
    lines.push(`resource ${s(r.id)}: ${body}${r.tombstone ? ', tombstone' : ''}${r.credentials.length > 0 ? `, credentials [${r.credentials.map(s).join(', ')}]` : ''}`);
  }
  for (const c of state.credentials) {
    const body = c.record === undefined ? 'absent' : `of ${s(c.record.resourceId)}, values ${canonical(c.record.values)}, message ${JSON.stringify(c.record.message)}, created +${c.record.createdAt}`;
    lines.push(`credential ${s(c.id)}: ${body}${c.tombstone ? ', tombstone' : ''}`);
  }
  for (const o of state.operations) {
    const [entity, id] = [o.key.slice(0, o.key.indexOf(':')), o.key.slice(o.key.indexOf(':') + 1)];
    const extra = [
      o.message === undefined ? undefined : `message ${JSON.stringify(o.message)}`,
      o.deadlineAt === undefined ? undefined : `deadline +${o.deadlineAt}`,
      o.callbackId === undefined ? undefined : `callback ${s(o.callbackId)}`,
    ].filter((x) => x !== undefined);
    lines.push(`operation ${entity}:${s(id)}: ${o.kind} ${o.state}, owner ${o.owner}${extra.length > 0 ? `, ${extra.join(', ')}` : ''}`);
  }
  if (state.deliveries === undefined) {
    lines.push('deliveries: NOT CHECKED (the store has no listDeliveries)');
  } else {
    const deliveries = state.deliveries
      .map((d) => `delivery ${s(d.callbackId)}: ${d.state}, ${canonical(d.payload)}, created +${d.createdAt}, deadline +${d.deadlineAt}${d.url === callbackUrlOf(d.callbackId) ? '' : `, url ${d.url}`}`)
      .sort();
    lines.push(...deliveries);
  }
  return lines;
}

/** JSON with object keys sorted, so that equal values print equally whatever their key order. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}
