/**
 * The generators of the differential property. The only module of the testkit that loads
 * fast-check, and only when the property runs (see index.ts): importing the testkit never needs it.
 */
import fc from 'fast-check';
import { ADVANCES, type Behaviour, type Command, type OpKind, type Plan, type RequestSpec, type SequenceShape } from './commands.js';

export { fc };

const behaviour = (): fc.Arbitrary<Behaviour> =>
  fc.oneof({ weight: 5, arbitrary: fc.constant<Behaviour>('ok') }, { weight: 1, arbitrary: fc.constant<Behaviour>('refuse') }, { weight: 1, arbitrary: fc.constant<Behaviour>('fail') }, { weight: 2, arbitrary: fc.constant<Behaviour>('accept') });

/** Held about one time in three. */
const held = (): fc.Arbitrary<boolean> => fc.oneof({ weight: 2, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) });

/** A body's `features.seats`, present one time in three. */
const seats = (): fc.Arbitrary<number> => fc.constantFrom(1, 2);

const plan = (): fc.Arbitrary<Plan> => fc.oneof({ weight: 4, arbitrary: fc.constantFrom<Plan>('small', 'large') }, { weight: 1, arbitrary: fc.constant<Plan>('huge') });

/** A generated request. */
export function requestArbitrary(shape: SequenceShape): fc.Arbitrary<RequestSpec> {
  const resource = fc.nat({ max: shape.resources - 1 });
  const credential = fc.nat({ max: shape.credentials - 1 });
  const common = { behaviour: behaviour(), hold: held(), callback: fc.boolean(), priority: fc.nat({ max: 3 }) };
  return fc.oneof(
    { weight: 3, arbitrary: fc.record({ kind: fc.constant<OpKind>('provision'), target: resource, plan: plan(), seats: seats(), ...common }, { requiredKeys: ['kind', 'target', 'plan', 'behaviour', 'hold', 'callback', 'priority'] }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant<OpKind>('changePlan'), target: resource, plan: plan(), seats: seats(), ...common }, { requiredKeys: ['kind', 'target', 'plan', 'behaviour', 'hold', 'callback', 'priority'] }) },
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
