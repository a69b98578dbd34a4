import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import { BadRequestError } from '../../src/errors.js';
import { OperationEngine } from '../../src/idempotency/engine.js';
import { prepareOperation, type TableEnv } from '../../src/idempotency/operations.js';
import { createLogger } from '../../src/lib/logger.js';
import { noInstrumentation, type Instrumentation, type SpanName } from '../../src/observability/hooks.js';
import { createOutbox } from '../../src/outbox/index.js';
import { requestLogger } from '../../src/provider/http.js';
import { accepted, type ProviderHandlers } from '../../src/domain/handlers.js';
import { memoryStore } from '../../src/store/memory.js';
import { listen } from '../helpers/http.js';
import { enqueue, fakeClock } from '../outbox/helpers.js';
import { manualClock } from './helpers.js';

/** An Instrumentation that records every call. */
function recording() {
  const events: { hook: string; value: unknown }[] = [];
  const spans: { name: SpanName; attributes: unknown }[] = [];
  const instrumentation: Instrumentation = {
    ...noInstrumentation,
    request: (value) => void events.push({ hook: 'request', value }),
    handler: (value) => void events.push({ hook: 'handler', value: { ...value, seconds: typeof value.seconds } }),
    delivery: (value) => void events.push({ hook: 'delivery', value }),
    span: (name, attributes, fn) => {
      spans.push({ name, attributes });
      return fn();
    },
  };
  return { instrumentation, events, spans };
}

const env: TableEnv = { catalog: undefined, validate: undefined, checkCallbackUrl: undefined };

/** An engine on the memory store and a manual clock whose provisioning runs `provision`. */
function engineWith(instrumentation: Instrumentation, provision: ProviderHandlers['provision']): OperationEngine {
  const handlers: ProviderHandlers = {
    provision,
    changePlan: () => undefined,
    deprovision: () => undefined,
    provisionCredentials: () => ({ credentials: { A: 'b' } }),
    deprovisionCredentials: () => undefined,
  };
  return new OperationEngine({
    store: memoryStore(), handlers, env, owner: 't', clock: manualClock(), leaseMs: 30_000, waitMs: 10_000,
    pendingDeadlineMs: 86_400_000, replayTtlMs: 600_000, callbacks: false, logger: createLogger(false), instrumentation,
  });
}

describe('instrumentation call sites', () => {
  it('the engine reports each handler call by outcome and opens operation, handler and commit spans', async () => {
    const r = recording();
    let mode: 'done' | 'refuse' | 'accept' = 'done';
    const engine = engineWith(r.instrumentation, () => {
      if (mode === 'refuse') throw new BadRequestError('No bonnets today');
      return mode === 'accept' ? accepted('Knitting') : 'Ready';
    });
    const provision = async (id: string) =>
      engine.execute(await prepareOperation({ kind: 'provision', id, body: { id, product: 'bonnets', plan: 'small', region: 'all::global' }, callbackId: undefined, callbackUrl: undefined, signedHeaders: [], requestId: undefined }, env));

    await provision('r1');
    assert.deepEqual(r.spans.map((s) => s.name), ['marketplace.operation', 'marketplace.handler', 'marketplace.store.commit']);
    assert.deepEqual(r.spans[0]!.attributes, { kind: 'provision', entityId: 'r1', callbackId: undefined });
    mode = 'refuse';
    await assert.rejects(provision('r2'));
    mode = 'accept';
    await provision('r3');
    assert.deepEqual(r.events, [
      { hook: 'handler', value: { operation: 'provision', outcome: 'done', seconds: 'number' } },
      { hook: 'handler', value: { operation: 'provision', outcome: 'refused', seconds: 'number' } },
      { hook: 'handler', value: { operation: 'provision', outcome: 'accepted', seconds: 'number' } },
    ]);
  });

  it('a span hook that throws reaches the caller of handle() as a rejection, never as a throw', async () => {
    const broken: Instrumentation = {
      ...noInstrumentation,
      span: () => {
        throw new Error('tracer exploded');
      },
    };
    let calls = 0;
    const engine = engineWith(broken, () => {
      calls++;
    });
    const call = { kind: 'provision' as const, id: 'r1', body: { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global' }, callbackId: undefined, callbackUrl: undefined, signedHeaders: [], requestId: undefined };
    let answered: Promise<unknown> | undefined;
    assert.doesNotThrow(() => {
      answered = engine.handle(call);
    });
    await assert.rejects(answered!, /tracer exploded/);
    assert.equal(calls, 0, 'the handler never ran');
  });

  it('the request log reports each answered request by route pattern, status and code', async () => {
    const r = recording();
    const app = express();
    const log = requestLogger(createLogger(false), r.instrumentation);
    app.use((req, res, next) => {
      log(req, res, req.path);
      next();
    });
    app.get('/v1/resources/:id/measures', (_req, res) => void res.status(204).end());
    app.put('/v1/credentials/:id', (_req, res) => {
      res.locals.errorCode = 'ERR_NOT_FOUND';
      res.status(404).json({ message: 'Resource not found' });
    });
    const target = await listen(app);
    try {
      await fetch(`${target.url}/v1/resources/abc/measures`);
      await fetch(`${target.url}/v1/credentials/xyz`, { method: 'PUT' });
    } finally {
      await target.close();
    }
    const seen = r.events.map((e) => e.value as Record<string, unknown>).map(({ seconds, ...rest }) => (assert.equal(typeof seconds, 'number'), rest));
    assert.deepEqual(seen, [
      { route: '/v1/resources/:id/measures', method: 'GET', status: 204, code: '' },
      { route: '/v1/credentials/:id', method: 'PUT', status: 404, code: 'ERR_NOT_FOUND' },
    ]);
  });

  it('the outbox reports each attempt result and wraps each send in a span', async () => {
    const r = recording();
    const store = memoryStore();
    const clock = fakeClock();
    const results = [{ outcome: 'retry' as const, reason: 'down' }, { outcome: 'delivered' as const, status: 204 }];
    const outbox = createOutbox({ store, now: clock.now, logger: false, instrumentation: r.instrumentation, backoff: { baseMs: 10, jitter: 'none' }, send: async () => results.shift()! });
    const d = await enqueue(store, { now: clock.now() });
    await outbox.runOnce();
    clock.advance(60_000);
    await outbox.runOnce();
    assert.deepEqual(r.events, [{ hook: 'delivery', value: 'retry' }, { hook: 'delivery', value: 'delivered' }]);
    assert.deepEqual(r.spans, [
      { name: 'marketplace.callback.send', attributes: { callbackId: d.callbackId } },
      { name: 'marketplace.callback.send', attributes: { callbackId: d.callbackId } },
    ]);
  });
});
