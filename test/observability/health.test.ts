import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import request from 'supertest';
import { Registry } from 'prom-client';
import { createHealthCheck, healthHandler, InvalidOptionsError, mountObservability, type HealthReport } from '../../src/index.js';
import { resolveInstrumentation } from '../../src/observability/index.js';
import { fakeDiagnostics } from './helpers.js';

const NOW = 1_800_000_000_000;

describe('createHealthCheck', () => {
  it('is ok when the store answers and the outbox drains, and reports the outbox', async () => {
    const store = fakeDiagnostics();
    store.addDelivery({ id: 'd1', createdAt: NOW - 125_500 });
    store.addDelivery({ id: 'd2', createdAt: NOW - 1_000 });
    store.addDelivery({ id: 'd3', state: 'failed', createdAt: NOW - 7_200_000 });
    const report = await createHealthCheck({ store, now: () => NOW })();
    assert.deepEqual(report, { status: 'ok', store: 'ok', outbox: { pending: 2, oldestPendingSeconds: 125, failing: 1 } });
    assert.equal(store.calls.ping, 1);
  });

  it('is degraded once the oldest pending delivery is older than the configured age', async () => {
    let now = NOW;
    const store = fakeDiagnostics();
    store.addDelivery({ id: 'd1', createdAt: NOW - 10 * 60_000 });
    const health = createHealthCheck({ store, now: () => now, outboxMaxAgeMs: 15 * 60_000 });
    assert.equal((await health()).status, 'ok');
    now += 6 * 60_000;
    const report = await health();
    assert.equal(report.status, 'degraded');
    assert.equal(report.store, 'ok');
    assert.deepEqual(report.outbox, { pending: 1, oldestPendingSeconds: 960, failing: 0 });
    assert.match(report.reason ?? '', /oldest pending callback delivery is 960 s old \(more than 900 s\)/);
  });

  it('defaults to one hour before calling the outbox degraded', async () => {
    const store = fakeDiagnostics();
    store.addDelivery({ id: 'd1', createdAt: NOW - 59 * 60_000 });
    assert.equal((await createHealthCheck({ store, now: () => NOW })()).status, 'ok');
    store.addDelivery({ id: 'd0', createdAt: NOW - 61 * 60_000 });
    assert.equal((await createHealthCheck({ store, now: () => NOW })()).status, 'degraded');
  });

  it('is down when the store refuses, without repeating the driver error', async () => {
    const store = fakeDiagnostics();
    store.failWith(new Error('password authentication failed: postgres://app:hunter2@db/app'));
    const report = await createHealthCheck({ store })();
    assert.deepEqual(report, { status: 'down', store: 'down', outbox: null, reason: 'The store could not be reached' });
    assert.ok(!JSON.stringify(report).includes('hunter2'));
  });

  it('is down when the store does not answer within the timeout', async () => {
    const store = fakeDiagnostics();
    const release = store.holdPing();
    try {
      const report = await createHealthCheck({ store, timeoutMs: 1 })();
      assert.equal(report.status, 'down');
      assert.equal(report.store, 'down');
      assert.equal(report.reason, 'The store did not answer within 1 ms');
      assert.equal(store.calls.outboxStats, undefined, 'no outbox query after a store that did not answer');
    } finally {
      release();
    }
  });

  it('is degraded when the store answers but its outbox cannot be read', async () => {
    const store = fakeDiagnostics();
    store.outboxStats = () => Promise.reject(new Error('relation "deliveries" does not exist'));
    const report = await createHealthCheck({ store })();
    assert.deepEqual(report, { status: 'degraded', store: 'ok', outbox: null, reason: 'The store answered, but its outbox statistics could not be read' });
  });

  it('probes a store without diagnostics through a lookup, and leaves the outbox out', async () => {
    const asked: string[] = [];
    const store = { kind: 'custom', getResource: async (id: string) => void asked.push(id) };
    assert.deepEqual(await createHealthCheck({ store })(), { status: 'ok', store: 'ok', outbox: null });
    assert.equal(asked.length, 1);
  });

  it('refuses bad options at construction', () => {
    const refused = (options: unknown, pattern: RegExp) => assert.throws(() => createHealthCheck(options as never), (err: unknown) => err instanceof InvalidOptionsError && pattern.test(err.message));
    refused({}, /option "store" is required/);
    refused({ store: {} }, /neither ping\(\) nor getResource\(\)/);
    refused({ store: fakeDiagnostics(), timeout: 5 }, /unknown option "timeout" \(did you mean "timeoutMs"\?\)/);
    refused({ store: fakeDiagnostics(), outboxMaxAgeMs: 0 }, /"outboxMaxAgeMs" must be a positive finite number/);
  });
});

describe('healthHandler', () => {
  const app = (report: HealthReport | Error) => {
    const server = express();
    server.get('/healthz', healthHandler({ health: () => (report instanceof Error ? Promise.reject(report) : Promise.resolve(report)) }));
    return server;
  };

  it('answers 200 with the report when ok or degraded, never cached', async () => {
    for (const status of ['ok', 'degraded'] as const) {
      const report: HealthReport = { status, store: 'ok', outbox: { pending: 1, oldestPendingSeconds: 4000, failing: 0 } };
      const res = await request(app(report)).get('/healthz');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, report);
      assert.equal(res.headers['cache-control'], 'no-store');
    }
  });

  it('answers 503 with a message when down, and when the check itself throws', async () => {
    const down = await request(app({ status: 'down', store: 'down', outbox: null, reason: 'The store could not be reached' })).get('/healthz');
    assert.equal(down.status, 503);
    assert.deepEqual(down.body, { message: 'The store could not be reached', status: 'down', store: 'down', outbox: null, reason: 'The store could not be reached' });
    const broken = await request(app(new Error('token=abc123'))).get('/healthz');
    assert.equal(broken.status, 503);
    assert.equal(broken.body.message, 'The health check failed');
    assert.ok(!broken.text.includes('abc123'));
  });

  it('takes a router with health(), or a bare check function, and refuses anything else', async () => {
    const store = fakeDiagnostics();
    const server = express().get('/h', healthHandler(createHealthCheck({ store })));
    assert.equal((await request(server).get('/h')).body.status, 'ok');
    const router = Object.assign(express.Router(), { health: createHealthCheck({ store }) });
    const withRouter = express().get('/h', healthHandler(router));
    store.failWith(new Error('gone'));
    assert.equal((await request(withRouter).get('/h')).status, 503);
    assert.throws(() => healthHandler({} as never), InvalidOptionsError);
    assert.throws(() => healthHandler(express.Router() as never), InvalidOptionsError, 'a router without health() is no check');
  });
});

describe('mountObservability', () => {
  it('serves /metrics as Prometheus text, /healthz from the router and /livez always', async () => {
    const registry = new Registry();
    const store = fakeDiagnostics();
    store.addDelivery({ id: 'd1', createdAt: Date.now() });
    const hooks = resolveInstrumentation('marketplaceRouter', { registry }, { store });
    hooks.signatureFailure('ERR_SIGNATURE_MISSING');
    // A real Express router: a function, which must not be mistaken for the check itself.
    const router = express.Router() as express.Router & { health?: () => Promise<HealthReport> };
    const app = express();
    mountObservability(app, { registry, router });
    assert.deepEqual((await request(app).get('/healthz')).body, { status: 'ok', store: 'ok', outbox: null }, 'before health() is attached: liveness only');
    // As marketplaceRouter does: health() may be attached to the router after mounting.
    router.health = createHealthCheck({ store });

    const metrics = await request(app).get('/metrics');
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers['content-type'] ?? '', /^text\/plain; version=0\.0\.4/);
    assert.match(metrics.text, /^marketplace_signature_failures_total\{code="ERR_SIGNATURE_MISSING"\} 1$/m);
    assert.match(metrics.text, /^marketplace_outbox_pending 1$/m);

    const healthz = await request(app).get('/healthz');
    assert.equal(healthz.status, 200);
    assert.equal(healthz.body.status, 'ok');
    assert.equal(healthz.body.outbox.pending, 1);

    store.failWith(new Error('down'));
    assert.equal((await request(app).get('/healthz')).status, 503, 'readiness follows the store');
    const live = await request(app).get('/livez');
    assert.equal(live.status, 200, 'liveness does not');
    assert.deepEqual(live.body, { status: 'ok' });
  });

  it('answers /healthz like /livez without a health source, and honours custom and disabled paths', async () => {
    const app = express();
    mountObservability(app, { registry: new Registry(), paths: { metrics: '/internal/metrics', live: false } });
    assert.equal((await request(app).get('/internal/metrics')).status, 200);
    assert.equal((await request(app).get('/metrics')).status, 404);
    assert.equal((await request(app).get('/livez')).status, 404);
    assert.deepEqual((await request(app).get('/healthz')).body, { status: 'ok', store: 'ok', outbox: null });
  });

  it('answers a JSON 500 when the metrics cannot be collected', async () => {
    const registry = new Registry();
    resolveInstrumentation('test', { registry });
    registry.metrics = () => Promise.reject(new Error('collector crashed'));
    const app = express();
    mountObservability(app, { registry });
    const res = await request(app).get('/metrics');
    assert.equal(res.status, 500);
    assert.deepEqual(res.body, { message: 'The metrics could not be collected' });
  });

  it('refuses bad options', () => {
    const refused = (options: unknown, pattern: RegExp) => assert.throws(() => mountObservability(express(), options as never), (err: unknown) => err instanceof InvalidOptionsError && pattern.test(err.message));
    refused({ registry: {} }, /"registry" must be a prom-client Registry/);
    refused({ paths: { metrics: 'metrics' } }, /"paths.metrics" must be a path/);
    refused({ paths: { healthz: '/h' } }, /unknown option "healthz"/);
    refused({ router: {}, health: () => Promise.resolve({}) }, /not both/);
    refused({ health: express.Router() }, /option "health" must be an object with health\(\) or a function/);
    refused({ router: 'main' }, /option "router" must be the router/);
    refused({ registy: new Registry() }, /did you mean "registry"/);
  });
});
