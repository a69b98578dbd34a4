import * as assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { createOutbox, type SendCallback } from '../../src/outbox/index.js';
import { memoryStore } from '../../src/store/memory.js';
import { deferred, enqueue, waitFor } from './helpers.js';

/** A minimal sender over fetch, as a host could write one: network errors are left to throw. */
const fetchSend: SendCallback = async (url, payload, { signal }) => {
  const response = await fetch(url, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
    signal,
    redirect: 'manual',
  });
  await response.arrayBuffer();
  if (response.ok) return { outcome: 'delivered', status: response.status };
  if (response.status === 429 || response.status >= 500) {
    const seconds = Number(response.headers.get('retry-after'));
    return { outcome: 'retry', status: response.status, reason: `answered ${response.status}`, ...(seconds > 0 ? { retryAfterMs: seconds * 1000 } : {}) };
  }
  return { outcome: 'rejected', status: response.status };
};

describe('outbox over HTTP', () => {
  it('delivers through three 500s and a dropped connection', async () => {
    const seen: { method: string; path: string; body: string }[] = [];
    const plan = ['500', '500', '500', 'drop', '204'];
    const accepted = deferred();
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', path: req.url ?? '', body });
        const step = plan.shift() ?? '204';
        if (step === 'drop') {
          req.socket.destroy();
          return;
        }
        res.writeHead(Number(step), step === '204' ? {} : { 'content-type': 'application/json' });
        res.end(step === '204' ? undefined : JSON.stringify({ message: 'Temporarily unavailable' }));
        if (step === '204') accepted.resolve();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;

    const store = memoryStore();
    const outbox = createOutbox({ store, send: fetchSend, logger: false, pollIntervalMs: 5, backoff: { baseMs: 2, maxMs: 10 } });
    try {
      const payload = { state: 'done' as const, message: 'Your cluster is racked and ready' };
      const d = await enqueue(store, { now: Date.now(), url: `http://127.0.0.1:${port}/v1/callbacks/cb-1`, payload });
      outbox.start();
      await accepted.promise;
      await waitFor(async () => (await store.listDeliveries()).length === 0, 'the delivery to be completed');
      await outbox.stop();

      assert.equal(seen.length, 5, 'five attempts reached the server');
      for (const request of seen) {
        assert.equal(request.method, 'PUT');
        assert.equal(request.path, '/v1/callbacks/cb-1');
        assert.deepEqual(JSON.parse(request.body), d.payload, 'the same body every time');
      }
      const stats = outbox.stats();
      assert.equal(stats.retried, 4);
      assert.equal(stats.delivered, 1);
    } finally {
      await outbox.stop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
