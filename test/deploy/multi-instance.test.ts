/**
 * Two example-provider processes on one PostgreSQL database and schema behave as one: concurrent
 * identical requests split across them run the handler once in total, and deliveries held by an
 * instance that is killed are sent by the other once their claim lapses. Needs DATABASE_URL (CI
 * sets it); without a server the tests report themselves skipped with the reason.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { delay, startExample, stopAll, sumCalls, waitFor, type ExampleProcess } from '../helpers/processes.js';
import {
  DATABASE_URL,
  figures,
  marketplace,
  newEncryptionKey,
  newId,
  postgresAdmin,
  postgresSkipReason,
  type Answer,
} from '../faults/helpers.js';

const skip = await postgresSkipReason();
if (skip !== false) console.log(`multi-instance tests skipped: ${skip}`);
const admin = skip === false ? postgresAdmin() : undefined;
after(async () => {
  await admin?.end();
});

const provisionBody = (id: string) => ({ id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });
const CONCURRENT = 50;

describe('two instances, one database: concurrent identical requests', { skip }, () => {
  const market = marketplace();
  let a: ExampleProcess | undefined;
  let b: ExampleProcess | undefined;
  let schema: string;

  before(async () => {
    schema = admin!.newSchema('em_deploy');
    const env = {
      STORE: DATABASE_URL,
      STORE_SCHEMA: schema,
      STORE_ENCRYPTION_KEY: newEncryptionKey(),
      MASTER_PUBLIC_KEY: market.masterPublicKey,
      // Slow enough that the duplicates arrive while the first one's handler still runs.
      EXAMPLE_HANDLER_DELAY_MS: '300',
      EXAMPLE_LEASE_MS: '3000',
    };
    // Started together: the second migration waits on the advisory lock, then finds the schema done.
    [a, b] = await Promise.all([startExample(env, { name: 'instance A' }), startExample(env, { name: 'instance B' })]);
  });
  after(async () => {
    await stopAll([a, b]);
  });

  /** `count` identical requests at once, alternating between the two instances. */
  async function burst(method: string, path: string, body: unknown): Promise<Answer[]> {
    return Promise.all(Array.from({ length: CONCURRENT }, (_, i) => market.send(i % 2 === 0 ? a! : b!, method, path, body)));
  }

  it('50 identical provisioning PUTs across both: the handler runs once, every answer is the same 201', async (t) => {
    const id = newId('multi');
    const answers = await burst('PUT', `/v1/resources/${id}`, provisionBody(id));
    const statuses = answers.map((r) => r.status);
    const calls = sumCalls([await a!.handlerCalls(), await b!.handlerCalls()], 'provision', id);
    figures(t, 'multi-instance provisioning', {
      instances: 2,
      requests: answers.length,
      answered201: statuses.filter((s) => s === 201).length,
      answered409: statuses.filter((s) => s === 409).length,
      '5xx': statuses.filter((s) => s >= 500).length,
      handlerCalls: calls,
    });
    assert.deepEqual(new Set(statuses), new Set([201]), `statuses: ${statuses.join(',')}`);
    assert.equal(new Set(answers.map((r) => r.text)).size, 1, 'every answer carries the same message');
    assert.deepEqual(answers[0]!.body, { message: 'Your small bonnet is ready' });
    assert.equal(calls, 1, 'the handler ran exactly once over both instances');
    const rows = await admin!.query(`SELECT plan FROM "${schema}".resources WHERE id = $1`, [id]);
    assert.deepEqual(rows, [{ plan: 'small' }]);
  });

  it('50 identical credential PUTs across both: one handler call, identical credential values in every answer', async (t) => {
    const resourceId = newId('multi');
    assert.equal((await market.send(a!, 'PUT', `/v1/resources/${resourceId}`, provisionBody(resourceId))).status, 201);
    const id = newId('cred');
    const answers = await burst('PUT', `/v1/credentials/${id}`, { id, resource_id: resourceId });
    const statuses = answers.map((r) => r.status);
    const calls = sumCalls([await a!.handlerCalls(), await b!.handlerCalls()], 'provisionCredentials', id);
    const values = new Set(answers.map((r) => JSON.stringify((r.body as { credentials?: unknown } | undefined)?.credentials)));
    figures(t, 'multi-instance credentials', {
      instances: 2,
      requests: answers.length,
      answered201: statuses.filter((s) => s === 201).length,
      answered409: statuses.filter((s) => s === 409).length,
      '5xx': statuses.filter((s) => s >= 500).length,
      distinctCredentialValues: values.size,
      handlerCalls: calls,
    });
    assert.deepEqual(new Set(statuses), new Set([201]), `statuses: ${statuses.join(',')}`);
    assert.equal(values.size, 1, 'all answers carry the same credential values');
    const credentials = (answers[0]!.body as { credentials: Record<string, string> }).credentials;
    assert.match(credentials.BONNETS_URL ?? '', new RegExp(`^https://u[0-9a-f]{12}:[^@]+@bonnets\\.example/${resourceId}$`));
    assert.equal(calls, 1, 'the handler ran exactly once over both instances');
  });

  /** Sends until the answer is final (not "in progress, retry": 409 ERR_OPERATION_CONFLICT is final). */
  async function settle(target: ExampleProcess, method: string, path: string, body?: unknown): Promise<Answer> {
    for (let attempt = 0; ; attempt++) {
      const answer = await market.send(target, method, path, body);
      const code = (answer.body as { code?: string } | undefined)?.code;
      if (!(answer.status === 503 && code === 'ERR_OPERATION_IN_PROGRESS') || attempt >= 40) return answer;
      await delay(100);
    }
  }

  const started = async (handler: string, id: string) =>
    waitFor(`${handler} of ${id} to start`, async () => sumCalls([await a!.handlerCalls(), await b!.handlerCalls()], handler, id) > 0);

  it("a credential PUT on one instance and its resource's DELETE on the other serialize, in either order: never a live credential after its resource is gone", async () => {
    // Credential first (its handler is slow), DELETE on the other instance while it runs.
    const r1 = newId('race');
    assert.equal((await market.send(a!, 'PUT', `/v1/resources/${r1}`, provisionBody(r1))).status, 201);
    const c1 = newId('cred');
    const putting = market.send(a!, 'PUT', `/v1/credentials/${c1}`, { id: c1, resource_id: r1 });
    await started('provisionCredentials', c1);
    const deleting = settle(b!, 'DELETE', `/v1/resources/${r1}`);
    assert.equal((await putting).status, 201, 'the credential PUT that started first completes');
    assert.equal((await deleting).status, 204, 'the DELETE waits for it, then deprovisions');
    assert.deepEqual(await admin!.query(`SELECT id FROM "${schema}".credentials WHERE resource_id = $1`, [r1]), []);
    assert.deepEqual(await admin!.query(`SELECT entity FROM "${schema}".tombstones WHERE id = $1`, [c1]), [{ entity: 'credential' }], 'the credential went with its resource');

    // DELETE first (its handler is slow), the credential PUT on the other instance while it runs.
    const r2 = newId('race');
    assert.equal((await market.send(a!, 'PUT', `/v1/resources/${r2}`, provisionBody(r2))).status, 201);
    const c2 = newId('cred');
    const deleting2 = market.send(b!, 'DELETE', `/v1/resources/${r2}`);
    await started('deprovision', r2);
    const during = await market.send(a!, 'PUT', `/v1/credentials/${c2}`, { id: c2, resource_id: r2 });
    assert.ok([404, 409, 503].includes(during.status), `a credential PUT during the DELETE is refused, got ${during.status}`);
    assert.equal((await deleting2).status, 204);
    const after = await settle(a!, 'PUT', `/v1/credentials/${c2}`, { id: c2, resource_id: r2 });
    assert.equal(after.status, 404, 'after the DELETE: 404');
    assert.equal(sumCalls([await a!.handlerCalls(), await b!.handlerCalls()], 'provisionCredentials', c2), 0, 'provisionCredentials never ran');
    assert.deepEqual(await admin!.query(`SELECT id FROM "${schema}".credentials WHERE id = $1`, [c2]), []);
  });
});

describe('two instances, one database: an instance killed while it holds claimed deliveries', { skip }, () => {
  const market = marketplace();
  const client = { clientId: 'multi-client', clientSecret: randomBytes(24).toString('hex') };
  let fake: FakeConnector;
  let a: ExampleProcess | undefined;
  let b: ExampleProcess | undefined;
  let schema: string;

  before(async () => {
    fake = createFakeConnector(client);
    await fake.listen();
    schema = admin!.newSchema('em_deploy');
  });
  after(async () => {
    await stopAll([a, b]);
    await fake.close();
  });

  it('the surviving instance delivers them after the claim lapses; nothing is lost', async (t) => {
    // The connector hangs on every callback: each attempt holds its claim until the send times out.
    fake.setDown('callbacks', { delayMs: 10 * 60_000 });
    const env = {
      STORE: DATABASE_URL,
      STORE_SCHEMA: schema,
      STORE_ENCRYPTION_KEY: newEncryptionKey(),
      MASTER_PUBLIC_KEY: market.masterPublicKey,
      CONNECTOR_URL: fake.url,
      CONNECTOR_CLIENT_ID: client.clientId,
      CONNECTOR_CLIENT_SECRET: client.clientSecret,
      EXAMPLE_ASYNC: '1',
      EXAMPLE_ASYNC_DELAY_MS: '50',
      EXAMPLE_OUTBOX_POLL_MS: '100',
      EXAMPLE_OUTBOX_LEASE_MS: '3000',
      EXAMPLE_OUTBOX_BACKOFF_MS: '300',
      CONNECTOR_TIMEOUT_MS: '1000',
    };
    [a, b] = await Promise.all([startExample(env, { name: 'instance A' }), startExample(env, { name: 'instance B' })]);

    const operations = Array.from({ length: 12 }, () => ({ id: newId('dlv'), callbackId: randomBytes(8).toString('hex') }));
    const accepted = await Promise.all(operations.map(({ id, callbackId }, i) =>
      market.send(i % 2 === 0 ? a! : b!, 'PUT', `/v1/resources/${id}`, provisionBody(id), {
        headers: { 'x-callback-id': callbackId, 'x-callback-url': fake.callbackUrl(callbackId) },
      })));
    assert.deepEqual(accepted.map((r) => r.status), operations.map(() => 202));

    // Every operation completed: its callback waits in the outbox.
    await waitFor('all 12 deliveries enqueued', async () => {
      const [row] = await admin!.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".deliveries`);
      return Number(row?.n) === operations.length;
    }, { timeoutMs: 15_000 });

    // Kill A at a moment it holds claims (its owner name carries its pid).
    const ownerPattern = `%:${a.pid}:%`;
    const heldBeforeKill = await waitFor('instance A to hold a claimed delivery', async () => {
      const rows = await admin!.query<{ callback_id: string }>(
        `SELECT callback_id FROM "${schema}".deliveries WHERE claimed_by LIKE $1 AND claim_expires_at > $2`,
        [ownerPattern, Date.now() + 200],
      );
      return rows.length > 0 ? rows : undefined;
    }, { timeoutMs: 15_000, intervalMs: 10 });
    a.kill('SIGKILL');
    const exit = await a.exited;
    assert.equal(exit.signal, 'SIGKILL');
    const killedAt = Date.now();
    // What the dead instance still holds (it can no longer release anything).
    const orphaned = await admin!.query<{ callback_id: string; claim_expires_at: string }>(
      `SELECT callback_id, claim_expires_at FROM "${schema}".deliveries WHERE claimed_by LIKE $1`,
      [ownerPattern],
    );
    assert.ok(orphaned.length > 0, `instance A held ${heldBeforeKill.length} claim(s) just before the kill and none after`);

    fake.setUp('callbacks');
    const delivered = await Promise.all(operations.map(({ callbackId }) => fake.waitForCallback(callbackId, 20_000)));
    for (const entry of delivered) {
      assert.deepEqual(entry.body, { state: 'done', message: 'Your small bonnet is ready' });
      assert.equal(entry.authOk, true);
    }
    for (const { callback_id: callbackId } of orphaned) {
      const entry = delivered.find((d) => d.id === callbackId)!;
      assert.ok(entry.receivedAt >= killedAt, 'an orphaned delivery was sent after the kill, so by instance B');
    }
    await waitFor('the outbox table to empty', async () => {
      const [row] = await admin!.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".deliveries`);
      return Number(row?.n) === 0;
    }, { timeoutMs: 10_000 });
    const resources = await admin!.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".resources WHERE id = ANY($1)`, [operations.map((o) => o.id)]);
    assert.equal(Number(resources[0]?.n), operations.length);

    figures(t, 'multi-instance deliveries', {
      instances: 2,
      operations: operations.length,
      faults: 'connector hung + SIGKILL of instance A',
      claimsOrphanedByKill: orphaned.length,
      callbacksAccepted: delivered.length,
      callbackAttempts: fake.callbacks.length,
      lost: operations.length - delivered.length,
      '5xx': accepted.filter((r) => r.status >= 500).length,
    });
    const exitB = await b.stop();
    assert.equal(exitB.code, 0, b.stderr());
  });
});
