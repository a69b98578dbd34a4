/**
 * The span tree of real signed requests through `marketplaceRouter`, under the app's own HTTP span:
 * verify, operation (with kind, entity id and callback id), handler and commit, and a refused
 * plan change recorded with its code.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import express from 'express';
import { BadRequestError, marketplaceRouter, memoryStore, type MarketplaceRouter } from '../../src/index.js';
import { listen, type Running } from '../helpers/http.js';
import { marketplace, newId } from '../faults/helpers.js';

const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('marketplaceRouter: OpenTelemetry span tree', () => {
  const market = marketplace();
  let router: MarketplaceRouter;
  let running: Running;
  let target: { url: string; host: string };

  before(async () => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    router = marketplaceRouter({
      store: memoryStore(),
      masterKey: market.masterPublicKey,
      logger: false,
      handlers: {
        provision: () => 'Ready',
        changePlan: () => {
          throw new BadRequestError('That plan cannot be changed', 'ERR_PLAN_CHANGE_REFUSED');
        },
        deprovision: () => undefined,
        provisionCredentials: () => ({ credentials: { URL: 'https://u:p@example.test' } }),
        deprovisionCredentials: () => undefined,
      },
    });
    const app = express();
    const tracer = trace.getTracer('the-app');
    // The app's HTTP span, as an instrumentation library would open it around the request.
    app.use((req, res, next) => {
      tracer.startActiveSpan(`${req.method} ${req.path}`, (span) => {
        res.on('finish', () => span.end());
        next();
      });
    });
    app.use(router);
    running = await listen(app);
    target = { url: running.url, host: new URL(running.url).host };
  });
  after(async () => {
    await running?.close();
    await router?.close();
    trace.disable();
    context.disable();
  });
  beforeEach(() => exporter.reset());

  /** The spans of the trace whose root is the app span named `name`, once the root has ended. */
  function traceOf(name: string): ReadableSpan[] {
    const spans = exporter.getFinishedSpans();
    const roots = spans.filter((s) => s.name === name);
    assert.equal(roots.length, 1, `one ${name} span`);
    return spans.filter((s) => s.spanContext().traceId === roots[0]!.spanContext().traceId);
  }
  const one = (spans: ReadableSpan[], name: string) => {
    const found = spans.filter((s) => s.name === name);
    assert.equal(found.length, 1, `one ${name} span`);
    return found[0]!;
  };

  it('verify, operation, handler and commit hang under the app span of a signed PUT', async () => {
    const id = newId('span');
    const answer = await market.send(target, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'all::global' });
    assert.equal(answer.status, 201);
    const spans = traceOf(`PUT /v1/resources/${id}`);
    const root = one(spans, `PUT /v1/resources/${id}`);
    const verify = one(spans, 'marketplace.verify');
    const operation = one(spans, 'marketplace.operation');
    const handler = one(spans, 'marketplace.handler');
    const commit = one(spans, 'marketplace.store.commit');
    assert.equal(parentOf(verify), root.spanContext().spanId);
    assert.equal(parentOf(operation), root.spanContext().spanId);
    assert.equal(parentOf(handler), operation.spanContext().spanId);
    assert.equal(parentOf(commit), operation.spanContext().spanId);
    assert.equal(operation.attributes['marketplace.kind'], 'provision');
    assert.equal(operation.attributes['marketplace.entity_id'], id);
    for (const span of [verify, operation, handler, commit]) assert.equal(span.status.code, SpanStatusCode.UNSET, span.name);
  });

  it('a refused plan change is recorded on the handler span with its code, and nothing is committed', async () => {
    const id = newId('span');
    assert.equal((await market.send(target, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'all::global' })).status, 201);
    exporter.reset();
    const answer = await market.send(target, 'PATCH', `/v1/resources/${id}`, { plan: 'large' });
    assert.equal(answer.status, 400);
    const spans = traceOf(`PATCH /v1/resources/${id}`);
    const handler = one(spans, 'marketplace.handler');
    assert.equal(handler.status.code, SpanStatusCode.ERROR);
    assert.equal(handler.attributes['marketplace.error.code'], 'ERR_PLAN_CHANGE_REFUSED');
    assert.equal(spans.filter((s) => s.name === 'marketplace.store.commit').length, 0);
  });

  it('a forged signature ends in the verify span with its code, and no operation starts', async () => {
    const id = newId('span');
    const response = await fetch(`${running.url}/v1/resources/${id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', date: new Date().toISOString(), 'x-signature': 'not a signature', 'x-signed-headers': 'host date' },
      body: '{}',
    });
    assert.equal(response.status, 401);
    await response.arrayBuffer();
    const spans = traceOf(`PUT /v1/resources/${id}`);
    assert.equal(spans.filter((s) => s.name === 'marketplace.operation').length, 0);
    // The cheap header checks refuse it before its body is read, inside the verify span.
    const verify = one(spans, 'marketplace.verify');
    assert.equal(parentOf(verify), one(spans, `PUT /v1/resources/${id}`).spanContext().spanId);
    assert.equal(verify.status.code, SpanStatusCode.ERROR);
    assert.equal(verify.attributes['marketplace.error.code'], 'ERR_SIGNATURE_MALFORMED');
  });
});
