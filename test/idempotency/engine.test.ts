import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError, MarketplaceError } from '../../src/errors.js';
import { HANDOFF_MESSAGE, OperationEngine } from '../../src/idempotency/engine.js';
import { OPERATIONS, prepareOperation, type OperationCall, type TableEnv } from '../../src/idempotency/operations.js';
import { createLogger } from '../../src/lib/logger.js';
import { accepted, type ProviderHandlers } from '../../src/domain/handlers.js';
import { IMMEDIATE, immediateOf } from '../../src/store/common.js';
import { memoryStore } from '../../src/store/memory.js';
import type { ClaimInput, CommitInput, DiagnosableStore, OperationKind } from '../../src/store/types.js';
import { deferred } from '../outbox/helpers.js';
import { manualClock } from './helpers.js';

const WAIT_MS = 10_000;
const LEASE_MS = 30_000;
const env: TableEnv = { catalog: { bonnets: { plans: ['small', 'large'] } }, validate: undefined, checkCallbackUrl: undefined };

/** Handlers that count calls; `gate` makes the next call of one wait on a latch. */
function handlers() {
  const calls: Partial<Record<OperationKind, number>> = {};
  const gates: Partial<Record<OperationKind, { entered: ReturnType<typeof deferred<void>>; open: ReturnType<typeof deferred<void>> }>> = {};
  const behaviour: { fail?: () => unknown } = {};
  const step = async (kind: OperationKind): Promise<unknown> => {
    calls[kind] = (calls[kind] ?? 0) + 1;
    const gate = gates[kind];
    if (gate !== undefined) {
      delete gates[kind];
      gate.entered.resolve();
      await gate.open.promise;
    }
    if (behaviour.fail !== undefined) {
      const fail = behaviour.fail;
      behaviour.fail = undefined;
      return fail();
    }
    return undefined;
  };
  const table: ProviderHandlers = {
    provision: async ({ plan }) => (await step('provision'), `Your ${plan} bonnet`),
    changePlan: async ({ plan }) => (await step('changePlan'), `Now ${plan}`),
    deprovision: async () => {
      await step('deprovision');
    },
    provisionCredentials: async ({ id }) =>
      ((await step('provisionCredentials')) as { credentials: Record<string, string> } | undefined) ?? { credentials: { BONNETS_URL: `https://${id}@bonnets.example` } },
    deprovisionCredentials: async () => {
      await step('deprovisionCredentials');
    },
  };
  const gate = (kind: OperationKind) => (gates[kind] = { entered: deferred(), open: deferred() });
  return { table, calls, gate, behaviour };
}

function setup(options: { callbacks?: boolean } = {}) {
  const clock = manualClock();
  const store: DiagnosableStore = memoryStore();
  const h = handlers();
  const engine = new OperationEngine({
    store,
    handlers: h.table,
    env,
    owner: 'test',
    clock,
    leaseMs: LEASE_MS,
    waitMs: WAIT_MS,
    pendingDeadlineMs: 86_400_000,
    replayTtlMs: 600_000,
    callbacks: options.callbacks ?? false,
    logger: createLogger(false),
  });
  const call = (kind: OperationKind, id: string, body?: unknown, extra: Partial<OperationCall> = {}): OperationCall => ({
    kind, id, body, callbackId: undefined, callbackUrl: undefined, signedHeaders: ['x-callback-id', 'x-callback-url'], requestId: undefined, ...extra,
  });
  const run = async (c: OperationCall) => engine.execute(await prepareOperation(c, env));
  const provision = (id: string, plan = 'small', extra: Partial<OperationCall> = {}) => run(call('provision', id, { id, product: 'bonnets', plan, region: 'all::global' }, extra));
  return { clock, store, engine, run, call, provision, ...h };
}

/** Settles `promise` as a rejection value or its result, for asserting on errors. */
const outcome = <T>(promise: Promise<T>) => promise.then((value) => ({ value }), (error: unknown) => ({ error }));

describe('operation engine', () => {
  it('makes a duplicate wait for the running one and answers both the same, calling the handler once', async () => {
    const s = setup();
    const gate = s.gate('provision');
    const first = s.provision('r1');
    await gate.entered.promise;
    const second = s.provision('r1');
    await s.clock.settle();
    assert.equal(s.calls.provision, 1);
    gate.open.resolve();
    assert.deepEqual(await first, { status: 201, body: { message: 'Your small bonnet' } });
    assert.deepEqual(await second, await first);
    assert.equal(s.calls.provision, 1);
  });

  it('takes over an operation whose lease lapsed, polling on the clock until then', async () => {
    const s = setup();
    const prepared = await prepareOperation(s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }), env);
    await s.store.claimOperation({ ...prepared, owner: 'crashed', now: s.clock.now(), leaseMs: 3_000 });
    const answer = s.engine.execute(prepared);
    await s.clock.settle();
    assert.equal(s.calls.provision, undefined, 'the live claim is respected');
    for (let waited = 0; waited < 3_500; waited += 500) await s.clock.advance(500);
    assert.deepEqual(await answer, { status: 201, body: { message: 'Your small bonnet' } });
    assert.equal(s.calls.provision, 1);
  });

  it('answers 503 ERR_OPERATION_IN_PROGRESS at the wait limit; the handler keeps its claim and commits later', async () => {
    const s = setup();
    const gate = s.gate('provision');
    const answer = outcome(s.provision('r1'));
    await gate.entered.promise;
    await s.clock.advance(WAIT_MS);
    const result = await answer;
    assert.ok('error' in result && result.error instanceof MarketplaceError);
    assert.deepEqual([result.error.status, result.error.code], [503, 'ERR_OPERATION_IN_PROGRESS']);
    assert.equal((await s.store.getOperation('resource:r1'))?.state, 'running', 'the claim is held (and renewed) past the answer');
    gate.open.resolve();
    await s.clock.settle();
    assert.equal((await s.store.getResource('r1'))?.plan, 'small');
    assert.equal(await s.store.getOperation('resource:r1'), undefined);
  });

  it('answers a different request on a held entity with 409 ERR_OPERATION_CONFLICT at once', async () => {
    const s = setup();
    const gate = s.gate('provision');
    const first = s.provision('r1');
    await gate.entered.promise;
    const other = await outcome(s.provision('r1', 'large'));
    assert.ok('error' in other && other.error instanceof MarketplaceError);
    assert.deepEqual([other.error.status, other.error.code], [409, 'ERR_OPERATION_CONFLICT']);
    gate.open.resolve();
    assert.equal((await first).status, 201);
  });

  it('releases the claim on every path that commits nothing', async () => {
    const s = setup();
    const released = async (what: string) => assert.equal(await s.store.getOperation('resource:r1'), undefined, what);

    const missing = await outcome(s.run(s.call('changePlan', 'r1', { plan: 'large' })));
    assert.equal((missing as { error: MarketplaceError }).error.status, 404);
    await released('a 404 decision');
    s.behaviour.fail = () => {
      throw new BadRequestError('No bonnets today');
    };
    assert.equal(((await outcome(s.provision('r1'))) as { error: MarketplaceError }).error.status, 400);
    await released('a refusal');
    s.behaviour.fail = () => {
      throw new Error('boom');
    };
    assert.equal(((await outcome(s.provision('r1'))) as { error: Error }).error.message, 'boom');
    await released('a failure');

    await s.provision('r1');
    s.behaviour.fail = () => ({ credentials: { 'not a key': 'x' } });
    const invalid = await outcome(s.run(s.call('provisionCredentials', 'c1', { id: 'c1', resource_id: 'r1' })));
    assert.equal((invalid as { error: MarketplaceError }).error.status, 500);
    assert.equal(await s.store.getOperation('credential:c1'), undefined, 'an invalid credential set');
    assert.equal(await s.store.getCredential('c1'), undefined);
  });

  it('answers a replayed request id with its recorded answer and never runs the handler again', async () => {
    const s = setup();
    await s.provision('r1');
    const toLarge = s.call('changePlan', 'r1', { plan: 'large' }, { requestId: 'sig-large' });
    assert.deepEqual(await s.run(toLarge), { status: 200, body: { message: 'Now large' } });
    await s.run(s.call('changePlan', 'r1', { plan: 'small' }, { requestId: 'sig-small' }));
    assert.deepEqual(await s.run(toLarge), { status: 200, body: { message: 'Now large' } });
    assert.equal(s.calls.changePlan, 2);
    assert.equal((await s.store.getResource('r1'))?.plan, 'small');
  });

  it('keeps each replay record for replayTtlMs and prunes expired ones at most once a minute', async () => {
    const s = setup();
    const commits: (number | undefined)[] = [];
    const prunes: number[] = [];
    const commit = s.store.commitOperation.bind(s.store);
    s.store.commitOperation = async (key, token, input) => (commits.push(input.replay?.expiresAt), commit(key, token, input));
    const prune = s.store.pruneReplays.bind(s.store);
    s.store.pruneReplays = async (now) => (prunes.push(now), prune(now));

    await s.provision('r1', 'small', { requestId: 'sig-1' });
    await s.provision('r2', 'small', { requestId: 'sig-2' });
    assert.deepEqual(commits, [s.clock.now() + 600_000, s.clock.now() + 600_000]);
    assert.deepEqual(prunes, [s.clock.now()], 'one prune within the minute');
    await s.clock.advance(60_000);
    await s.provision('r3', 'small', { requestId: 'sig-3' });
    assert.equal(prunes.length, 2);
  });

  it('claims and commits through a store method\'s synchronous form when it carries one, and through a wrapper that replaces the method as written', async () => {
    const s = setup();
    const claimNow = immediateOf(s.store.claimOperation);
    const commitNow = immediateOf(s.store.commitOperation);
    assert.ok(claimNow !== undefined && commitNow !== undefined, 'memoryStore carries both synchronous forms');
    const used: string[] = [];
    // Promise forms carrying synchronous forms, each counted: the engine takes the synchronous ones.
    const claimAsync = s.store.claimOperation;
    const commitAsync = s.store.commitOperation;
    s.store.claimOperation = Object.assign(async (input: ClaimInput) => (used.push('claim promised'), claimAsync(input)), {
      [IMMEDIATE]: (input: ClaimInput) => (used.push('claim now'), claimNow.call(s.store, input)),
    });
    s.store.commitOperation = Object.assign(async (key: string, token: string, input: CommitInput) => (used.push('commit promised'), commitAsync(key, token, input)), {
      [IMMEDIATE]: (key: string, token: string, input: CommitInput) => (used.push('commit now'), commitNow.call(s.store, key, token, input)),
    });
    assert.deepEqual(await s.provision('r1', 'small', { requestId: 'sig-1' }), { status: 201, body: { message: 'Your small bonnet' } });
    assert.deepEqual(used, ['claim now', 'commit now']);

    // A wrapper (a fault injector, a timing proxy) replaces the method: it is what gets called.
    used.length = 0;
    s.store.claimOperation = async (input) => (used.push('claim wrapped'), claimAsync(input));
    s.store.commitOperation = async (key, token, input) => (used.push('commit wrapped'), commitAsync(key, token, input));
    assert.deepEqual(await s.provision('r2', 'large', { requestId: 'sig-2' }), { status: 201, body: { message: 'Your large bonnet' } });
    assert.deepEqual(used, ['claim wrapped', 'commit wrapped']);
    assert.equal(s.calls.provision, 2);
    assert.equal((await s.store.getResource('r2'))?.plan, 'large');
  });

  it('answers an identical repeat of a request id with the state\'s answer when that needs no work', async () => {
    const s = setup();
    await s.provision('r1');
    const del = s.call('deprovision', 'r1', undefined, { requestId: 'sig-del' });
    assert.equal((await s.run(del)).status, 204);
    const again = await outcome(s.run(del));
    assert.equal((again as { error: MarketplaceError }).error.status, 404);
    assert.equal(s.calls.deprovision, 1);
  });

  it('serializes a credential PUT behind its resource\'s running DELETE: the PUT then answers 404, no handler', async () => {
    const s = setup();
    await s.provision('r1');
    const gate = s.gate('deprovision');
    const deleting = s.run(s.call('deprovision', 'r1'));
    await gate.entered.promise;
    const credential = outcome(s.run(s.call('provisionCredentials', 'c1', { id: 'c1', resource_id: 'r1' })));
    await s.clock.settle();
    gate.open.resolve();
    assert.equal((await deleting).status, 204);
    assert.equal(((await credential) as { error: MarketplaceError }).error.status, 404);
    assert.equal(s.calls.provisionCredentials, undefined);
  });

  it('makes a DELETE wait for a running credential PUT and hands it that credential', async () => {
    const s = setup();
    await s.provision('r1');
    const seen: string[][] = [];
    const original = s.table.deprovision;
    s.table.deprovision = async (request, context) => {
      seen.push(request.credentials.map((c) => c.id));
      return original(request, context);
    };
    const gate = s.gate('provisionCredentials');
    const credential = s.run(s.call('provisionCredentials', 'c1', { id: 'c1', resource_id: 'r1' }));
    await gate.entered.promise;
    const deleting = s.run(s.call('deprovision', 'r1'));
    await s.clock.settle();
    assert.equal(s.calls.deprovision, undefined);
    gate.open.resolve();
    assert.equal((await credential).status, 201);
    assert.equal((await deleting).status, 204);
    assert.deepEqual(seen, [['c1']]);
  });

  it('answers 409 to a credential PUT while its resource\'s deprovision is pending (202)', async () => {
    const s = setup();
    await s.provision('r1');
    s.table.deprovision = () => accepted('Unravelling');
    assert.equal((await s.run(s.call('deprovision', 'r1'))).status, 202);
    const blocked = await outcome(s.run(s.call('provisionCredentials', 'c1', { id: 'c1', resource_id: 'r1' })));
    assert.equal((blocked as { error: MarketplaceError }).error.code, 'ERR_OPERATION_CONFLICT');
  });

  it('hands a handler past the wait limit to the callback when the request carries callback headers', async () => {
    const s = setup({ callbacks: true });
    const gate = s.gate('provision');
    const headers = { callbackId: 'cb1', callbackUrl: 'https://connector.example/v1/callbacks/cb1' };
    const answer = s.provision('r1', 'small', headers);
    await gate.entered.promise;
    await s.clock.advance(WAIT_MS);
    assert.deepEqual(await answer, { status: 202, body: { message: HANDOFF_MESSAGE } });
    assert.deepEqual(await s.provision('r1', 'small', headers), { status: 202, body: { message: HANDOFF_MESSAGE } }, 'a repeat meanwhile');
    gate.open.resolve();
    await s.clock.settle();
    const [delivery] = await s.store.listDeliveries();
    assert.deepEqual([delivery?.callbackId, delivery?.payload], ['cb1', { state: 'done', message: 'Your small bonnet' }]);
    assert.equal((await s.store.getResource('r1'))?.plan, 'small');
  });

  it('reports a handed-over handler\'s refusal as an error callback and keeps nothing', async () => {
    const s = setup({ callbacks: true });
    const gate = s.gate('provision');
    s.behaviour.fail = () => {
      throw new BadRequestError('No bonnets today');
    };
    const answer = s.provision('r1', 'small', { callbackId: 'cb1', callbackUrl: 'https://connector.example/v1/callbacks/cb1' });
    await gate.entered.promise;
    await s.clock.advance(WAIT_MS);
    assert.equal((await answer).status, 202);
    gate.open.resolve();
    await s.clock.settle();
    const [delivery] = await s.store.listDeliveries();
    assert.deepEqual(delivery?.payload, { state: 'error', message: 'No bonnets today' });
    assert.equal(await s.store.getOperation('resource:r1'), undefined);
    assert.equal(await s.store.getResource('r1'), undefined);
  });

  it('a complete() that arrives while the 202 is still being recorded waits for it instead of losing the outcome', async () => {
    const s = setup();
    await s.provision('r1');
    const written = deferred<void>();
    const markOperationPending = s.store.markOperationPending.bind(s.store);
    s.store.markOperationPending = async (...args) => {
      await written.promise;
      return markOperationPending(...args);
    };
    let completing: Promise<void> | undefined;
    s.table.changePlan = () => {
      // The handler's timer fires before the engine has recorded the pending operation.
      setImmediate(() => {
        completing = s.engine.complete({ entity: 'resource', id: 'r1' }, { state: 'done' });
      });
      return accepted('Resizing');
    };
    const answer = s.run(s.call('changePlan', 'r1', { plan: 'large' }));
    await s.clock.settle();
    assert.ok(completing !== undefined, 'complete() was called before the pending mark was written');
    written.resolve();
    assert.equal((await answer).status, 202);
    await completing;
    assert.equal((await s.store.getResource('r1'))?.plan, 'large');
  });

  it('completes a pending operation through the same table', async () => {
    const s = setup();
    await s.provision('r1');
    s.table.changePlan = () => accepted('Resizing');
    assert.equal((await s.run(s.call('changePlan', 'r1', { plan: 'large' }))).status, 202);
    await s.engine.complete({ entity: 'resource', id: 'r1' }, { state: 'done' });
    assert.equal((await s.store.getResource('r1'))?.plan, 'large');
    await assert.rejects(s.engine.complete({ entity: 'resource', id: 'r1' }, { state: 'done' }), (error: unknown) => error instanceof MarketplaceError && error.code === 'ERR_OPERATION_NOT_PENDING');
  });
});

describe('operation table', () => {
  it('has one descriptor per operation kind, each with its default message', () => {
    assert.deepEqual(Object.keys(OPERATIONS).sort(), ['changePlan', 'deprovision', 'deprovisionCredentials', 'provision', 'provisionCredentials']);
    for (const descriptor of Object.values(OPERATIONS)) assert.ok(descriptor.defaultMessage.length >= 3);
  });

  it('refuses unknown catalog entries, mismatched ids and unsigned callback headers before any claim', async () => {
    const call = (body: unknown, extra: Partial<OperationCall> = {}): OperationCall => ({ kind: 'provision', id: 'r1', body, callbackId: undefined, callbackUrl: undefined, signedHeaders: [], requestId: undefined, ...extra });
    // A refusal throws at once (no claim, no promise): the engine's handle() answers it.
    const codeOf = (c: OperationCall): string | undefined => {
      try {
        // Without a validate hook nothing is awaited: the refusal cannot hide in a promise.
        assert.ok(!(prepareOperation(c, env) instanceof Promise));
      } catch (error) {
        return (error as MarketplaceError).code;
      }
      return undefined;
    };
    assert.equal(codeOf(call({ id: 'r1', product: 'hats', plan: 'small', region: 'all::global' })), 'ERR_UNKNOWN_PRODUCT');
    assert.equal(codeOf(call({ id: 'r2', product: 'bonnets', plan: 'small', region: 'all::global' })), 'ERR_ID_MISMATCH');
    assert.equal(codeOf(call({ id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }, { callbackId: 'cb1' })), 'ERR_REQUIRED_HEADER_UNSIGNED');
  });

  it('fingerprints by the compared properties only', async () => {
    const fp = async (body: unknown) => (await prepareOperation({ kind: 'provision', id: 'r1', body, callbackId: undefined, callbackUrl: undefined, signedHeaders: [], requestId: undefined }, env)).fingerprint;
    const base = { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' };
    assert.equal(await fp({ ...base, features: { a: 1 } }), await fp(base));
    assert.notEqual(await fp({ ...base, plan: 'large' }), await fp(base));
  });
});

describe('operation engine: every first answer is recorded (issue 19)', () => {
  /** An engine whose `validate` hook refuses a plan the test names; `handle` runs calls as the router does. */
  function hooked() {
    const s = setup();
    const hook = { refuse: undefined as string | undefined };
    const engine = new OperationEngine({
      store: s.store,
      handlers: s.table,
      env: { ...env, validate: ({ plan }) => {
        if (plan === hook.refuse) throw new BadRequestError(`Plan ${plan} is not available`, 'ERR_PLAN_CHANGE_REFUSED');
      } },
      owner: 'test',
      clock: s.clock,
      leaseMs: LEASE_MS,
      waitMs: WAIT_MS,
      pendingDeadlineMs: 86_400_000,
      replayTtlMs: 600_000,
      callbacks: false,
      logger: createLogger(false),
    });
    const answer = (c: OperationCall) => outcome(engine.handle(c));
    return { ...s, hook, engine, answer };
  }
  const statusOf = (result: { value: { status: number } } | { error: unknown }) => ('value' in result ? result.value.status : (result.error as MarketplaceError).status);

  it('records a refusal from validation before any claim, and answers it to the same request once the hook allows it', async () => {
    const s = hooked();
    s.hook.refuse = 'large';
    const put = s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'large', region: 'all::global' }, { requestId: 'sig-put' });
    assert.equal(statusOf(await s.answer(put)), 400);
    assert.equal(await s.store.getOperation('resource:r1'), undefined, 'nothing was claimed');
    s.hook.refuse = undefined;
    const replay = await s.answer(put);
    assert.equal(statusOf(replay), 400);
    assert.equal(s.calls.provision, undefined);
    assert.equal(statusOf(await s.answer({ ...put, requestId: 'sig-new' })), 201, 'a new request follows the hook of now');
  });

  it('answers a replay whose validation now refuses with the answer it got first', async () => {
    const s = hooked();
    const put = s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'large', region: 'all::global' }, { requestId: 'sig-put' });
    assert.deepEqual(await s.engine.handle(put), { status: 201, body: { message: 'Your large bonnet' } });
    s.hook.refuse = 'large';
    assert.deepEqual(await s.engine.handle(put), { status: 201, body: { message: 'Your large bonnet' } }, 'the recorded 201, not a new 400');
    assert.equal(s.calls.provision, 1);
  });

  it('does not consult the hook for a replay under the claim: a replayed PATCH answers its record', async () => {
    const s = hooked();
    await s.engine.handle(s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }, { requestId: 'sig-1' }));
    const toLarge = s.call('changePlan', 'r1', { plan: 'large' }, { requestId: 'sig-large' });
    assert.equal((await s.engine.handle(toLarge)).status, 200);
    await s.engine.handle(s.call('changePlan', 'r1', { plan: 'small' }, { requestId: 'sig-small' }));
    s.hook.refuse = 'large';
    assert.deepEqual(await s.engine.handle(toLarge), { status: 200, body: { message: 'Now large' } });
    assert.equal((await s.store.getResource('r1'))?.plan, 'small');
  });

  it('records a 409 conflict in the claim and a 500 with the release, each answered again without a handler', async () => {
    const s = hooked();
    await s.engine.handle(s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }, { requestId: 'sig-1' }));
    const gate = s.gate('changePlan');
    const running = s.engine.handle(s.call('changePlan', 'r1', { plan: 'large' }, { requestId: 'sig-large' }));
    await gate.entered.promise;
    const other = s.call('changePlan', 'r1', { plan: 'small' }, { requestId: 'sig-conflict' });
    const refused = await s.answer(other);
    assert.equal(statusOf(refused), 409);
    gate.open.resolve();
    await running;
    assert.deepEqual(await s.engine.handle(other), { status: 409, body: { message: 'Another operation on this entity is in progress' } });

    s.behaviour.fail = () => {
      throw new Error('boom');
    };
    const failing = s.call('changePlan', 'r1', { plan: 'small' }, { requestId: 'sig-boom' });
    assert.equal(((await s.answer(failing)) as { error: Error }).error.message, 'boom');
    assert.equal(await s.store.getOperation('resource:r1'), undefined, 'released in the same commit');
    assert.deepEqual(await s.engine.handle(failing), { status: 500, body: { message: 'Internal error' } });
    assert.equal(s.calls.changePlan, 2, 'large ran, the failure ran once; neither replay ran');
    assert.equal((await s.store.getResource('r1'))?.plan, 'large');
  });

  it('a handler past the wait limit whose claim was lost by its commit still records its answer: the replay never runs it again', async () => {
    const s = hooked();
    await s.engine.handle(s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }, { requestId: 'sig-r1' }));
    const commit = s.store.commitOperation.bind(s.store);
    let lose = false;
    s.store.commitOperation = async (key, token, input) => (lose ? { outcome: 'lease_lost' } : commit(key, token, input));
    const gate = s.gate('changePlan');
    const slow = s.call('changePlan', 'r1', { plan: 'large' }, { requestId: 'sig-slow' });
    const first = s.answer(slow);
    await gate.entered.promise;
    await s.clock.advance(WAIT_MS);
    assert.equal(statusOf(await first), 503);
    lose = true;
    gate.open.resolve();
    await s.clock.settle();
    lose = false;
    await s.store.releaseOperation('resource:r1', (await s.store.getOperation('resource:r1'))!.token);
    // Its recorded answer: the 503 of the lost claim (LeaseLostError), given as recorded.
    assert.deepEqual(await s.answer(slow), { value: { status: 503, body: { message: 'Operation was taken over by another worker, retry later' } } });
    assert.equal(s.calls.changePlan, 1, 'the replay did not run the handler again');
    assert.equal((await s.store.getResource('r1'))?.plan, 'small');
  });

  it('answers an identical request of a pending operation with its 202, recorded for its own signature', async () => {
    const s = hooked();
    await s.engine.handle(s.call('provision', 'r1', { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }, { requestId: 'sig-r1' }));
    s.behaviour.fail = () => accepted('Issuing');
    const first = s.call('provisionCredentials', 'c1', { id: 'c1', resource_id: 'r1' }, { requestId: 'sig-1' });
    assert.deepEqual(await s.engine.handle(first), { status: 202, body: { message: 'Issuing' } });
    const twin = { ...first, requestId: 'sig-2' };
    assert.deepEqual(await s.engine.handle(twin), { status: 202, body: { message: 'Issuing' } });
    await s.engine.complete({ entity: 'credential', id: 'c1' }, { state: 'error', message: 'No keys left' });
    assert.deepEqual(await s.engine.handle(twin), { status: 202, body: { message: 'Issuing' } }, 'its recorded 202: the replay never runs the handler');
    assert.equal(s.calls.provisionCredentials, 1);
    assert.equal((await s.engine.handle({ ...first, requestId: 'sig-3' })).status, 201, 'a new request runs it afresh (the failure left nothing)');
  });
});
