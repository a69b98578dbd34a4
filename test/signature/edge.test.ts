import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import express, { type RequestHandler } from 'express';
import { pino } from 'pino';
import { errorResponder, verifySignature, type VerifySignatureOptions } from '../../src/signature/middleware.js';
import { createVerifier, PRODUCTION_MASTER_PUBLIC_KEY } from '../../src/signature/verifier.js';
import { noInstrumentation, type Instrumentation } from '../../src/observability/hooks.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { listen, logCapture, type Running } from '../helpers/http.js';
import { send } from './fixtures.js';

const NOW = Date.parse('2017-04-06T19:17:03Z');
const master = generateKeyPair();
const signer = createSigner({ masterPrivateKey: master.privateKey, now: () => NOW });
const provision = JSON.stringify({ id: 'abc', product: 'generator', plan: 'low', region: 'aws::us-east-1' });
const PATH = '/v1/resources/abc';

function app(options: { verify?: VerifySignatureOptions; first?: RequestHandler[] } = {}) {
  const capture = logCapture();
  const seen: unknown[] = [];
  const instance = express();
  for (const handler of options.first ?? []) instance.use(handler);
  instance.use(verifySignature({ masterKey: master.publicKey, now: () => NOW, logger: pino({ level: 'debug' }, capture.stream), ...options.verify }));
  instance.all('/v1/resources/:id', (req, res) => {
    seen.push(req.body);
    res.status(201).json({ message: 'Resource provisioned' });
  });
  instance.use(errorResponder());
  return { app: instance, capture, seen };
}

async function withApp<T>(setup: ReturnType<typeof app>, fn: (running: Running) => Promise<T>): Promise<T> {
  const running = await listen(setup.app);
  try {
    return await fn(running);
  } finally {
    await running.close();
  }
}

/** Sends the headers and part of a body, never the rest: the answer must come without the body. */
function sendPartial(running: Running, headers: Record<string, string>, part: string): Promise<{ status: number; connection: string | undefined; text: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(running.url);
    const req = httpRequest({ host: target.hostname, port: target.port, method: 'PUT', path: PATH, headers, agent: false }, (res: IncomingMessage) => {
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, text: Buffer.concat(parts).toString('utf8') });
      });
    });
    req.on('error', reject);
    req.write(part);
  });
}

describe('existing body parsers', () => {
  it('verifies the bytes express.json({ verify }) kept on req.rawBody', async () => {
    const keep = express.json({ verify: (req, _res, buf) => { (req as { rawBody?: Buffer }).rawBody = buf; } });
    const setup = app({ first: [keep] });
    await withApp(setup, async (running) => {
      const headers = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: provision })).status, 201);
      assert.deepEqual(setup.seen[0], JSON.parse(provision));
      // The kept bytes are verified, not trusted: a changed body still fails.
      const tampered = provision.replace('low', 'big');
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: tampered })).status, 401);
      // A bodyless DELETE that express.json() left alone verifies too.
      const del = signer.sign({ method: 'DELETE', url: PATH, host: running.host });
      assert.equal((await send(running.url, { method: 'DELETE', path: PATH, headers: del })).status, 201);
    });
  });

  it('verifies the Buffer express.raw() left on req.body', async () => {
    const setup = app({ first: [express.raw({ type: '*/*' })] });
    await withApp(setup, async (running) => {
      const headers = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: provision })).status, 201);
      assert.deepEqual(setup.seen[0], JSON.parse(provision));
    });
  });
});

describe('cheap checks before the body', () => {
  it('refuses an unsigned, stale or unendorsed request with 401 without waiting for its body', async () => {
    const setup = app();
    await withApp(setup, async (running) => {
      const base = { host: running.host, 'content-type': 'application/json', 'content-length': '1048000' };
      assert.equal((await sendPartial(running, base, '{"id":')).status, 401);
      const stale = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json', date: '2000-01-01T00:00:00Z' }, body: provision });
      assert.equal((await sendPartial(running, { ...stale, 'content-length': '1048000' }, '{"id":')).status, 401);
      const foreign = createSigner({ masterPrivateKey: generateKeyPair().privateKey, now: () => NOW });
      const unendorsed = foreign.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      assert.equal((await sendPartial(running, { ...unendorsed, 'content-length': '1048000' }, '{"id":')).status, 401);
      assert.equal(setup.seen.length, 0);
    });
  });

  it('ends a body that never completes with 408 and closes the connection', async () => {
    const setup = app({ verify: { bodyTimeoutMs: 50 } });
    await withApp(setup, async (running) => {
      const headers = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      const answer = await sendPartial(running, headers, provision.slice(0, 10));
      assert.equal(answer.status, 408);
      assert.equal(answer.connection, 'close');
      assert.deepEqual(Object.keys(JSON.parse(answer.text) as object), ['message']);
      assert.ok(setup.capture.text().includes('"code":"ERR_BODY_TIMEOUT"'));
    });
  });
});

describe('operator hints in the log, never in the answer', () => {
  it('gives the measured Date offset, the proxy hint and the test-marketplace hint', async () => {
    const setup = app();
    await withApp(setup, async (running) => {
      const stale = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json', date: '2017-04-06T19:27:03Z' }, body: provision });
      const staleAnswer = await send(running.url, { method: 'PUT', path: PATH, headers: stale, body: provision });
      assert.equal(staleAnswer.status, 401);
      assert.ok(!staleAnswer.text.includes('clock'));
      const staleLine = JSON.parse(setup.capture.lines.find((line) => line.includes('ERR_DATE_STALE'))!) as { dateOffsetMs: number; hint: string };
      assert.equal(staleLine.dateOffsetMs, 600_000);
      assert.match(staleLine.hint, /600 s ahead/);

      // Signed for the public Host, received through a proxy that rewrote it.
      const proxied = signer.sign({ method: 'PUT', url: PATH, host: 'api.example.com', headers: { 'content-type': 'application/json' }, body: provision });
      const proxiedAnswer = await send(running.url, { method: 'PUT', path: PATH, headers: { ...proxied, host: running.host, 'x-forwarded-host': 'api.example.com' }, body: provision });
      assert.equal(proxiedAnswer.status, 401);
      assert.ok(!proxiedAnswer.text.includes('publicHost'));
      assert.match(setup.capture.lines.find((line) => line.includes('ERR_REQUEST_SIGNATURE_INVALID'))!, /set publicHost/);
    });

    const production = app({ verify: { masterKey: PRODUCTION_MASTER_PUBLIC_KEY } });
    await withApp(production, async (running) => {
      const headers = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: provision })).status, 401);
      assert.match(production.capture.lines.find((line) => line.includes('ERR_ENDORSEMENT_INVALID'))!, /is this a test marketplace\?/);
    });
  });

  it('reports every refusal to the instrumentation and verifies inside a marketplace.verify span', async () => {
    const failures: string[] = [];
    const spans: string[] = [];
    const instrumentation: Instrumentation = {
      ...noInstrumentation,
      signatureFailure: (code) => void failures.push(code),
      span: (name, _attributes, fn) => {
        spans.push(name);
        return fn();
      },
    };
    const setup = app({ verify: { instrumentation } });
    await withApp(setup, async (running) => {
      const headers = signer.sign({ method: 'PUT', url: PATH, host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: provision })).status, 201);
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers: { host: running.host } })).status, 401);
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: provision.replace('low', 'big') })).status, 401);
    });
    assert.deepEqual(failures, ['ERR_SIGNATURE_MISSING', 'ERR_REQUEST_SIGNATURE_INVALID']);
    // One span per request, the refusals by the cheap header checks included.
    assert.deepEqual(spans, ['marketplace.verify', 'marketplace.verify', 'marketplace.verify']);
  });
});

describe('Host binding', () => {
  it('refuses a request signed for another Host, even when it arrives with that Host', async () => {
    const setup = app({ verify: { publicHost: ['api.example.com', 'api.example.net'] } });
    await withApp(setup, async (running) => {
      const foreign = signer.sign({ method: 'PUT', url: PATH, host: 'other-provider.example', headers: { 'content-type': 'application/json' }, body: provision });
      assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers: foreign, body: provision })).status, 401);
      assert.match(setup.capture.text(), /not in publicHost/);
      // Listed hosts pass, whether received as such or rewritten by a proxy.
      for (const host of ['api.example.com', 'api.example.net']) {
        const headers = signer.sign({ method: 'PUT', url: PATH, host, headers: { 'content-type': 'application/json' }, body: provision });
        assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers, body: provision })).status, 201, host);
        assert.equal((await send(running.url, { method: 'PUT', path: PATH, headers: { ...headers, host: running.host }, body: provision })).status, 201, host);
      }
    });
  });

  it('warns once at start-up when no publicHost is configured', () => {
    const capture = logCapture();
    verifySignature({ masterKey: master.publicKey, logger: pino({}, capture.stream) });
    assert.equal(capture.lines.filter((line) => line.includes('no publicHost configured')).length, 1);
    const quiet = logCapture();
    verifySignature({ masterKey: master.publicKey, publicHost: 'api.example.com', logger: pino({}, quiet.stream) });
    assert.equal(quiet.lines.length, 0);
  });
});

describe('createVerifier().verify() bodies', () => {
  it('takes a string body as its UTF-8 bytes and refuses other types with a TypeError', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW });
    const body = JSON.stringify({ id: 'abc', note: 'héllo ✓' });
    const headers = signer.sign({ method: 'PUT', url: PATH, host: 'api.example.com', headers: { 'content-type': 'application/json' }, body });
    const verified = await verifier.verify({ method: 'PUT', url: PATH, headers, body });
    assert.deepEqual(verified.signedHeaders.includes('host'), true);
    await assert.rejects(verifier.verify({ method: 'PUT', url: PATH, headers, body: body.replace('abc', 'abd') }), { code: 'ERR_REQUEST_SIGNATURE_INVALID' });
    for (const wrong of [{ id: 'abc' }, 42, null]) {
      await assert.rejects(verifier.verify({ method: 'PUT', url: PATH, headers, body: wrong as unknown as string }), TypeError);
    }
  });
});
