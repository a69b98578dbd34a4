import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { finished } from 'node:stream/promises';
import { readRawBody } from '../../src/signature/raw-body.js';

/**
 * readRawBody against a real server: a body that arrives with its headers is taken in one read,
 * one that comes later or chunked through listeners; either way the bytes are exact and the stream
 * ends as a fully read one does.
 */
describe('readRawBody', () => {
  let server: Server;
  let port: number;
  before(async () => {
    server = createServer((req, res) => {
      readRawBody(req, 64, 5000).then(async (body) => {
        await finished(req);
        res.end(JSON.stringify({ body: body.toString('utf8'), ended: req.readableEnded }));
      }, (error: { status?: number; message?: string }) => {
        res.statusCode = error.status ?? 500;
        res.end(JSON.stringify({ error: error.message }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Headers and body in one write: they arrive together. */
  function sendAtOnce(body: string): Promise<{ status: number; json: unknown }> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(`PUT / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      });
      const parts: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => parts.push(chunk));
      socket.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        resolve({ status: Number(text.split(' ')[1]), json: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) });
      });
      socket.on('error', reject);
    });
  }

  /** The body only once the server asked for it (100-continue), or chunked. */
  function sendLater(body: string, options: { chunked?: boolean } = {}): Promise<{ status: number; json: unknown }> {
    return new Promise((resolve, reject) => {
      const headers = options.chunked === true ? {} : { 'content-length': String(Buffer.byteLength(body)), expect: '100-continue' };
      const req = request({ host: '127.0.0.1', port, method: 'PUT', path: '/', headers, agent: false }, (res: IncomingMessage) => {
        const parts: Buffer[] = [];
        res.on('data', (chunk: Buffer) => parts.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(parts).toString('utf8')) }));
      });
      req.on('error', reject);
      if (options.chunked === true) {
        req.write(body.slice(0, 3));
        req.end(body.slice(3));
      } else {
        req.on('continue', () => req.end(body));
      }
    });
  }

  it('reads a body that came with its headers, and the stream ends', async () => {
    assert.deepEqual(await sendAtOnce('{"id":"abc"}'), { status: 200, json: { body: '{"id":"abc"}', ended: true } });
    assert.deepEqual(await sendAtOnce(''), { status: 200, json: { body: '', ended: true } });
  });

  it('reads a body that comes after its headers, or chunked, and the stream ends', async () => {
    assert.deepEqual(await sendLater('{"id":"later"}'), { status: 200, json: { body: '{"id":"later"}', ended: true } });
    assert.deepEqual(await sendLater('{"id":"chunked"}', { chunked: true }), { status: 200, json: { body: '{"id":"chunked"}', ended: true } });
  });

  it('refuses a body over the limit, declared or chunked', async () => {
    const big = 'x'.repeat(100);
    assert.equal((await sendAtOnce(big)).status, 413);
    assert.equal((await sendLater(big, { chunked: true })).status, 413);
  });
});
