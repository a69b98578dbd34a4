/**
 * The marketplace's connector down for a while: the example's long-running operations complete,
 * their callbacks fail (dropped connections, then 503s) and are retried, and every one is delivered
 * once the connector is back — also when the example is killed (SIGKILL) and restarted on the same
 * SQLite file in between.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createFakeConnector, type FakeConnector, type ReceivedCallback } from '../../src/testkit/fake-connector.js';
import { startExample, stopAll, waitFor, type ExampleProcess } from '../helpers/processes.js';
import { figures, marketplace, newId, sqliteUnderTest, type Answer } from './helpers.js';

const client = { clientId: 'outage-client', clientSecret: randomBytes(24).toString('hex') };

describe('the connector down for a while', () => {
  const market = marketplace();
  const store = sqliteUnderTest();
  let fake: FakeConnector;
  const processes: ExampleProcess[] = [];
  let env: Record<string, string>;

  before(async () => {
    fake = createFakeConnector(client);
    await fake.listen();
    env = {
      ...store.env,
      MASTER_PUBLIC_KEY: market.masterPublicKey,
      CONNECTOR_URL: fake.url,
      CONNECTOR_CLIENT_ID: client.clientId,
      CONNECTOR_CLIENT_SECRET: client.clientSecret,
      EXAMPLE_ASYNC: '1',
      EXAMPLE_ASYNC_DELAY_MS: '50',
      EXAMPLE_OUTBOX_POLL_MS: '100',
      EXAMPLE_OUTBOX_LEASE_MS: '2000',
      EXAMPLE_OUTBOX_BACKOFF_MS: '300',
      CONNECTOR_TIMEOUT_MS: '800',
    };
  });
  after(async () => {
    await stopAll(processes);
    await fake.close();
    await store.cleanup();
  });

  const callbackHeaders = (callbackId: string) => ({ 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) });
  const failedAttempts = (callbackId: string) => fake.callbacks.filter((c) => c.id === callbackId && c.status !== 204).length;

  /** Starts `count` provisionings, and for the last resource a credential set too; all answer 202. */
  async function startOperations(provider: ExampleProcess, count: number) {
    const operations: { path: string; callbackId: string; kind: 'resource' | 'credential' }[] = [];
    const answers: Answer[] = [];
    let lastResource = '';
    for (let i = 0; i < count; i++) {
      lastResource = newId('cbo');
      const callbackId = randomBytes(8).toString('hex');
      answers.push(await market.send(provider, 'PUT', `/v1/resources/${lastResource}`, { id: lastResource, product: 'bonnets', plan: 'small', region: 'all::global' }, { headers: callbackHeaders(callbackId) }));
      operations.push({ path: `/v1/resources/${lastResource}`, callbackId, kind: 'resource' });
    }
    return { operations, answers, lastResource };
  }

  it('callbacks fail while it is down and are all delivered once it is back', async (t) => {
    const provider = await startExample(env, { name: 'example' });
    processes.push(provider);
    fake.failNext('callbacks', 3, { drop: true });
    fake.setDown('callbacks');
    const { operations, answers } = await startOperations(provider, 5);
    assert.deepEqual(answers.map((a) => a.status), [202, 202, 202, 202, 202]);
    await waitFor('two failed attempts for every callback', () => operations.every((o) => failedAttempts(o.callbackId) >= 2), { timeoutMs: 15_000 });
    assert.equal(fake.callbacks.filter((c) => c.status === 204).length, 0);

    fake.setUp('callbacks');
    const delivered = await Promise.all(operations.map((o) => fake.waitForCallback(o.callbackId, 15_000)));
    for (const entry of delivered) assert.deepEqual(entry.body, { state: 'done', message: 'Your small bonnet is ready' });
    figures(t, 'connector outage', {
      operations: operations.length,
      faults: '3 dropped connections, then 503 until up',
      failedAttempts: operations.reduce((n, o) => n + failedAttempts(o.callbackId), 0),
      delivered: delivered.length,
      lost: operations.length - delivered.length,
      '5xx': answers.filter((a) => a.status >= 500).length,
    });
  });

  it('… also across a SIGKILL and a restart of the example on the same SQLite file', async (t) => {
    const provider = processes[0]!;
    fake.setDown('callbacks', { drop: true });
    const { operations, answers, lastResource } = await startOperations(provider, 4);
    // A credential set too, once its resource is provisioned: its callback carries the credential
    // values, which wait sealed in the outbox.
    await waitFor('the last resource to be provisioned', async () => (await store.count('resources', { column: 'id', value: lastResource })) === 1);
    const credentialId = newId('cbo-cred');
    const credentialCallback = randomBytes(8).toString('hex');
    answers.push(await market.send(provider, 'PUT', `/v1/credentials/${credentialId}`, { id: credentialId, resource_id: lastResource }, { headers: callbackHeaders(credentialCallback) }));
    operations.push({ path: `/v1/credentials/${credentialId}`, callbackId: credentialCallback, kind: 'credential' });
    assert.deepEqual(answers.map((a) => a.status), [202, 202, 202, 202, 202], answers.map((a) => a.text).join('\n'));
    await waitFor('a failed attempt for every callback', () => operations.every((o) => failedAttempts(o.callbackId) >= 1), { timeoutMs: 15_000 });
    assert.equal(await store.count('deliveries'), operations.length, 'every callback waits in the outbox');

    provider.kill('SIGKILL');
    assert.equal((await provider.exited).signal, 'SIGKILL');
    fake.setUp('callbacks');
    const killedAt = Date.now();
    const restarted = await startExample(env, { name: 'example (restarted)' });
    processes.push(restarted);

    const delivered: ReceivedCallback[] = await Promise.all(operations.map((o) => fake.waitForCallback(o.callbackId, 15_000)));
    for (const entry of delivered) assert.ok(entry.receivedAt >= killedAt);
    for (const [i, entry] of delivered.entries()) {
      if (operations[i]!.kind === 'credential') {
        const body = entry.body as { state: string; credentials?: Record<string, string> };
        assert.equal(body.state, 'done');
        assert.match(body.credentials?.BONNETS_URL ?? '', new RegExp(`@bonnets\\.example/${lastResource}$`));
      } else {
        assert.deepEqual(entry.body, { state: 'done', message: 'Your small bonnet is ready' });
      }
    }
    await waitFor('the outbox to empty', async () => (await store.count('deliveries')) === 0, { timeoutMs: 10_000 });
    const exit = await restarted.stop();
    assert.equal(exit.code, 0, restarted.stderr());
    figures(t, 'connector outage across a restart', {
      operations: operations.length,
      faults: 'connector dropping connections + SIGKILL + restart',
      failedAttempts: operations.reduce((n, o) => n + failedAttempts(o.callbackId), 0),
      delivered: delivered.length,
      lost: operations.length - delivered.length,
      '5xx': answers.filter((a) => a.status >= 500).length,
    });
  });
});
