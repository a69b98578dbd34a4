/**
 * Answers written on a node response (src/core/answer.ts `writeAnswer`), as a client receives them
 * over HTTP: the status, the JSON body with its type and length, the answer's own headers, the
 * headers the host app set before (kept, or replaced by the answer's), and HEAD without a body.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeAnswer } from '../../src/core/answer.js';
import type { CoreAnswer } from '../../src/core/types.js';

let handle: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
const server = createServer((req, res) => handle(req, res));
let port = 0;
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

interface Received {
  status: number;
  headers: IncomingMessage['headers'];
  raw: string[];
  body: string;
}

function answerWith(answer: CoreAnswer, method = 'PUT', prepare: (res: ServerResponse) => void = () => undefined): Promise<Received> {
  handle = (req, res) => {
    prepare(res);
    writeAnswer(res, answer, req.method ?? 'GET');
  };
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path: '/v1/resources/r1' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, raw: res.rawHeaders, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('writeAnswer', () => {
  it('writes the status and the JSON body with its type and length', async () => {
    const received = await answerWith({ status: 201, json: { message: 'Provisioned — ready' } });
    assert.equal(received.status, 201);
    assert.equal(received.headers['content-type'], 'application/json; charset=utf-8');
    assert.deepEqual(JSON.parse(received.body), { message: 'Provisioned — ready' });
    assert.equal(Number(received.headers['content-length']), Buffer.byteLength(received.body), 'the length in bytes, not characters');
  });

  it('keeps the headers the app set before, and replaces those the answer sets itself', async () => {
    const received = await answerWith({ status: 409, json: { message: 'Conflict with another operation' }, headers: { 'Retry-After': '1' } }, 'PUT', (res) => {
      res.setHeader('X-Request-Id', 'req-1');
      res.setHeader('Content-Type', 'text/html');
      res.setHeader('Retry-After', '60');
    });
    assert.equal(received.status, 409);
    assert.equal(received.headers['x-request-id'], 'req-1');
    assert.equal(received.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(received.headers['retry-after'], '1');
    assert.equal(received.raw.filter((name) => name.toLowerCase() === 'content-type').length, 1, 'one Content-Type');
  });

  it('sends every value of a repeated header', async () => {
    const received = await answerWith({ status: 302, headers: { Location: '/dashboard/r1', 'Set-Cookie': ['a=1; HttpOnly', 'b=2; HttpOnly'] } }, 'GET', (res) => res.setHeader('X-Frame-Options', 'DENY'));
    assert.equal(received.status, 302);
    assert.deepEqual(received.headers['set-cookie'], ['a=1; HttpOnly', 'b=2; HttpOnly']);
    assert.equal(received.headers['x-frame-options'], 'DENY');
    assert.equal(received.body, '');
  });

  it('answers HEAD with the length of the body it leaves out', async () => {
    const received = await answerWith({ status: 200, json: { message: 'here' } }, 'HEAD');
    assert.equal(received.status, 200);
    assert.equal(received.body, '');
    assert.equal(Number(received.headers['content-length']), Buffer.byteLength(JSON.stringify({ message: 'here' })));
  });

  it('writes a text answer with its own type, and an empty one with no type', async () => {
    const text = await answerWith({ status: 200, text: '# HELP x\n', type: 'text/plain; version=0.0.4' }, 'GET');
    assert.equal(text.headers['content-type'], 'text/plain; version=0.0.4');
    assert.equal(text.body, '# HELP x\n');
    const empty = await answerWith({ status: 204 }, 'DELETE');
    assert.equal(empty.status, 204);
    assert.equal(empty.headers['content-type'], undefined);
    assert.equal(empty.body, '');
  });
});
