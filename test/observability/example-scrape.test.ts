/**
 * The example provider's /metrics after a lifecycle that exercises every metric: a bad signature,
 * a long-running operation whose callback first meets a connector outage, and a refused plan
 * change. Each metric's value is checked, and /healthz reports the router's health.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../../src/lib/logger.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { createProviderApp, type ProviderApp } from '../../examples/provider-app.js';
import { listen, type Running } from '../helpers/http.js';
import { waitFor } from '../helpers/processes.js';
import { marketplace, newId } from '../faults/helpers.js';

const client = { clientId: 'scrape-client', clientSecret: randomBytes(24).toString('hex') };

/**
 * The value of one sample of a Prometheus text scrape: the sum over every series of `name` whose
 * labels include `labels` (so `{}` sums a whole counter). Label order does not matter. A labelled
 * counter has no series until its first increment, so a missing series is 0.
 */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const series = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (Object.entries(labels).every(([key, value]) => series[key] === value)) {
      total += Number(match[3]);
    }
  }
  return total;
}

describe('the example provider: /metrics after a lifecycle', () => {
  const market = marketplace();
  let fake: FakeConnector;
  let provider: ProviderApp;
  let running: Running;
  let target: { url: string; host: string };

  before(async () => {
    fake = createFakeConnector(client);
    await fake.listen();
    provider = await createProviderApp({
      STORE: 'memory',
      MASTER_PUBLIC_KEY: market.masterPublicKey,
      CONNECTOR_URL: fake.url,
      CONNECTOR_CLIENT_ID: client.clientId,
      CONNECTOR_CLIENT_SECRET: client.clientSecret,
      EXAMPLE_ASYNC: '1',
      EXAMPLE_ASYNC_DELAY_MS: '1',
      EXAMPLE_OUTBOX_POLL_MS: '50',
      EXAMPLE_OUTBOX_BACKOFF_MS: '100',
    }, { logger: createLogger(false) });
    running = await listen(provider.app);
    target = { url: running.url, host: new URL(running.url).host };
  });
  after(async () => {
    await running?.close();
    await provider?.close();
    await fake?.close();
  });

  const scrape = async (): Promise<string> => {
    const response = await fetch(`${running.url}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain/);
    return response.text();
  };
  const callbackHeaders = (callbackId: string) => ({ 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) });
  const putResource = (id: string, plan: string, callbackId: string) =>
    market.send(target, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan, region: 'all::global' }, { headers: callbackHeaders(callbackId) });

  it('registers every metric before the first request', async () => {
    const text = await scrape();
    for (const name of ['marketplace_requests_total', 'marketplace_request_duration_seconds', 'marketplace_signature_failures_total', 'marketplace_handler_duration_seconds',
      'marketplace_operations_pending', 'marketplace_outbox_deliveries_total', 'marketplace_outbox_pending', 'marketplace_outbox_oldest_pending_seconds']) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    }
  });

  it('counts requests, signature failures, handler outcomes, deliveries and the outbox queue', async () => {
    // A bad signature: refused before any handler.
    const forged = await fetch(`${running.url}/v1/resources/${newId('bad')}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', date: new Date().toISOString(), 'x-signature': 'not a signature', 'x-signed-headers': 'host date' },
      body: '{}',
    });
    assert.equal(forged.status, 401);

    // A long-running provisioning whose callback meets the connector down.
    fake.setDown('callbacks');
    const first = newId('scr');
    const firstCallback = randomBytes(8).toString('hex');
    assert.equal((await putResource(first, 'small', firstCallback)).status, 202);
    await waitFor('a failed callback attempt', () => fake.callbacks.some((c) => c.id === firstCallback && c.status !== 204), { timeoutMs: 15_000 });
    await waitFor('the retry counted', async () => sample(await scrape(), 'marketplace_outbox_deliveries_total', { outcome: 'retry' }) >= 1, { timeoutMs: 15_000 });
    const during = await scrape();
    assert.equal(sample(during, 'marketplace_outbox_pending'), 1);
    assert.ok(sample(during, 'marketplace_outbox_oldest_pending_seconds') >= 0);
    assert.equal(sample(during, 'marketplace_outbox_deliveries_total', { outcome: 'delivered' }), 0);
    const unhealthy = await (await fetch(`${running.url}/healthz`)).json() as { status: string; outbox: { pending: number } };
    assert.equal(unhealthy.outbox.pending, 1);

    // The connector comes back: the callback is delivered and the queue drains.
    fake.setUp('callbacks');
    await fake.waitForCallback(firstCallback, 15_000);
    await waitFor('the delivery counted', async () => sample(await scrape(), 'marketplace_outbox_deliveries_total', { outcome: 'delivered' }) === 1, { timeoutMs: 15_000 });

    // A resource on the locked plan, then a plan change its handler refuses.
    const locked = newId('scr');
    const lockedCallback = randomBytes(8).toString('hex');
    assert.equal((await putResource(locked, 'locked', lockedCallback)).status, 202);
    await fake.waitForCallback(lockedCallback, 15_000);
    const refused = await market.send(target, 'PATCH', `/v1/resources/${locked}`, { plan: 'small' });
    assert.equal(refused.status, 400);

    await waitFor('the queue drained', async () => sample(await scrape(), 'marketplace_outbox_pending') === 0, { timeoutMs: 15_000 });
    const text = await scrape();
    assert.equal(sample(text, 'marketplace_requests_total', { route: '/v1/resources/:id', method: 'PUT', status: '401' }), 1);
    assert.equal(sample(text, 'marketplace_requests_total', { route: '/v1/resources/:id', method: 'PUT', status: '202', code: '' }), 2);
    assert.equal(sample(text, 'marketplace_requests_total', { route: '/v1/resources/:id', method: 'PATCH', status: '400', code: 'ERR_PLAN_CHANGE_REFUSED' }), 1);
    assert.equal(sample(text, 'marketplace_request_duration_seconds_count', { route: '/v1/resources/:id', method: 'PUT' }), 3);
    assert.equal(sample(text, 'marketplace_signature_failures_total'), 1);
    assert.equal(sample(text, 'marketplace_handler_duration_seconds_count', { operation: 'provision', outcome: 'accepted' }), 2);
    assert.equal(sample(text, 'marketplace_handler_duration_seconds_count', { operation: 'changePlan', outcome: 'refused' }), 1);
    assert.equal(sample(text, 'marketplace_operations_pending'), 0);
    assert.equal(sample(text, 'marketplace_outbox_deliveries_total', { outcome: 'delivered' }), 2);
    assert.ok(sample(text, 'marketplace_outbox_deliveries_total', { outcome: 'retry' }) >= 1);
    assert.equal(sample(text, 'marketplace_outbox_deliveries_total', { outcome: 'rejected' }), 0);
    // No id ever becomes a label value.
    for (const id of [first, locked, firstCallback, lockedCallback]) assert.doesNotMatch(text, new RegExp(id));

    const health = await fetch(`${running.url}/healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok', store: 'ok', outbox: { pending: 0, oldestPendingSeconds: 0, failing: 0 } });
    assert.equal((await fetch(`${running.url}/livez`)).status, 200);
  });
});
