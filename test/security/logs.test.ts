import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import { marketplaceRouter } from '../../src/provider/router.js';
import { memoryStore } from '../../src/store/memory.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import type { HandlerContext } from '../../src/domain/handlers.js';
import { listen, logCapture, marketplaceClient } from '../helpers/http.js';

/** Every key of one JSON line, in order, duplicates included (JSON.parse would hide them). */
function keysOf(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (const match of line.matchAll(/[{}]|"((?:[^"\\]|\\.)*)"\s*:/g)) {
    if (match[0] === '{') depth++;
    else if (match[0] === '}') depth--;
    else if (depth === 1) keys.push(match[1]!);
  }
  return keys;
}

describe('provider log lines', () => {
  it('carry the error code, the request id and truncated ids, never secrets or duplicate keys', async () => {
    const capture = logCapture();
    const logger = createRedactingLogger(capture.stream, 'debug');
    const client = marketplaceClient();
    const contexts: HandlerContext[] = [];
    const router = marketplaceRouter({
      store: memoryStore(),
      masterKey: client.masterPublicKey,
      publicHost: '127.0.0.1',
      logger,
      outbox: false,
      handlers: {
        provision: (_request, context) => void contexts.push(context),
        changePlan: () => undefined,
        deprovision: () => undefined,
        provisionCredentials: () => ({ credentials: { SECRET_URL: 'https://user:hunter2-secret@db.example/1' } }),
        deprovisionCredentials: () => undefined,
      },
    });
    const app = express();
    // What pino-http does: a request id on req.id.
    let counter = 0;
    app.use((req, _res, next) => {
      (req as unknown as { id: string }).id = `req-${++counter}`;
      next();
    });
    app.use(router);
    const running = await listen(app);
    // The router's Host binding lists 127.0.0.1 without the port: sign for the host the test uses.
    running.host = '127.0.0.1';
    try {
      const provision = { id: 'r1', product: 'bonnets', plan: 'small', region: 'aws::us-east-1' };
      assert.equal((await client.send(running, 'PUT', '/v1/resources/r1', provision)).status, 201);
      assert.equal((await client.send(running, 'PUT', '/v1/credentials/c1', { id: 'c1', resource_id: 'r1' })).status, 201);
      assert.equal((await client.send(running, 'DELETE', '/v1/resources/nope')).status, 404);
      // Unsigned, with a huge id and callback id: refused, and the line stays short.
      const longId = 'a'.repeat(5000);
      const unsigned = await fetch(`${running.url}/v1/resources/${longId}`, { method: 'PUT', headers: { 'x-callback-id': 'b'.repeat(5000), authorization: 'Bearer top-secret-token' } });
      assert.equal(unsigned.status, 401);
    } finally {
      await running.close();
      await router.close();
    }

    const lines = capture.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const requests = lines.filter((line) => line.msg === 'marketplace request');
    assert.deepEqual(requests.map((line) => [line.status, line.code ?? '']), [[201, ''], [201, ''], [404, 'ERR_NOT_FOUND'], [401, 'ERR_SIGNATURE_MISSING']]);
    assert.deepEqual(requests.map((line) => line.reqId), ['req-1', 'req-2', 'req-3', 'req-4']);
    assert.equal(requests[3]!.route, '/v1/resources/:id');
    assert.ok(lines.some((line) => line.code === 'ERR_SIGNATURE_MISSING' && line.msg === 'marketplace request signature rejected'));
    assert.equal(contexts[0]!.reqId, 'req-1');

    const text = capture.text();
    assert.ok(!text.includes('"code":"[redacted]"'));
    for (const secret of ['hunter2-secret', 'top-secret-token', 'a'.repeat(200), 'b'.repeat(200)]) assert.ok(!text.includes(secret), secret.slice(0, 12));
    for (const line of capture.lines) {
      assert.ok(line.length < 1000, `a ${line.length}-character line`);
      const keys = keysOf(line);
      assert.equal(new Set(keys).size, keys.length, `duplicate keys in ${line}`);
    }
  });

  it('redacts SSO and OAuth codes by where they travel, not the error code', () => {
    const capture = logCapture();
    const logger = createRedactingLogger(capture.stream);
    logger.info({ code: 'ERR_NOT_FOUND', query: { code: 'sso-code-123' }, form: { code: 'oauth-code-456', grant_type: 'authorization_code' } }, 'x');
    const line = JSON.parse(capture.lines[0]!) as { code: string; query: { code: string }; form: { code: string; grant_type: string } };
    assert.equal(line.code, 'ERR_NOT_FOUND');
    assert.equal(line.query.code, '[redacted]');
    assert.equal(line.form.code, '[redacted]');
    assert.equal(line.form.grant_type, 'authorization_code');
  });
});
