/**
 * The store becoming unavailable, before and in the middle of a request: the example answers 503
 * with a JSON message, stores nothing partial, keeps running, and once the store is back the
 * marketplace's retry succeeds with exactly one resource.
 *
 * - SQLite: another connection holds the write lock (BEGIN EXCLUSIVE) longer than the example's
 *   busy timeout. (Making the file read-only does not stop root, and the tests may run as root.)
 * - PostgreSQL: the example connects through a TCP relay in the test, which the test cuts and
 *   restores; the real server is never stopped.
 */
import assert from 'node:assert/strict';
import { after, describe, it, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { startExample, stopAll, waitFor, type ExampleProcess } from '../helpers/processes.js';
import {
  DATABASE_URL,
  databaseUrlVia,
  figures,
  isErrorJson,
  marketplace,
  newId,
  postgresAdmin,
  postgresSkipReason,
  postgresUnderTest,
  sqliteUnderTest,
  tcpRelay,
  type Answer,
  type StoreUnderTest,
} from './helpers.js';

const pgSkip = await postgresSkipReason();
if (pgSkip !== false) console.log(`PostgreSQL outage test skipped: ${pgSkip}`);
const admin = pgSkip === false ? postgresAdmin() : undefined;
after(async () => {
  await admin?.end();
});

interface Outage {
  /** Makes the store unavailable to the example. */
  begin(): void;
  /** Makes it available again. */
  end(): void;
}

/**
 * Two outages: one already there when the request arrives, one that starts while its handler
 * runs (the commit then fails). Each answers 503 JSON; after the store is back, the retry gets 201.
 */
async function outageScenario(t: TestContext, store: StoreUnderTest, outage: Outage, extraEnv: Record<string, string> = {}): Promise<void> {
  const market = marketplace();
  const provider: ExampleProcess = await startExample({
    ...store.env,
    ...extraEnv,
    MASTER_PUBLIC_KEY: market.masterPublicKey,
    EXAMPLE_HANDLER_DELAY_MS: '1500',
    EXAMPLE_LEASE_MS: '1000',
  }, { name: `${store.kind} example` });
  t.after(() => stopAll([provider]));
  const answers: Answer[] = [];
  const send = async (id: string) => {
    const answer = await market.send(provider, 'PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'all::global' });
    answers.push(answer);
    return answer;
  };

  // 1. The store is down before the request arrives: 503, and the handler never runs.
  const before = newId('outage');
  outage.begin();
  let refused: Answer;
  try {
    refused = await send(before);
  } finally {
    outage.end();
  }
  assert.equal(refused.status, 503, refused.text);
  assert.ok(isErrorJson(refused), refused.text);
  assert.equal((await provider.handlerCalls()).provision?.[before], undefined);
  const retried = await send(before);
  assert.equal(retried.status, 201, retried.text);

  // 2. The store goes down while the handler runs: the commit fails, 503, nothing stored.
  const during = newId('outage');
  const inFlight = send(during);
  await waitFor('the handler to start', async () => (await provider.handlerCalls()).provision?.[during] === 1);
  outage.begin();
  let failed: Answer;
  try {
    failed = await inFlight;
  } finally {
    outage.end();
  }
  assert.equal(failed.status, 503, failed.text);
  assert.ok(isErrorJson(failed), failed.text);
  assert.equal(await store.count('resources', { column: 'id', value: during }), 0, 'nothing partial was stored');
  // The failed request could not release its claim either; the retry waits for its lease, then runs.
  const recovered = await send(during);
  assert.equal(recovered.status, 201, recovered.text);
  assert.deepEqual(recovered.body, { message: 'Your small bonnet is ready' });
  const repeat = await send(during);
  assert.deepEqual([repeat.status, repeat.text], [201, recovered.text]);

  for (const id of [before, during]) assert.equal(await store.count('resources', { column: 'id', value: id }), 1);
  assert.equal(await store.count('operations'), 0, 'no claim left behind');
  const calls = await provider.handlerCalls();
  assert.equal(calls.provision?.[before], 1);
  // The first run's outcome never reached the store, so the retry ran it again (docs/idempotency.md).
  assert.equal(calls.provision?.[during], 2);
  assert.equal((await fetch(`${provider.url}/healthz`)).status, 200, 'the process survived both outages');

  const exit = await provider.stop();
  assert.equal(exit.code, 0, provider.stderr());
  figures(t, `store outage (${store.kind})`, {
    faults: 2,
    requests: answers.length,
    answered503: answers.filter((a) => a.status === 503).length,
    '503NotJson': answers.filter((a) => a.status === 503 && !isErrorJson(a)).length,
    otherFiveXx: answers.filter((a) => a.status >= 500 && a.status !== 503).length,
    resources: 2,
    lost: 0,
  });
}

describe('the store becomes unavailable mid-request', () => {
  it('SQLite: a competing exclusive lock → 503 JSON; once released, retries succeed', async (t) => {
    const store = sqliteUnderTest();
    t.after(() => store.cleanup());
    let locker: Database.Database | undefined;
    t.after(() => locker?.close());
    await outageScenario(t, store, {
      begin() {
        locker = new Database(store.path, { timeout: 5000 });
        locker.exec('BEGIN EXCLUSIVE');
      },
      end() {
        locker?.exec('ROLLBACK');
        locker?.close();
        locker = undefined;
      },
    }, { STORE_BUSY_TIMEOUT_MS: '150' });
  });

  it('PostgreSQL: the connection cut at a relay → 503 JSON; once restored, retries succeed', { skip: pgSkip }, async (t) => {
    const upstream = new URL(DATABASE_URL ?? 'postgres://127.0.0.1:5432');
    const relay = await tcpRelay({ host: upstream.hostname, port: Number(upstream.port === '' ? 5432 : upstream.port) });
    t.after(() => relay.close());
    const store = postgresUnderTest(admin!, databaseUrlVia(relay.port));
    t.after(() => store.cleanup());
    await outageScenario(t, store, { begin: () => relay.cut(), end: () => relay.restore() });
  });
});
