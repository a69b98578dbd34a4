import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { BadRequestError, ConnectorError } from '../../src/index.js';
import { noInstrumentation, resolveInstrumentation } from '../../src/observability/index.js';

const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();

function byName(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name);
  assert.equal(found.length, 1, `one ${name} span`);
  return found[0]!;
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('resolveInstrumentation: OpenTelemetry spans', () => {
  before(() => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  });
  after(() => {
    trace.disable();
    context.disable();
  });
  beforeEach(() => exporter.reset());

  it('opens the spans as children of the app span, with their attributes', async () => {
    const hooks = resolveInstrumentation('marketplaceRouter', undefined);
    assert.notEqual(hooks, noInstrumentation, 'with the API installed, spans are on even without metrics');
    const tracer = trace.getTracer('the-app');
    // Two concurrent requests: each operation's spans must hang under its own HTTP span.
    let release!: () => void;
    const handlerGate = new Promise<void>((resolve) => (release = resolve));
    const request = (id: string, callbackId: string | undefined) => tracer.startActiveSpan(`PUT /v1/resources/${id}`, async (http) => {
      try {
        await hooks.span('marketplace.verify', {}, async () => undefined);
        return await hooks.span('marketplace.operation', { kind: 'provision', entityId: id, callbackId }, async () => {
          await hooks.span('marketplace.handler', { kind: 'provision' }, () => handlerGate);
          await hooks.span('marketplace.store.commit', { kind: 'provision' }, async () => undefined);
          return id;
        });
      } finally {
        http.end();
      }
    });
    const both = Promise.all([request('r1', 'cb1'), request('r2', undefined)]);
    release();
    assert.deepEqual(await both, ['r1', 'r2']);

    const spans = exporter.getFinishedSpans();
    assert.equal(spans.length, 10);
    for (const id of ['r1', 'r2']) {
      const http = byName(spans, `PUT /v1/resources/${id}`);
      const mine = spans.filter((s) => s.spanContext().traceId === http.spanContext().traceId);
      const verify = byName(mine, 'marketplace.verify');
      const operation = byName(mine, 'marketplace.operation');
      const handler = byName(mine, 'marketplace.handler');
      const commit = byName(mine, 'marketplace.store.commit');
      assert.equal(parentOf(verify), http.spanContext().spanId);
      assert.equal(parentOf(operation), http.spanContext().spanId);
      assert.equal(parentOf(handler), operation.spanContext().spanId);
      assert.equal(parentOf(commit), operation.spanContext().spanId);
      assert.equal(operation.attributes['marketplace.kind'], 'provision');
      assert.equal(operation.attributes['marketplace.entity_id'], id);
      assert.equal(handler.attributes['marketplace.kind'], 'provision');
      for (const span of [verify, operation, handler, commit]) assert.equal(span.status.code, SpanStatusCode.UNSET);
    }
    const r1 = byName(spans.filter((s) => s.attributes['marketplace.entity_id'] === 'r1'), 'marketplace.operation');
    assert.equal(r1.attributes['marketplace.callback_id'], 'cb1');
    const r2 = byName(spans.filter((s) => s.attributes['marketplace.entity_id'] === 'r2'), 'marketplace.operation');
    assert.ok(!('marketplace.callback_id' in r2.attributes), 'an absent attribute is left out, not sent as undefined');
  });

  it('records a thrown error with its code, and rethrows it unchanged', async () => {
    const hooks = resolveInstrumentation('marketplaceRouter', undefined);
    const refused = new BadRequestError('The locked plan cannot be changed', 'ERR_PLAN_CHANGE_REFUSED');
    await assert.rejects(
      hooks.span('marketplace.operation', { kind: 'changePlan', entityId: 'r9' }, () => hooks.span('marketplace.handler', { kind: 'changePlan' }, () => Promise.reject(refused))),
      (err: unknown) => err === refused,
    );
    const unreachable = new ConnectorError('ERR_CONNECTOR_UNREACHABLE', 'The connector did not answer');
    await assert.rejects(hooks.span('marketplace.callback.send', { callbackId: 'cb7' }, () => Promise.reject(unreachable)), (err: unknown) => err === unreachable);
    const plain = new TypeError('boom');
    await assert.rejects(hooks.span('marketplace.store.commit', {}, () => Promise.reject(plain)), (err: unknown) => err === plain);

    const spans = exporter.getFinishedSpans();
    const handler = byName(spans, 'marketplace.handler');
    const operation = byName(spans, 'marketplace.operation');
    assert.equal(parentOf(handler), operation.spanContext().spanId);
    for (const span of [handler, operation]) {
      assert.equal(span.status.code, SpanStatusCode.ERROR);
      assert.equal(span.attributes['marketplace.error.code'], 'ERR_PLAN_CHANGE_REFUSED');
      assert.equal(span.events.filter((e) => e.name === 'exception').length, 1);
    }
    const send = byName(spans, 'marketplace.callback.send');
    assert.equal(send.attributes['marketplace.callback_id'], 'cb7');
    assert.equal(send.attributes['marketplace.error.code'], 'ERR_CONNECTOR_UNREACHABLE');
    const commit = byName(spans, 'marketplace.store.commit');
    assert.equal(commit.status.code, SpanStatusCode.ERROR);
    assert.equal(commit.attributes['error.type'], 'TypeError');
    assert.ok(!('marketplace.error.code' in commit.attributes));
  });

  it('spans and metrics come together when both are asked for', async () => {
    const { Registry } = await import('prom-client');
    const registry = new Registry();
    const hooks = resolveInstrumentation('marketplaceRouter', { registry });
    await hooks.span('marketplace.verify', {}, async () => hooks.signatureFailure('ERR_DATE_STALE'));
    assert.equal(exporter.getFinishedSpans().length, 1);
    assert.match(await registry.metrics(), /marketplace_signature_failures_total\{code="ERR_DATE_STALE"\} 1/);
  });
});
