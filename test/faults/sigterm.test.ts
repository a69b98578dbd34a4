/**
 * SIGTERM: the example stops accepting connections at once, lets the request in flight finish
 * (its slow handler still commits and answers 201), stops the callback outbox, closes the store
 * and exits 0.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { createFakeConnector } from '../../src/testkit/fake-connector.js';
import { startExample, stopAll, waitFor } from '../helpers/processes.js';
import { figures, marketplace, newId, sqliteUnderTest } from './helpers.js';

describe('SIGTERM', () => {
  it('stops taking requests, finishes the one in flight, stops the outbox, exits 0', async (t) => {
    const market = marketplace();
    const store = sqliteUnderTest();
    t.after(() => store.cleanup());
    const client = { clientId: 'sigterm-client', clientSecret: randomBytes(24).toString('hex') };
    const fake = createFakeConnector(client);
    await fake.listen();
    t.after(() => fake.close());
    const provider = await startExample({
      ...store.env,
      MASTER_PUBLIC_KEY: market.masterPublicKey,
      // A connector, so that a delivery worker runs and has to be stopped.
      CONNECTOR_URL: fake.url,
      CONNECTOR_CLIENT_ID: client.clientId,
      CONNECTOR_CLIENT_SECRET: client.clientSecret,
      EXAMPLE_OUTBOX_POLL_MS: '100',
      EXAMPLE_HANDLER_DELAY_MS: '2000',
      LOG_LEVEL: 'info',
    });
    t.after(() => stopAll([provider]));

    const id = newId('term');
    let settled = false;
    const inFlight = market.send(provider, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'all::global' })
      .finally(() => {
        settled = true;
      });
    await waitFor('the handler to start', async () => (await provider.handlerCalls()).provision?.[id] === 1);
    provider.kill('SIGTERM');

    // New connections are refused while the request in flight is still being handled.
    let refusedWhileInFlight = false;
    await waitFor('new connections to be refused', async () => {
      const error = await fetch(`${provider.url}/healthz`, { headers: { connection: 'close' } }).then(() => undefined, (e: unknown) => e);
      if (error === undefined) return false;
      refusedWhileInFlight = !settled;
      return true;
    }, { timeoutMs: 5000 });
    assert.ok(refusedWhileInFlight, 'the refusal came before the request in flight was answered');

    const answer = await inFlight;
    assert.equal(answer.status, 201, answer.text);
    assert.deepEqual(answer.body, { message: 'Your small bonnet is ready' });
    const exit = await provider.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, provider.stderr());
    assert.match(provider.stdout(), /example provider: SIGTERM, finishing requests in flight/);
    assert.match(provider.stdout(), /example provider: stopped \(requests finished, outbox stopped, store closed\)/);
    assert.equal(provider.stderr(), '');

    // The answer that reached the marketplace is in the store, and nothing is left claimed.
    const reopened = await store.open();
    try {
      assert.equal((await reopened.getResource(id))?.plan, 'small');
      assert.equal(await reopened.getOperation(`resource:${id}`), undefined);
    } finally {
      await reopened.close();
    }
    figures(t, 'SIGTERM', { faults: 'SIGTERM during a handler', requests: 1, answered201: 1, '5xx': 0, exitCode: exit.code ?? 'none', lost: 0 });
  });
});
