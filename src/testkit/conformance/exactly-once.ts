/**
 * Store conformance: exactly-once on the failure paths (issue 19), through the operation engine on
 * the store under test. Whatever a signed request's first answer was (a 409, a 500, a 503 while
 * its handler ran on, a 400 from the catalog or the `validate` hook, a 404), the same request
 * again answers it and never runs a handler; a later change stands. An adapter passes these only
 * if its claims record refusals atomically, its commits record answers, and `recordReplay` keeps
 * the first answer: the engine's side of the rule is the same for every store.
 */
import assert from 'node:assert/strict';
import { BadRequestError } from '../../errors.js';
import { OperationEngine } from '../../idempotency/engine.js';
import type { Answer, OperationCall, TableEnv } from '../../idempotency/operations.js';
import type { Clock } from '../../lib/clock.js';
import { createLogger } from '../../lib/logger.js';
import type { Catalog, ProviderHandlers } from '../../domain/handlers.js';
import type { OperationKind, Store } from '../../store/types.js';
import { T0, type Suite } from './fixtures.js';

const WAIT_MS = 10_000;
const LEASE_MS = 30_000;
const CATALOG: Catalog = { bonnets: { plans: ['small', 'large', 'locked'] } };

/** A clock the cases move by hand: the engine's wait limit passes when a case says so. */
function handClock(start: number): Clock & { advance(ms: number): void } {
  let t = start;
  let timers: { at: number; fire: () => void }[] = [];
  return {
    now: () => t,
    sleep: (ms) => new Promise<void>((resolve) => timers.push({ at: t + ms, fire: resolve })),
    after(ms, fire) {
      const timer = { at: t + ms, fire };
      timers.push(timer);
      return () => {
        timers = timers.filter((other) => other !== timer);
      };
    },
    advance(ms) {
      t += ms;
      const due = timers.filter((timer) => timer.at <= t);
      timers = timers.filter((timer) => timer.at > t);
      for (const timer of due) timer.fire();
    },
  };
}

interface Latch {
  entered: Promise<void>;
  enter(): void;
  open(): void;
  opened: Promise<void>;
}

function latch(): Latch {
  let enter!: () => void;
  let open!: () => void;
  const entered = new Promise<void>((resolve) => (enter = resolve));
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { entered, enter, open, opened };
}

/** Engines over one store, with handlers that count their calls, can throw once, and can wait on a latch. */
function rig(store: Store) {
  const clock = handClock(T0);
  // The engine's view of the store: tells the case when a claim found the key busy (a duplicate waits).
  let onBusy: (() => void) | undefined;
  const watched = Object.create(store) as Store;
  watched.claimOperation = async (input) => {
    const result = await store.claimOperation(input);
    if (result.outcome === 'busy') onBusy?.();
    return result;
  };
  const busy = (): Promise<void> => new Promise<void>((resolve) => (onBusy = resolve));
  const calls: Record<string, number> = {};
  const failNext = new Set<OperationKind>();
  const gates: Partial<Record<OperationKind, Latch>> = {};
  const hook = { refusePlan: undefined as string | undefined };
  const step = async (kind: OperationKind): Promise<void> => {
    calls[kind] = (calls[kind] ?? 0) + 1;
    const gate = gates[kind];
    if (gate !== undefined) {
      delete gates[kind];
      gate.enter();
      await gate.opened;
    }
    if (failNext.delete(kind)) throw new Error('the provider backend fell over');
  };
  const handlers: ProviderHandlers = {
    provision: async ({ plan }) => (await step('provision'), `Your ${plan} bonnet is ready`),
    changePlan: async ({ plan }) => (await step('changePlan'), `Resized to ${plan}`),
    deprovision: async () => {
      await step('deprovision');
    },
    provisionCredentials: async ({ id }) => (await step('provisionCredentials'), { credentials: { BONNETS_URL: `https://${id}@bonnets.example` } }),
    deprovisionCredentials: async () => {
      await step('deprovisionCredentials');
    },
  };
  const engine = (catalog: Catalog): OperationEngine => {
    const env: TableEnv = {
      catalog,
      validate: ({ plan }) => {
        if (plan === hook.refusePlan) throw new BadRequestError(`Plan ${plan} is not available for this account`, 'ERR_PLAN_CHANGE_REFUSED');
      },
      checkCallbackUrl: undefined,
    };
    return new OperationEngine({
      store: watched, handlers, env, owner: 'conformance', clock, leaseMs: LEASE_MS, waitMs: WAIT_MS, pendingDeadlineMs: 86_400_000,
      replayTtlMs: 600_000, callbacks: false, logger: createLogger(false),
    });
  };
  let current = engine(CATALOG);
  let signatures = 0;
  /** A signed call: `sig` names its signature (the same one again is the same request). */
  const call = (kind: OperationKind, id: string, body: unknown, sig = `sig-${++signatures}`): OperationCall => ({
    kind, id, body, callbackId: undefined, callbackUrl: undefined, signedHeaders: [], requestId: sig,
  });
  /** The answer a call gets, errors rendered as the router renders them. */
  const answer = async (c: OperationCall): Promise<Answer> => {
    try {
      return await current.handle(c);
    } catch (error) {
      // A MarketplaceError renders as its status and message; anything else as a bare 500.
      const known = error as { status?: unknown; message?: unknown };
      if (typeof known.status !== 'number') return { status: 500, body: { message: 'Internal error' } };
      return { status: known.status, body: { message: known.message } };
    }
  };
  const gate = (kind: OperationKind): Latch => (gates[kind] = latch());
  /** Waits (on real time, bounded) until the store no longer holds `key`: a handler past the wait limit finished. */
  const released = async (key: string): Promise<void> => {
    for (let i = 0; i < 2000; i++) {
      if ((await store.getOperation(key)) === undefined) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.fail(`${key} was never released`);
  };
  return {
    clock, calls, failNext, hook, gate, call, answer, released, busy,
    redeploy: (catalog: Catalog) => {
      current = engine(catalog);
    },
  };
}

const put = (id: string, plan = 'small') => ({ id, product: 'bonnets', plan, region: 'all::global' });

/** Registers the failure-path replay cases (through the engine). */
export function exactlyOnceCases({ describe, test }: Suite): void {
  describe('exactly once on the failure paths (through the engine)', () => {
    test('409 first: the replay answers 409 after the holder finished and after a later change', async (store) => {
      const r = rig(store);
      assert.equal((await r.answer(r.call('provision', 'r1', put('r1')))).status, 201);
      const gate = r.gate('changePlan');
      const toLarge = r.answer(r.call('changePlan', 'r1', { plan: 'large' }));
      await gate.entered;
      const locked = r.call('changePlan', 'r1', { plan: 'locked' });
      const refused = await r.answer(locked);
      assert.deepEqual(refused, { status: 409, body: { message: 'Another operation on this entity is in progress' } });
      gate.open();
      assert.equal((await toLarge).status, 200);
      assert.deepEqual(await r.answer(locked), refused);
      assert.equal((await r.answer(r.call('changePlan', 'r1', { plan: 'small' }))).status, 200);
      assert.deepEqual(await r.answer(locked), refused);
      assert.equal((await store.getResource('r1'))?.plan, 'small');
      assert.equal(r.calls.changePlan, 2);
    });

    test('500 first: the replay answers 500 and undoes nothing', async (store) => {
      const r = rig(store);
      await r.answer(r.call('provision', 'r1', put('r1')));
      r.failNext.add('changePlan');
      const failing = r.call('changePlan', 'r1', { plan: 'large' });
      assert.deepEqual(await r.answer(failing), { status: 500, body: { message: 'Internal error' } });
      assert.equal((await r.answer(r.call('changePlan', 'r1', { plan: 'large' }))).status, 200);
      assert.equal((await r.answer(r.call('changePlan', 'r1', { plan: 'small' }))).status, 200);
      assert.deepEqual(await r.answer(failing), { status: 500, body: { message: 'Internal error' } });
      assert.equal((await store.getResource('r1'))?.plan, 'small');
      assert.equal(r.calls.changePlan, 3);
    });

    test('503 first, the handler failing on past the wait limit: the replay answers that 500', async (store) => {
      const r = rig(store);
      await r.answer(r.call('provision', 'r1', put('r1')));
      const gate = r.gate('changePlan');
      r.failNext.add('changePlan');
      const slow = r.call('changePlan', 'r1', { plan: 'large' });
      const first = r.answer(slow);
      await gate.entered;
      r.clock.advance(WAIT_MS);
      assert.deepEqual(await first, { status: 503, body: { message: 'The operation is still in progress, retry later' } });
      gate.open();
      await r.released('resource:r1');
      assert.deepEqual(await r.answer(slow), { status: 500, body: { message: 'Internal error' } });
      assert.equal(r.calls.changePlan, 1);
      assert.equal((await store.getResource('r1'))?.plan, 'small');
    });

    test('a duplicate answered 503 after waiting keeps its 503 when the first run failed: it never runs', async (store) => {
      const r = rig(store);
      await r.answer(r.call('provision', 'r1', put('r1')));
      const gate = r.gate('changePlan');
      r.failNext.add('changePlan');
      const first = r.answer(r.call('changePlan', 'r1', { plan: 'large' }));
      await gate.entered;
      const duplicate = r.call('changePlan', 'r1', { plan: 'large' });
      const waitingStarted = r.busy();
      const waiting = r.answer(duplicate);
      await waitingStarted;
      // One wait limit for both: the first run's answer and its duplicate's.
      r.clock.advance(WAIT_MS);
      assert.equal((await first).status, 503);
      assert.equal((await waiting).status, 503);
      gate.open();
      await r.released('resource:r1');
      assert.equal((await r.answer(r.call('changePlan', 'r1', { plan: 'large' }))).status, 200);
      assert.equal((await r.answer(r.call('changePlan', 'r1', { plan: 'small' }))).status, 200);
      assert.equal((await r.answer(duplicate)).status, 503);
      assert.equal((await store.getResource('r1'))?.plan, 'small');
      assert.equal(r.calls.changePlan, 3);
    });

    test('validate-hook 400 first: the replay answers 400 once the hook would allow it', async (store) => {
      const r = rig(store);
      r.hook.refusePlan = 'large';
      const provision = r.call('provision', 'r1', put('r1', 'large'));
      const refused = await r.answer(provision);
      assert.deepEqual(refused, { status: 400, body: { message: 'Plan large is not available for this account' } });
      await r.answer(r.call('provision', 'r2', put('r2')));
      const change = r.call('changePlan', 'r2', { plan: 'large' });
      assert.equal((await r.answer(change)).status, 400);
      r.hook.refusePlan = undefined;
      assert.deepEqual(await r.answer(provision), refused);
      assert.equal((await r.answer(change)).status, 400);
      assert.equal(await store.getResource('r1'), undefined);
      assert.equal((await store.getResource('r2'))?.plan, 'small');
      assert.deepEqual([r.calls.provision, r.calls.changePlan ?? 0], [1, 0]);
    });

    test('catalog 400 first: the replay answers 400 after a redeploy added the plan', async (store) => {
      const r = rig(store);
      const provision = r.call('provision', 'r1', put('r1', 'huge'));
      const refused = await r.answer(provision);
      assert.deepEqual(refused, { status: 400, body: { message: 'Unknown plan huge for product bonnets' } });
      r.redeploy({ bonnets: { plans: ['small', 'huge'] } });
      assert.deepEqual(await r.answer(provision), refused);
      assert.equal(await store.getResource('r1'), undefined);
      assert.equal(r.calls.provision ?? 0, 0);
      assert.equal((await r.answer(r.call('provision', 'r1', put('r1', 'huge')))).status, 201, 'a new request follows the new catalog');
    });

    test('404 first: a credential PUT refused for a missing resource answers 404 once the resource exists', async (store) => {
      const r = rig(store);
      const credential = r.call('provisionCredentials', 'c1', { id: 'c1', resource_id: 'r1' });
      const refused = await r.answer(credential);
      assert.deepEqual(refused, { status: 404, body: { message: 'Resource not found' } });
      assert.equal((await r.answer(r.call('provision', 'r1', put('r1')))).status, 201);
      assert.deepEqual(await r.answer(credential), refused);
      assert.equal(await store.getCredential('c1'), undefined);
      assert.equal(r.calls.provisionCredentials ?? 0, 0);
    });
  });
}
