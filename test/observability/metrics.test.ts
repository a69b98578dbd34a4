import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Registry } from 'prom-client';
import { InvalidOptionsError, marketplaceRouter, type ProviderHandlers } from '../../src/index.js';
import { resolveInstrumentation } from '../../src/observability/index.js';
import { loadPromClient, METRIC_DEFINITIONS } from '../../src/observability/metrics.js';
import { fakeDiagnostics } from './helpers.js';

/** The value of one sample of a scrape, by metric name and labels; undefined when absent. */
async function sample(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values as { metricName?: string; labels: Record<string, string | number>; value: number }[]) {
      if ((value.metricName ?? metric.name) !== name) continue;
      const same = Object.keys(labels).length === Object.keys(value.labels).length && Object.entries(labels).every(([k, v]) => String(value.labels[k]) === v);
      if (same) return value.value;
    }
  }
  return undefined;
}

const EXPECTED_LABELS: Record<string, string[]> = {
  marketplace_requests_total: ['route', 'method', 'status', 'code'],
  marketplace_request_duration_seconds: ['route', 'method'],
  marketplace_signature_failures_total: ['code'],
  marketplace_handler_duration_seconds: ['operation', 'outcome'],
  marketplace_operations_pending: [],
  marketplace_outbox_deliveries_total: ['outcome'],
  marketplace_outbox_pending: [],
  marketplace_outbox_oldest_pending_seconds: [],
  marketplace_platform_requests_total: ['route', 'status'],
  marketplace_events_total: ['type', 'outcome'],
  marketplace_oauth_tokens_total: ['grant', 'outcome'],
};

describe('resolveInstrumentation: Prometheus metrics', () => {
  it('registers exactly the metrics of the issue, with their labels and types', async () => {
    const registry = new Registry();
    resolveInstrumentation('test', { registry });
    const metrics = await registry.getMetricsAsJSON();
    assert.deepEqual(metrics.map((m) => m.name).sort(), Object.keys(EXPECTED_LABELS).sort());
    for (const def of Object.values(METRIC_DEFINITIONS)) assert.deepEqual([...def.labelNames], EXPECTED_LABELS[def.name], def.name);
    const types = Object.fromEntries(metrics.map((m) => [m.name, String(m.type)]));
    assert.equal(types.marketplace_request_duration_seconds, 'histogram');
    assert.equal(types.marketplace_handler_duration_seconds, 'histogram');
    assert.equal(types.marketplace_outbox_pending, 'gauge');
    assert.equal(types.marketplace_requests_total, 'counter');
  });

  it('counts what the hooks report, under the labels they name', async () => {
    const registry = new Registry();
    const hooks = resolveInstrumentation('test', { registry });
    hooks.request({ route: '/v1/resources/:id', method: 'PUT', status: 201, code: '', seconds: 0.02 });
    hooks.request({ route: '/v1/resources/:id', method: 'PUT', status: 201, code: '', seconds: 0.03 });
    hooks.request({ route: '/v1/resources/:id', method: 'PATCH', status: 400, code: 'ERR_PLAN_CHANGE_REFUSED', seconds: 0.01 });
    hooks.signatureFailure('ERR_DATE_STALE');
    hooks.handler({ operation: 'provision', outcome: 'accepted', seconds: 1.5 });
    hooks.delivery('retry');
    hooks.delivery('delivered');
    hooks.platformRequest({ route: '/v1/profiles/:id', status: 200 });
    hooks.event({ type: 'resource:provisioned', outcome: 'duplicate' });
    hooks.oauthToken({ grant: 'refresh_token', outcome: 'issued' });

    assert.equal(await sample(registry, 'marketplace_requests_total', { route: '/v1/resources/:id', method: 'PUT', status: '201', code: '' }), 2);
    assert.equal(await sample(registry, 'marketplace_requests_total', { route: '/v1/resources/:id', method: 'PATCH', status: '400', code: 'ERR_PLAN_CHANGE_REFUSED' }), 1);
    assert.equal(await sample(registry, 'marketplace_request_duration_seconds_count', { route: '/v1/resources/:id', method: 'PUT' }), 2);
    assert.equal(await sample(registry, 'marketplace_signature_failures_total', { code: 'ERR_DATE_STALE' }), 1);
    assert.equal(await sample(registry, 'marketplace_handler_duration_seconds_sum', { operation: 'provision', outcome: 'accepted' }), 1.5);
    assert.equal(await sample(registry, 'marketplace_outbox_deliveries_total', { outcome: 'retry' }), 1);
    assert.equal(await sample(registry, 'marketplace_outbox_deliveries_total', { outcome: 'delivered' }), 1);
    assert.equal(await sample(registry, 'marketplace_platform_requests_total', { route: '/v1/profiles/:id', status: '200' }), 1);
    assert.equal(await sample(registry, 'marketplace_events_total', { type: 'resource:provisioned', outcome: 'duplicate' }), 1);
    assert.equal(await sample(registry, 'marketplace_oauth_tokens_total', { grant: 'refresh_token', outcome: 'issued' }), 1);
  });

  it('never puts an id, a token or a credential value into a label', async () => {
    const registry = new Registry();
    const hooks = resolveInstrumentation('test', { registry });
    const id = 'r7f3k2m9q1w8e5t6y4u0i2o3p7a';
    const token = 'eyJhbGciOiJFZERTQSJ9.c2VjcmV0.sig-Zm9vYmFy';
    const secret = 's3cret-hunter2-value';
    hooks.request({ route: `/v1/resources/${id}`, method: 'PUT', status: 201, code: '', seconds: 0.01 });
    hooks.request({ route: `/v1/credentials/${secret}`, method: `PUT ${token}`, status: 201, code: `ERR_X ${secret}`, seconds: 0.01 });
    hooks.request({ route: '/v1/resources/:id', method: 'GET', status: 404, code: secret, seconds: 0.01 });
    hooks.signatureFailure(`Bearer ${token}`);
    hooks.platformRequest({ route: `/v1/profiles/${id}`, status: 200 });
    hooks.platformRequest({ route: `/oauth/token?refresh_token=${token}`, status: 400 });
    hooks.platformRequest({ route: `/v1/profiles/${secret.replace(/\d/g, '')}x${id}`, status: 200 });
    hooks.event({ type: `resource:${secret}`, outcome: 'refused' });
    hooks.oauthToken({ grant: token, outcome: 'refused' });
    hooks.handler({ operation: id as never, outcome: token as never, seconds: 0.1 });
    hooks.delivery(secret as never);

    const text = await registry.metrics();
    for (const needle of [id, token, secret, 'hunter2', 'Bearer', 'eyJ']) assert.ok(!text.includes(needle), `the scrape must not contain ${needle}`);
    assert.equal(await sample(registry, 'marketplace_requests_total', { route: 'other', method: 'PUT', status: '201', code: '' }), 1);
    assert.equal(await sample(registry, 'marketplace_requests_total', { route: 'other', method: 'other', status: '201', code: 'other' }), 1);
    assert.equal(await sample(registry, 'marketplace_platform_requests_total', { route: 'other', status: '200' }), 2);
    assert.equal(await sample(registry, 'marketplace_events_total', { type: 'other', outcome: 'refused' }), 1);
  });

  it('keeps measuring when a caller passes a duration prom-client would refuse', async () => {
    const registry = new Registry();
    const hooks = resolveInstrumentation('test', { registry });
    hooks.request({ route: '/v1/sso', method: 'GET', status: 302, code: '', seconds: Number.NaN });
    hooks.handler({ operation: 'deprovision', outcome: 'done', seconds: -1 });
    assert.equal(await sample(registry, 'marketplace_requests_total', { route: '/v1/sso', method: 'GET', status: '302', code: '' }), 1);
    assert.equal(await sample(registry, 'marketplace_handler_duration_seconds_count', { operation: 'deprovision', outcome: 'done' }), undefined);
  });

  it('lets several routers share a registry: one set of metrics, counted together', async () => {
    const registry = new Registry();
    const first = resolveInstrumentation('marketplaceRouter', { registry });
    const second = resolveInstrumentation('platformRouter', { registry });
    first.delivery('expired');
    second.delivery('expired');
    assert.equal(await sample(registry, 'marketplace_outbox_deliveries_total', { outcome: 'expired' }), 2);
  });

  it('marketplaceRouter accepts two routers on one registry and refuses a registry that is not one', async () => {
    const registry = new Registry();
    const handlers = { provision: () => 'ok', changePlan: () => 'ok', deprovision: () => 'ok', provisionCredentials: () => ({ credentials: {} }), deprovisionCredentials: () => 'ok' } as unknown as ProviderHandlers;
    const routers = [marketplaceRouter({ handlers, logger: false, metrics: { registry } }), marketplaceRouter({ handlers, logger: false, metrics: { registry } })];
    assert.equal(routers.length, 2);
    assert.throws(() => marketplaceRouter({ handlers, logger: false, metrics: { registry: {} } }), (err: unknown) => err instanceof InvalidOptionsError && /marketplaceRouter: option "metrics.registry" must be a prom-client Registry/.test(err.message));
    await Promise.all(routers.map((r) => r.close()));
  });

  it('refuses a bad metrics option at construction, with a hint', () => {
    const refused = (metrics: unknown, pattern: RegExp) =>
      assert.throws(() => resolveInstrumentation('marketplaceRouter', metrics as never), (err: unknown) => err instanceof InvalidOptionsError && pattern.test(err.message));
    refused(new Registry(), /option "metrics": unknown option/);
    refused({ registery: new Registry() }, /did you mean "registry"/);
    refused({ registry: 'default' }, /must be a prom-client Registry/);
    refused(null, /option "metrics": expected one options object/);
  });

  it('refuses a registry that already holds a metric of the same name from someone else', () => {
    const registry = new Registry();
    new Counter({ name: 'marketplace_requests_total', help: 'mine', registers: [registry] });
    assert.throws(() => resolveInstrumentation('marketplaceRouter', { registry }), (err: unknown) => err instanceof InvalidOptionsError && /already has a metric named marketplace_requests_total/.test(err.message));
  });

  it('says how to install prom-client when it is missing', () => {
    const missing = () => {
      throw Object.assign(new Error("Cannot find module 'prom-client'"), { code: 'MODULE_NOT_FOUND' });
    };
    assert.throws(() => loadPromClient('platformRouter', missing), (err: unknown) => err instanceof InvalidOptionsError && /platformRouter: option "metrics" needs prom-client.*npm install prom-client/.test(err.message));
    const broken = () => {
      throw new SyntaxError('Unexpected token');
    };
    assert.throws(() => loadPromClient('platformRouter', broken), SyntaxError);
  });
});

describe('resolveInstrumentation: gauges read from the store at scrape time', () => {
  it('reports pending operations, pending deliveries and the age of the oldest one', async () => {
    let now = 1_800_000_000_000;
    const store = fakeDiagnostics({ now: () => now });
    store.addDelivery({ id: 'd1', state: 'pending', createdAt: now - 90_000 });
    store.addDelivery({ id: 'd2', state: 'pending', createdAt: now - 30_000 });
    store.addDelivery({ id: 'd3', state: 'failed', createdAt: now - 900_000 });
    store.addOperation({ targetId: 'r1', createdAt: now - 5_000 });
    const registry = new Registry();
    resolveInstrumentation('test', { registry }, { store, now: () => now });

    assert.equal(await sample(registry, 'marketplace_outbox_pending'), 2);
    assert.equal(await sample(registry, 'marketplace_outbox_oldest_pending_seconds'), 90);
    assert.equal(await sample(registry, 'marketplace_operations_pending'), 1);
    now += 60_000;
    store.dropAll();
    assert.equal(await sample(registry, 'marketplace_outbox_pending'), 0);
    assert.equal(await sample(registry, 'marketplace_outbox_oldest_pending_seconds'), 0);
    assert.equal(await sample(registry, 'marketplace_operations_pending'), 0);
  });

  it('reads the store once per scrape, not once per gauge', async () => {
    const store = fakeDiagnostics();
    const registry = new Registry();
    resolveInstrumentation('test', { registry }, { store });
    await registry.metrics();
    assert.equal(store.calls.outboxStats, 1);
    assert.equal(store.calls.countPendingOperations, 1);
  });

  it('reads a store given as a getter, for a store built after the metrics', async () => {
    const later: { store?: ReturnType<typeof fakeDiagnostics> } = {};
    const registry = new Registry();
    resolveInstrumentation('test', { registry }, { store: () => later.store });
    later.store = fakeDiagnostics();
    later.store.addDelivery({ id: 'd1', state: 'pending', createdAt: Date.now() });
    assert.equal(await sample(registry, 'marketplace_outbox_pending'), 1);
  });

  it('sums the distinct stores of routers sharing a registry, and counts a shared store once', async () => {
    const now = 1_800_000_000_000;
    const a = fakeDiagnostics();
    const b = fakeDiagnostics();
    a.addDelivery({ id: 'a1', state: 'pending', createdAt: now - 10_000 });
    b.addDelivery({ id: 'b1', state: 'pending', createdAt: now - 40_000 });
    b.addDelivery({ id: 'b2', state: 'pending', createdAt: now - 1_000 });
    const registry = new Registry();
    for (const store of [a, b, a]) resolveInstrumentation('test', { registry }, { store, now: () => now });
    assert.equal(await sample(registry, 'marketplace_outbox_pending'), 3);
    assert.equal(await sample(registry, 'marketplace_outbox_oldest_pending_seconds'), 40);
  });

  it('reports NaN, not a reassuring zero, when no store can be read; leaves out one that fails among others', async () => {
    const now = 1_800_000_000_000;
    const down = fakeDiagnostics();
    down.failWith(new Error('connection refused'));
    const registry = new Registry();
    resolveInstrumentation('test', { registry }, { store: down, now: () => now });
    assert.ok(Number.isNaN(await sample(registry, 'marketplace_outbox_pending')));
    assert.ok(Number.isNaN(await sample(registry, 'marketplace_outbox_oldest_pending_seconds')));
    assert.ok(Number.isNaN(await sample(registry, 'marketplace_operations_pending')));

    const up = fakeDiagnostics();
    up.addDelivery({ id: 'u1', state: 'pending', createdAt: now - 2_000 });
    resolveInstrumentation('test', { registry }, { store: up, now: () => now });
    assert.equal(await sample(registry, 'marketplace_outbox_pending'), 1);
    assert.equal(await sample(registry, 'marketplace_outbox_oldest_pending_seconds'), 2);
  });

  it('does not let a store that hangs hang the scrape: its gauges are NaN for that scrape', async () => {
    const store = fakeDiagnostics();
    let release!: () => void;
    const never = new Promise<void>((resolve) => (release = resolve));
    store.outboxStats = async () => {
      await never;
      return { pending: 1, failed: 0, oldestPendingCreatedAt: undefined };
    };
    const registry = new Registry();
    resolveInstrumentation('test', { registry }, { store, readTimeoutMs: 1 });
    try {
      assert.ok(Number.isNaN(await sample(registry, 'marketplace_outbox_pending')));
      assert.equal(await sample(registry, 'marketplace_operations_pending'), 0, 'what did answer is reported');
    } finally {
      release();
    }
  });
});
