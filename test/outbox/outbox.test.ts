import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConnectorClient } from '../../src/connector/client.js';
import { createOutbox, type SendCallback, type SendResult } from '../../src/outbox/index.js';
import { memoryStore } from '../../src/store/memory.js';
import type { CallbackPayload, DeliveryRecord, ListingStore, Store } from '../../src/store/types.js';
import { captureLogs, deferred, enqueue, fakeClock, LEVEL, waitFor } from './helpers.js';

// Compile-time check: the connector client's sendCallback plugs in as `send` unchanged.
const _connectorFits: (client: ConnectorClient) => SendCallback = (client) => (url, payload) => client.sendCallback(url, payload);

const delivered: SendCallback = async () => ({ outcome: 'delivered', status: 204 });

async function only(store: ListingStore): Promise<DeliveryRecord> {
  const all = await store.listDeliveries();
  assert.equal(all.length, 1, 'expected exactly one delivery in the store');
  return all[0]!;
}

describe('outbox: outcomes', () => {
  it('sends a due delivery once and removes it when delivered', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    const calls: { url: string; payload: CallbackPayload; callbackId: string; attempt: number }[] = [];
    const outbox = createOutbox({
      store,
      now: clock.now,
      logger: logs.logger,
      send: async (url, payload, context) => {
        calls.push({ url, payload, callbackId: context.callbackId, attempt: context.attempt });
        return { outcome: 'delivered', status: 204 };
      },
    });
    const d = await enqueue(store, { now: clock.now() });

    assert.equal(await outbox.runOnce(), 1);
    assert.deepEqual(calls, [{ url: d.url, payload: d.payload, callbackId: d.callbackId, attempt: 1 }]);
    assert.deepEqual(await store.listDeliveries(), []);
    assert.equal(await outbox.runOnce(), 0, 'nothing left to send');
    assert.equal(outbox.stats().delivered, 1);

    const line = logs.lines().find((l) => l.outcome === 'delivered');
    assert.ok(line, 'a log line for the delivery');
    assert.equal(line.callbackId, d.callbackId);
    assert.equal(line.attempt, 1);
    assert.equal(line.status, 204);
  });

  it('does not send a delivery before it is due', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    let sends = 0;
    const outbox = createOutbox({ store, now: clock.now, logger: false, send: async () => (sends++, { outcome: 'delivered' }) });
    await enqueue(store, { now: clock.now() + 5000 });
    assert.equal(await outbox.runOnce(), 0);
    assert.equal(sends, 0);
    clock.advance(5000);
    assert.equal(await outbox.runOnce(), 1);
    assert.equal(sends, 1);
  });

  it('a 409 fails the delivery for good and logs an error naming the callback id and status', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    let sends = 0;
    const outbox = createOutbox({
      store,
      now: clock.now,
      logger: logs.logger,
      send: async () => (sends++, { outcome: 'rejected', status: 409, reason: 'connector answered 409' }),
    });
    const d = await enqueue(store, { now: clock.now() });

    assert.equal(await outbox.runOnce(), 1);
    const record = await only(store);
    assert.equal(record.state, 'failed');
    assert.match(record.lastError ?? '', /409/);
    clock.advance(24 * 60 * 60_000);
    assert.equal(await outbox.runOnce(), 0, 'a failed delivery is never attempted again');
    assert.equal(sends, 1);

    const errors = logs.lines().filter((l) => l.level === LEVEL.error);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.callbackId, d.callbackId);
    assert.equal(errors[0]!.status, 409);
    assert.equal(errors[0]!.outcome, 'rejected');
    assert.match(errors[0]!.msg, /different outcome for this callback id/);
  });

  it('other final 4xx answers and refusals before sending also fail the delivery', async () => {
    for (const result of [{ outcome: 'rejected', status: 400 }, { outcome: 'rejected', reason: 'callback URL not allowed' }] as SendResult[]) {
      const store = memoryStore();
      const clock = fakeClock();
      const logs = captureLogs();
      const outbox = createOutbox({ store, now: clock.now, logger: logs.logger, send: async () => result });
      await enqueue(store, { now: clock.now() });
      await outbox.runOnce();
      const record = await only(store);
      assert.equal(record.state, 'failed');
      assert.equal(logs.lines().filter((l) => l.level === LEVEL.error && l.outcome === 'rejected').length, 1);
    }
  });

  it('a 429 with Retry-After is retried no sooner than the connector asked', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const results: SendResult[] = [{ outcome: 'retry', status: 429, retryAfterMs: 30_000, reason: 'connector answered 429' }, { outcome: 'delivered', status: 204 }];
    const outbox = createOutbox({ store, now: clock.now, logger: false, backoff: { baseMs: 10 }, random: () => 0.99, send: async () => results.shift()! });
    await enqueue(store, { now: clock.now() });
    const failedAt = clock.now();

    await outbox.runOnce();
    const record = await only(store);
    assert.equal(record.state, 'pending');
    assert.equal(record.attempts, 1);
    assert.ok(record.nextAttemptAt >= failedAt + 30_000, `next attempt ${record.nextAttemptAt - failedAt} ms after failure`);
    assert.match(record.lastError ?? '', /429/);

    clock.advance(29_999);
    assert.equal(await outbox.runOnce(), 0, 'not before Retry-After');
    clock.advance(1);
    assert.equal(await outbox.runOnce(), 1);
    assert.deepEqual(await store.listDeliveries(), []);
  });

  it('caps Retry-After at backoff.maxMs', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const outbox = createOutbox({
      store, now: clock.now, logger: false, backoff: { baseMs: 10, maxMs: 60_000 },
      send: async () => ({ outcome: 'retry', status: 503, retryAfterMs: 10 * 60 * 60_000, reason: 'connector answered 503' }),
    });
    await enqueue(store, { now: clock.now() });
    await outbox.runOnce();
    assert.equal((await only(store)).nextAttemptAt, clock.now() + 60_000);
  });

  it('the wait grows by the factor per failed attempt and stops at maxMs', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const outbox = createOutbox({
      store, now: clock.now, logger: false, backoff: { baseMs: 100, factor: 2, maxMs: 1000, jitter: 'none' },
      send: async () => ({ outcome: 'retry', status: 500, reason: 'connector answered 500' }),
    });
    await enqueue(store, { now: clock.now() });
    const waits: number[] = [];
    for (let i = 0; i < 7; i++) {
      assert.equal(await outbox.runOnce(), 1);
      const record = await only(store);
      assert.equal(record.attempts, i + 1);
      waits.push(record.nextAttemptAt - clock.now());
      clock.set(record.nextAttemptAt);
    }
    assert.deepEqual(waits, [100, 200, 400, 800, 1000, 1000, 1000]);
  });

  it('full jitter waits a random share of the bound', async () => {
    const waitsFor = async (random: () => number): Promise<number[]> => {
      const store = memoryStore();
      const clock = fakeClock();
      const outbox = createOutbox({
        store, now: clock.now, logger: false, random, backoff: { baseMs: 1000, factor: 2, maxMs: 5000 },
        send: async () => ({ outcome: 'retry', reason: 'network error' }),
      });
      await enqueue(store, { now: clock.now() });
      const waits: number[] = [];
      for (let i = 0; i < 5; i++) {
        await outbox.runOnce();
        const record = await only(store);
        waits.push(record.nextAttemptAt - clock.now());
        clock.set(record.nextAttemptAt);
      }
      return waits;
    };
    assert.deepEqual(await waitsFor(() => 0.5), [500, 1000, 2000, 2500, 2500]);
    // The top of the range stays below the bound; the bottom is 1 ms, never the same instant.
    assert.deepEqual(await waitsFor(() => 0.9999), [999, 1999, 3999, 4999, 4999]);
    assert.deepEqual(await waitsFor(() => 0), [1, 1, 1, 1, 1]);
    const bounds = [1000, 2000, 4000, 5000, 5000];
    const random = await waitsFor(Math.random);
    random.forEach((wait, i) => assert.ok(wait >= 1 && wait <= bounds[i]!, `wait ${wait} within [1, ${bounds[i]}]`));
  });

  it('a send that throws counts as a retry with the error message', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    let calls = 0;
    const outbox = createOutbox({
      store, now: clock.now, logger: logs.logger, backoff: { baseMs: 50, jitter: 'none' },
      send: async () => {
        calls++;
        if (calls === 1) throw new Error('socket hang up');
        if (calls === 2) return 'nonsense' as unknown as SendResult;
        return { outcome: 'delivered' };
      },
    });
    await enqueue(store, { now: clock.now() });

    await outbox.runOnce();
    let record = await only(store);
    assert.equal(record.state, 'pending');
    assert.equal(record.attempts, 1);
    assert.match(record.lastError ?? '', /socket hang up/);
    assert.equal(record.nextAttemptAt, clock.now() + 50);
    const warn = logs.lines().find((l) => l.outcome === 'retry');
    assert.ok(warn);
    assert.equal(warn.level, LEVEL.warn);
    assert.equal(warn.attempt, 1);
    assert.equal(warn.nextAttemptAt, new Date(clock.now() + 50).toISOString());

    clock.advance(50);
    await outbox.runOnce();
    record = await only(store);
    assert.equal(record.attempts, 2, 'a malformed result is a retry too');
    clock.advance(100);
    await outbox.runOnce();
    assert.deepEqual(await store.listDeliveries(), []);
  });

  it('an attempt that outlives sendTimeoutMs is aborted and counted as a retry', async () => {
    const store = memoryStore();
    let signal: AbortSignal | undefined;
    const outbox = createOutbox({
      store, logger: false, leaseMs: 1000, sendTimeoutMs: 20,
      send: (_url, _payload, context) => {
        signal = context.signal;
        return new Promise<SendResult>(() => undefined);
      },
    });
    await enqueue(store, { now: Date.now() });
    assert.equal(await outbox.runOnce(), 1);
    assert.equal(signal?.aborted, true);
    const record = await only(store);
    assert.equal(record.attempts, 1);
    assert.match(record.lastError ?? '', /no answer within 20 ms/);
    assert.equal(record.claimedBy, undefined, 'the claim is released with the retry');
  });
});

describe('outbox: the 24-hour deadline', () => {
  it('fails a delivery found past its deadline without sending it', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    let sends = 0;
    const outbox = createOutbox({ store, now: clock.now, logger: logs.logger, send: async () => (sends++, { outcome: 'delivered' }) });
    const d = await enqueue(store, { now: clock.now(), deadlineMs: 24 * 60 * 60_000 });
    clock.advance(24 * 60 * 60_000);

    assert.equal(await outbox.runOnce(), 1);
    assert.equal(sends, 0);
    const record = await only(store);
    assert.equal(record.state, 'failed');
    assert.equal(record.lastError, 'deadline passed');
    const error = logs.lines().find((l) => l.level === LEVEL.error);
    assert.equal(error?.callbackId, d.callbackId);
    assert.match(error?.msg ?? '', /deadline passed/);
  });

  it('moves a retry that would overshoot the deadline ahead of it, logs that, and gives up if that last attempt fails', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    let sends = 0;
    const outbox = createOutbox({
      store, now: clock.now, logger: logs.logger, pollIntervalMs: 1000, backoff: { baseMs: 60_000, jitter: 'none' },
      send: async () => (sends++, { outcome: 'retry', status: 502, reason: 'connector answered 502' }),
    });
    const d = await enqueue(store, { now: clock.now(), deadlineMs: 30_000 });

    await outbox.runOnce();
    const record = await only(store);
    assert.equal(record.state, 'pending');
    // The regular wait (60 s) would fall after the deadline (30 s): one last attempt two polls before it.
    assert.equal(record.nextAttemptAt, d.deadlineAt - 2000);
    const warning = logs.lines().find((l) => l.level === LEVEL.error);
    assert.ok(warning, 'an error line says the deadline cannot be made on schedule');
    assert.equal(warning.callbackId, d.callbackId);
    assert.equal(warning.nextAttemptAt, new Date(d.deadlineAt - 2000).toISOString());
    assert.match(warning.msg, /cannot make its deadline/);

    clock.set(record.nextAttemptAt);
    await outbox.runOnce();
    assert.equal(sends, 2, 'the last attempt was made');
    const failed = await only(store);
    assert.equal(failed.state, 'failed');
    assert.match(failed.lastError ?? '', /^cannot make the deadline; last error: connector answered 502$/);
    assert.equal(outbox.stats().expired, 1);
    assert.equal(logs.lines().filter((l) => l.level === LEVEL.error).length, 2);
  });

  it('delivers on the last attempt before the deadline', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const results: SendResult[] = [{ outcome: 'retry', retryAfterMs: 3_600_000, reason: 'connector answered 429' }, { outcome: 'delivered' }];
    const outbox = createOutbox({ store, now: clock.now, logger: false, send: async () => results.shift()! });
    const d = await enqueue(store, { now: clock.now(), deadlineMs: 10 * 60_000 });
    await outbox.runOnce();
    const record = await only(store);
    assert.ok(record.nextAttemptAt < d.deadlineAt, 'Retry-After is capped at the deadline');
    clock.set(record.nextAttemptAt);
    await outbox.runOnce();
    assert.deepEqual(await store.listDeliveries(), []);
  });
});

describe('outbox: durability and several processes', () => {
  it('a new outbox over the same store delivers what a stopped one left pending', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const first = createOutbox({ store, now: clock.now, logger: false, owner: 'process-1', send: async () => ({ outcome: 'retry', status: 503, reason: 'connector answered 503' }) });
    const d = await enqueue(store, { now: clock.now() });
    await first.runOnce();
    await first.stop();
    assert.equal((await only(store)).attempts, 1);

    const sent: string[] = [];
    const second = createOutbox({ store, now: clock.now, logger: false, owner: 'process-2', send: async (_url, _p, c) => (sent.push(c.callbackId), { outcome: 'delivered' }) });
    clock.advance(15 * 60_000);
    assert.equal(await second.runOnce(), 1);
    assert.deepEqual(sent, [d.callbackId]);
    assert.deepEqual(await store.listDeliveries(), []);
  });

  it('a delivery claimed by a process that died mid-attempt is taken up once its lease lapses', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const hung = deferred<SendResult>();
    const started = deferred();
    const sends: string[] = [];
    const dead = createOutbox({
      store, now: clock.now, logger: false, owner: 'dead', leaseMs: 60_000,
      send: () => (sends.push('dead'), started.resolve(), hung.promise),
    });
    const alive = createOutbox({ store, now: clock.now, logger: false, owner: 'alive', leaseMs: 60_000, send: async () => (sends.push('alive'), { outcome: 'delivered' }) });
    await enqueue(store, { now: clock.now() });

    const stuck = dead.runOnce();
    await started.promise;
    assert.equal(await alive.runOnce(), 0, 'held by the live claim');
    clock.advance(60_000);
    assert.equal(await alive.runOnce(), 1, 'taken up after the lease');
    assert.deepEqual(await store.listDeliveries(), []);

    // The "dead" process wakes up late: its outcome must not disturb anything.
    hung.resolve({ outcome: 'rejected', status: 409 });
    await stuck;
    assert.deepEqual(await store.listDeliveries(), []);
    assert.deepEqual(sends, ['dead', 'alive']);
  });

  it('two outboxes on one store never attempt the same delivery concurrently', async () => {
    const store = memoryStore();
    const perId = new Map<string, number>();
    let active = 0;
    const send: SendCallback = async (_url, _payload, context) => {
      perId.set(context.callbackId, (perId.get(context.callbackId) ?? 0) + 1);
      active++;
      await new Promise((r) => setImmediate(r));
      active--;
      return { outcome: 'delivered' };
    };
    const a = createOutbox({ store, send, logger: false, owner: 'a', batchSize: 3, concurrency: 2, pollIntervalMs: 1 });
    const b = createOutbox({ store, send, logger: false, owner: 'b', batchSize: 3, concurrency: 2, pollIntervalMs: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push((await enqueue(store, { now: Date.now() })).callbackId);

    // Driven side by side by hand, then by their own loops.
    await Promise.all([a.runOnce(), b.runOnce(), a.runOnce(), b.runOnce()]);
    a.start();
    b.start();
    await waitFor(async () => (await store.listDeliveries()).length === 0, 'every delivery to be sent');
    await Promise.all([a.stop(), b.stop()]);

    assert.equal(active, 0);
    assert.deepEqual([...perId.keys()].sort(), [...ids].sort());
    for (const [id, count] of perId) assert.equal(count, 1, `callback ${id} sent ${count} times`);
    assert.equal(a.stats().delivered + b.stats().delivered, 40);
  });

  it('never starts an attempt whose claim could lapse before the attempt ends', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    const sent: string[] = [];
    const outbox = createOutbox({
      store, now: clock.now, logger: logs.logger, leaseMs: 100, sendTimeoutMs: 50, batchSize: 2, concurrency: 1,
      send: async (_url, _payload, context) => {
        sent.push(context.callbackId);
        clock.advance(60); // a slow first attempt eats the second one's lease
        return { outcome: 'delivered' };
      },
    });
    const first = await enqueue(store, { now: clock.now() });
    const second = await enqueue(store, { now: clock.now() });

    assert.equal(await outbox.runOnce(), 1);
    assert.deepEqual(sent, [first.callbackId]);
    assert.equal(logs.lines().filter((l) => l.outcome === 'skipped').length, 1);
    clock.advance(40);
    assert.equal(await outbox.runOnce(), 1, 'attempted after its claim lapsed');
    assert.deepEqual(sent, [first.callbackId, second.callbackId]);
  });
});

describe('outbox: running', () => {
  it('start() delivers what is due, kick() sends a new delivery without waiting for the poll', async () => {
    const store = memoryStore();
    const sent: string[] = [];
    const outbox = createOutbox({ store, logger: false, pollIntervalMs: 60_000, send: async (_u, _p, c) => (sent.push(c.callbackId), { outcome: 'delivered' }) });
    const early = await enqueue(store, { now: Date.now() });
    outbox.start();
    await waitFor(() => sent.length === 1, 'the first delivery');
    await outbox.idle();
    const late = await enqueue(store, { now: Date.now() });
    outbox.kick();
    await waitFor(() => sent.length === 2, 'the kicked delivery');
    await outbox.stop();
    assert.deepEqual(sent, [early.callbackId, late.callbackId]);
    assert.equal(outbox.stats().running, false);
  });

  it('retries on its own loop until delivered', async () => {
    const store = memoryStore();
    let calls = 0;
    const outbox = createOutbox({
      store, logger: false, pollIntervalMs: 5, backoff: { baseMs: 2, maxMs: 10 },
      send: async () => (++calls < 4 ? { outcome: 'retry', status: 500, reason: 'connector answered 500' } : { outcome: 'delivered' }),
    });
    await enqueue(store, { now: Date.now() });
    outbox.start();
    await waitFor(async () => (await store.listDeliveries()).length === 0, 'delivery after three failures');
    await outbox.stop();
    assert.equal(calls, 4);
    assert.deepEqual({ ...outbox.stats(), inFlight: 0 }, { delivered: 1, rejected: 0, retried: 3, expired: 0, storeErrors: 0, inFlight: 0, running: false });
  });

  it('wakes for a retry it scheduled itself instead of waiting for the next poll', async () => {
    const store = memoryStore();
    let calls = 0;
    const outbox = createOutbox({
      store, logger: false, pollIntervalMs: 60_000, backoff: { baseMs: 2, maxMs: 5 },
      send: async () => (++calls < 3 ? { outcome: 'retry', reason: 'connector answered 503' } : { outcome: 'delivered' }),
    });
    await enqueue(store, { now: Date.now() });
    outbox.start();
    // waitFor gives up long before the 60 s poll: only the retry wake-ups can get this delivered.
    await waitFor(async () => (await store.listDeliveries()).length === 0, 'delivery through two retries');
    await outbox.stop();
    assert.equal(calls, 3);
  });

  it('stop() waits for attempts in flight, then nothing more is sent', async () => {
    const store = memoryStore();
    const release = deferred<SendResult>();
    let calls = 0;
    const outbox = createOutbox({
      store, logger: false, pollIntervalMs: 5, batchSize: 2, concurrency: 1,
      send: () => (calls++, release.promise),
    });
    await enqueue(store, { now: Date.now() });
    await enqueue(store, { now: Date.now() });
    outbox.start();
    // The loop's timers are unref'd: something of the test's own must keep the process up meanwhile.
    await waitFor(() => calls === 1, 'the first attempt');

    let stopped = false;
    const stopping = outbox.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(stopped, false, 'stop() waits while an attempt is in flight');
    assert.equal(outbox.stats().inFlight, 1);
    release.resolve({ outcome: 'delivered' });
    await stopping;
    assert.equal(outbox.stats().inFlight, 0);
    assert.equal(calls, 1, 'the second claimed delivery is not attempted after stop()');
    const left = await store.listDeliveries();
    assert.equal(left.length, 1, 'the first was recorded as delivered before stop() resolved');
    assert.equal(left[0]!.attempts, 0);
    outbox.kick();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(calls, 1, 'kick() does nothing once stopped');
  });

  it('runs at most `concurrency` attempts at once within a batch', async () => {
    const store = memoryStore();
    let active = 0;
    let peak = 0;
    const outbox = createOutbox({
      store, logger: false, batchSize: 10, concurrency: 3,
      send: async () => {
        active++;
        peak = Math.max(peak, active);
        await new Promise((r) => setTimeout(r, 2));
        active--;
        return { outcome: 'delivered' };
      },
    });
    for (let i = 0; i < 10; i++) await enqueue(store, { now: Date.now() });
    assert.equal(await outbox.runOnce(), 10);
    assert.equal(peak, 3);
  });

  it('idle() resolves once nothing is due, leaving later retries in the store', async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const outbox = createOutbox({
      store, now: clock.now, logger: false,
      send: async (url) => (url.endsWith('fail') ? { outcome: 'retry', reason: 'connector answered 500' } : { outcome: 'delivered' }),
    });
    for (let i = 0; i < 25; i++) await enqueue(store, { now: clock.now() });
    await enqueue(store, { now: clock.now(), url: 'https://connector.test/v1/callbacks/fail' });
    await outbox.idle();
    const left = await store.listDeliveries();
    assert.equal(left.length, 1);
    assert.equal(left[0]!.attempts, 1);
    assert.equal(outbox.stats().delivered, 25);
  });

  it('keeps going when the store fails, and logs it', async () => {
    const store = memoryStore();
    const logs = captureLogs();
    let failClaims = true;
    const flaky: Store = {
      ...store,
      claimDeliveries: async (input) => {
        if (failClaims) throw new Error('database is locked');
        return store.claimDeliveries(input);
      },
    };
    const outbox = createOutbox({ store: flaky, logger: logs.logger, pollIntervalMs: 5, send: delivered });
    await enqueue(store, { now: Date.now() });
    outbox.start();
    await waitFor(() => outbox.stats().storeErrors > 0, 'a failed claim');
    await assert.rejects(outbox.runOnce(), /database is locked/, 'runOnce() reports a store failure to its caller');
    failClaims = false;
    await waitFor(async () => (await store.listDeliveries()).length === 0, 'delivery once the store is back');
    await outbox.stop();
    assert.ok(logs.lines().some((l) => l.level === LEVEL.error && /could not claim/.test(l.msg)));
  });
});

describe('outbox: secrets', () => {
  it('never writes a credential value of the payload to a log line or the stored error', async () => {
    const secret = 'pg-Sup3r-S3cret-Passw0rd';
    const payload: CallbackPayload = { state: 'done', message: 'Your credentials are ready', credentials: { DATABASE_URL: `postgres://u:${secret}@db/x`, PASSWORD: secret } };
    const store = memoryStore();
    const clock = fakeClock();
    const logs = captureLogs();
    const results: (() => SendResult)[] = [
      () => {
        throw new Error(`request failed with body ${JSON.stringify(payload)}`);
      },
      () => ({ outcome: 'retry', status: 500, reason: `connector echoed ${secret}` }),
      () => ({ outcome: 'rejected', status: 409, reason: `conflict on ${JSON.stringify(payload.credentials)}` }),
    ];
    const outbox = createOutbox({ store, now: clock.now, logger: logs.logger, backoff: { baseMs: 10, jitter: 'none' }, send: async () => results.shift()!() });
    const d = await enqueue(store, { now: clock.now(), payload });
    for (let i = 0; i < 3; i++) {
      await outbox.runOnce();
      clock.advance(1000);
    }
    const record = await only(store);
    assert.equal(record.state, 'failed');
    assert.deepEqual(record.payload, payload, 'the payload itself is kept intact for the retry');
    assert.equal(logs.lines().length >= 3, true);
    assert.ok(logs.raw().includes(d.callbackId), 'the callback id is logged');
    assert.equal(logs.raw().includes(secret), false, 'the secret never reaches a log line');
    assert.equal((record.lastError ?? '').includes(secret), false, 'nor the stored error');
    assert.match(record.lastError ?? '', /\[redacted\]/);
  });
});

describe('outbox: options', () => {
  const store = memoryStore();
  const bad: [string, Record<string, unknown>, RegExp][] = [
    ['no store', { send: delivered }, /"store" is required/],
    ['no send', { store }, /"send" is required/],
    ['a misspelled option', { store, send: delivered, pollInterval: 10 }, /unknown option "pollInterval" \(did you mean "pollIntervalMs"\?\)/],
    ['a misspelled backoff option', { store, send: delivered, backoff: { base: 10 } }, /unknown option "base"/],
    ['a zero poll interval', { store, send: delivered, pollIntervalMs: 0 }, /"pollIntervalMs" must be a positive/],
    ['a send timeout as long as the lease', { store, send: delivered, leaseMs: 1000, sendTimeoutMs: 1000 }, /"sendTimeoutMs" \(1000\) must be below "leaseMs"/],
    ['a fractional batch size', { store, send: delivered, batchSize: 1.5 }, /"batchSize" must be an integer/],
    ['zero concurrency', { store, send: delivered, concurrency: 0 }, /"concurrency" must be an integer/],
    ['maxMs below baseMs', { store, send: delivered, backoff: { baseMs: 1000, maxMs: 10 } }, /"maxMs" \(10\) must be at least "baseMs"/],
    ['a shrinking factor', { store, send: delivered, backoff: { factor: 0.5 } }, /"factor" must be at least 1/],
    ['an unknown jitter', { store, send: delivered, backoff: { jitter: 'half' } }, /"jitter" must be 'full' or 'none'/],
    ['an empty owner', { store, send: delivered, owner: '' }, /"owner" must be a non-empty string/],
    ['a logger that is not one', { store, send: delivered, logger: console }, /"logger" must be a pino logger/],
  ];
  for (const [what, options, message] of bad) {
    it(`rejects ${what} at construction`, () => {
      assert.throws(() => createOutbox(options as never), (error: Error) => error.name === 'InvalidOptionsError' && message.test(error.message));
    });
  }

  it('accepts zero-free defaults and names its owner after the process', () => {
    const outbox = createOutbox({ store, send: delivered, logger: false });
    assert.match(outbox.owner, new RegExp(`:${process.pid}:[0-9a-f]{8}$`));
    assert.equal(createOutbox({ store, send: delivered, logger: false, owner: 'worker-7' }).owner, 'worker-7');
  });
});
