import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { systemClock, waitForProvider } from '../../../src/testkit/cli/wait.js';
import { FakeClock } from '../helpers/clock.js';
import { freePort } from '../helpers/harness.js';

/** Something listening on `port` that accepts connections and never answers; `connected` resolves on each new connection. */
async function silentOn(port: number) {
  const sockets = new Set<Socket>();
  let onConnection: (() => void) | undefined;
  const server: Server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection?.();
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return {
    /** Resolves at the next connection. */
    connected: () => new Promise<void>((resolve) => (onConnection = resolve)),
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('waitForProvider', () => {
  it('reports the last real reason (connection refused) when the deadline cuts its last attempt short', async () => {
    const port = await freePort();
    const clock = new FakeClock();
    const seen: string[] = [];
    const waited = waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 1000, clock, onWaiting: (reason) => seen.push(reason) });
    // The first attempt is refused; then something starts listening that never answers.
    await clock.asleep();
    assert.deepEqual(seen, ['connection refused']);
    const silent = await silentOn(port);
    try {
      const connected = silent.connected();
      clock.advance(1000); // past the pause, to the deadline: the last attempt gets 1 ms
      await connected;
      clock.advance(1); // and the deadline ends it before any answer
      assert.deepEqual(await waited, { outcome: 'timeout', reason: 'connection refused' });
    } finally {
      await silent.close();
    }
  });

  it('reports the reason of the last attempt the deadline did not cut short, not the first', async () => {
    const port = await freePort();
    const clock = new FakeClock();
    const waited = waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 5200, clock });
    await clock.asleep(); // refused at 0 ms
    const silent = await silentOn(port);
    try {
      let connected = silent.connected();
      await clock.wake(); // the second attempt, at 100 ms, gets its whole 5 s
      await connected;
      connected = silent.connected();
      clock.advance(5000); // ... and no answer in them
      await clock.wake(); // the last attempt, at the deadline (5200 ms), gets 1 ms
      await connected;
      clock.advance(1);
      assert.deepEqual(await waited, { outcome: 'timeout', reason: 'no answer in time' });
      assert.deepEqual(clock.sleeps, [100, 100]);
    } finally {
      await silent.close();
    }
  });

  it('says "no answer in time" when its only attempt ran out of the time the deadline left it', async () => {
    const port = await freePort();
    const silent = await silentOn(port);
    try {
      const clock = new FakeClock();
      const connected = silent.connected();
      const waited = waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 400, clock });
      await connected;
      clock.advance(400);
      assert.deepEqual(await waited, { outcome: 'timeout', reason: 'no answer in time' });
      assert.deepEqual(clock.sleeps, []);
    } finally {
      await silent.close();
    }
  });

  it('pauses 100 ms, doubling up to 1 s, and makes its last attempt at the deadline', async () => {
    const port = await freePort();
    const clock = new FakeClock({ auto: true });
    const seen: string[] = [];
    const waited = await waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 4000, clock, onWaiting: (reason) => seen.push(reason) });
    assert.deepEqual(waited, { outcome: 'timeout', reason: 'connection refused' });
    assert.deepEqual(clock.sleeps, [100, 200, 400, 800, 1000, 1000, 500]);
    assert.equal(clock.now(), 4000);
    assert.deepEqual(seen, ['connection refused'], 'onWaiting is called once');
  });

  it('takes any status as an answer, and says how long it waited', async () => {
    const port = await freePort();
    const clock = new FakeClock();
    const waited = waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 60_000, clock });
    await clock.asleep();
    const server = createHttpServer((_req, res) => res.writeHead(404).end('not here'));
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    try {
      await clock.wake();
      assert.deepEqual(await waited, { outcome: 'answered', status: 404, waitedMs: 100 });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('stops when its signal aborts during a pause', async () => {
    const port = await freePort();
    const clock = new FakeClock();
    const stop = new AbortController();
    const waited = waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 60_000, clock, signal: stop.signal });
    await clock.asleep();
    stop.abort();
    assert.deepEqual(await waited, { outcome: 'aborted' });
    assert.equal(clock.now(), 0);
  });

  describe('with the system clock (no clock given)', () => {
    it('answers at once when the provider listens', async () => {
      const server = createHttpServer((_req, res) => res.writeHead(204).end());
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      try {
        const { port } = server.address() as { port: number };
        const waited = await waitForProvider(`http://127.0.0.1:${port}`, { timeoutMs: 60_000 });
        assert.equal(waited.outcome, 'answered');
        assert.equal(waited.outcome === 'answered' && waited.status, 204);
      } finally {
        server.closeAllConnections();
        server.close();
      }
    });

    it('ends a pause when its signal aborts, and times an attempt out with a TimeoutError', async () => {
      const stop = new AbortController();
      const paused = systemClock.sleep(3_600_000, stop.signal);
      stop.abort();
      await paused;
      const attempt = systemClock.timeout(1);
      // AbortSignal.timeout's timer keeps no process alive (a pending fetch does, in use): this handle does, meanwhile.
      const alive = setInterval(() => undefined, 60_000);
      try {
        await once(attempt, 'abort');
      } finally {
        clearInterval(alive);
      }
      assert.equal((attempt.reason as Error).name, 'TimeoutError');
    });
  });
});
