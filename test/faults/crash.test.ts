/**
 * kill -9 in the middle of a provisioning handler: nothing was committed, so after a restart on
 * the same store the marketplace's retry runs the handler again and gets exactly one resource and
 * the 201 it should have had. On SQLite (the restart expires the dead process's claim at once) and
 * on PostgreSQL (the retry waits for the claim's lease to lapse).
 */
import assert from 'node:assert/strict';
import { after, describe, it, type TestContext } from 'node:test';
import { startExample, stopAll, waitFor, type ExampleProcess } from '../helpers/processes.js';
import {
  figures,
  marketplace,
  newId,
  postgresAdmin,
  postgresSkipReason,
  postgresUnderTest,
  sqliteUnderTest,
  type StoreUnderTest,
} from './helpers.js';

const pgSkip = await postgresSkipReason();
if (pgSkip !== false) console.log(`PostgreSQL crash test skipped: ${pgSkip}`);
const admin = pgSkip === false ? postgresAdmin() : undefined;
after(async () => {
  await admin?.end();
});

async function crashMidProvisioning(t: TestContext, store: StoreUnderTest): Promise<void> {
  const market = marketplace();
  const env = {
    ...store.env,
    MASTER_PUBLIC_KEY: market.masterPublicKey,
    // Long enough for the test to see the handler start and kill the process inside it.
    EXAMPLE_HANDLER_DELAY_MS: '1500',
    EXAMPLE_LEASE_MS: '1000',
  };
  const processes: ExampleProcess[] = [];
  t.after(() => stopAll(processes));
  const first = await startExample(env, { name: `${store.kind} example` });
  processes.push(first);

  const id = newId('crash');
  const body = { id, product: 'bonnets', plan: 'large', region: 'all::global' };
  const inFlight = market.send(first, 'PUT', `/v1/resources/${id}`, body).then(
    (answer) => ({ answer }),
    (error: unknown) => ({ error }),
  );
  await waitFor('the provisioning handler to start', async () => (await first.handlerCalls()).provision?.[id] === 1);
  first.kill('SIGKILL');
  assert.equal((await first.exited).signal, 'SIGKILL');
  const lost = await inFlight;
  assert.ok('error' in lost, 'the request in flight got no answer: the marketplace sees a network error');
  assert.equal(await store.count('resources', { column: 'id', value: id }), 0, 'nothing was committed');
  assert.equal(await store.count('operations', { column: 'target_id', value: id }), 1, 'only the dead claim is left');

  const second = await startExample(env, { name: `${store.kind} example (restarted)` });
  processes.push(second);
  const retry = await market.send(second, 'PUT', `/v1/resources/${id}`, body);
  assert.equal(retry.status, 201, retry.text);
  assert.deepEqual(retry.body, { message: 'Your large bonnet is ready' });
  const repeat = await market.send(second, 'PUT', `/v1/resources/${id}`, body);
  assert.equal(repeat.status, 201);
  assert.deepEqual(repeat.body, retry.body);
  assert.equal((await second.handlerCalls()).provision?.[id], 1, 'the retry ran the handler once; the repeat replayed');

  assert.equal(await store.count('resources', { column: 'id', value: id }), 1);
  assert.equal(await store.count('operations', { column: 'target_id', value: id }), 0);
  const exit = await second.stop();
  assert.equal(exit.code, 0, second.stderr());
  figures(t, `crash mid-handler (${store.kind})`, {
    faults: 'SIGKILL during provision',
    requests: 3,
    '5xx': [retry, repeat].filter((r) => r.status >= 500).length,
    resources: 1,
    lost: 0,
    doubled: 0,
  });
}

describe('kill -9 in the middle of a provisioning handler', () => {
  it('SQLite: restart on the same file, the retry gets 201 and exactly one resource', async (t) => {
    const store = sqliteUnderTest();
    t.after(() => store.cleanup());
    await crashMidProvisioning(t, store);
  });

  it('PostgreSQL: restart on the same schema, the retry gets 201 and exactly one resource', { skip: pgSkip }, async (t) => {
    const store = postgresUnderTest(admin!);
    t.after(() => store.cleanup());
    await crashMidProvisioning(t, store);
  });
});
