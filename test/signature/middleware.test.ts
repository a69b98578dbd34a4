import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express, { type RequestHandler } from 'express';
import type { OutgoingHttpHeaders } from 'node:http';
import { pino } from 'pino';
import { InvalidOptionsError } from '../../src/errors.js';
import { errorResponder, verifySignature, type VerifySignatureOptions } from '../../src/signature/middleware.js';
import { createVerifier, type VerifiedRequest } from '../../src/signature/verifier.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { listen, logCapture, type Running } from '../helpers/http.js';
import { send, signCustom, type RawAnswer } from './fixtures.js';

const NOW = Date.parse('2017-04-06T19:17:03Z');
const master = generateKeyPair();
const live = generateKeyPair();
const signer = createSigner({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, now: () => NOW });

interface Seen {
  body: unknown;
  rawBody: Buffer | undefined;
  signature: VerifiedRequest | undefined;
  originalUrl: string;
}

/** An app with the marketplace routes in a router mounted at /marketplace, as a host app would. */
function marketplaceApp(options: { verify?: VerifySignatureOptions; first?: RequestHandler[]; twice?: boolean } = {}) {
  const seen: Seen[] = [];
  const capture = logCapture();
  const app = express();
  for (const handler of options.first ?? []) app.use(handler);
  const router = express.Router();
  const middleware = verifySignature({ masterKey: master.publicKey, now: () => NOW, logger: pino({ level: 'trace' }, capture.stream), ...options.verify });
  router.use(middleware);
  if (options.twice === true) router.use(middleware);
  router.all('/v1/resources/:id', (req, res) => {
    seen.push({ body: req.body as unknown, rawBody: req.rawBody, signature: req.marketplaceSignature, originalUrl: req.originalUrl });
    res.status(201).json({ message: 'Resource provisioned' });
  });
  router.use(errorResponder());
  app.use('/marketplace', router);
  return { app, seen, capture };
}

async function withApp<T>(setup: ReturnType<typeof marketplaceApp>, fn: (running: Running) => Promise<T>): Promise<T> {
  const running = await listen(setup.app);
  try {
    return await fn(running);
  } finally {
    await running.close();
  }
}

function signedRequest(running: Running, path: string, options: { method?: string; body?: string; headers?: Record<string, string>; signedPath?: string } = {}) {
  const method = options.method ?? 'PUT';
  const headers = { ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers };
  const signed = signer.sign({ method, url: options.signedPath ?? path, host: running.host, headers, ...(options.body === undefined ? {} : { body: options.body }) });
  return { method, path, headers: signed, ...(options.body === undefined ? {} : { body: options.body }) };
}

function assertJsonError(answer: RawAnswer, status: number): void {
  assert.equal(answer.status, status, answer.text);
  assert.match(answer.contentType ?? '', /^application\/json/);
  const body = answer.json as { message?: unknown };
  assert.deepEqual(Object.keys(body), ['message']);
  assert.equal(typeof body.message, 'string');
  assert.ok((body.message as string).length >= 3 && (body.message as string).length <= 256);
}

const provision = JSON.stringify({ id: 'abc', product: 'generator', plan: 'low', region: 'aws::us-east-1' });

describe('verifySignature under a router mounted at /marketplace', () => {
  const setup = marketplaceApp();
  let running: Running;
  before(async () => {
    running = await listen(setup.app);
  });
  after(() => running.close());

  it('accepts a signed request and hands the handler the parsed body, raw bytes and verification', async () => {
    const answer = await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc?b=2&a=1', { body: provision, headers: { 'x-callback-id': 'cb1' } }));
    assert.equal(answer.status, 201, answer.text);
    const seen = setup.seen.at(-1)!;
    assert.equal(seen.originalUrl, '/marketplace/v1/resources/abc?b=2&a=1');
    assert.deepEqual(seen.body, JSON.parse(provision));
    assert.deepEqual(seen.rawBody, Buffer.from(provision));
    assert.equal(seen.signature?.livePublicKey, live.publicKey);
    assert.deepEqual(seen.signature?.signedHeaders, ['host', 'date', 'content-type', 'x-callback-id']);
  });

  it('accepts an empty-body DELETE and leaves req.body unset', async () => {
    const before = setup.seen.length;
    const answer = await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { method: 'DELETE' }));
    assert.equal(answer.status, 201, answer.text);
    assert.equal(setup.seen.length, before + 1);
    assert.equal(setup.seen.at(-1)!.body, undefined);
    assert.equal(setup.seen.at(-1)!.rawBody?.length, 0);
  });

  it('rejects a tampered body, path, query or header with 401 JSON and runs no handler', async () => {
    const count = setup.seen.length;
    const good = signedRequest(running, '/marketplace/v1/resources/abc?a=1', { body: provision, headers: { 'x-callback-id': 'cb1' } });
    const tampered = [
      { ...good, body: provision.replace('low', 'big') },
      { ...good, path: '/marketplace/v1/resources/abd?a=1' },
      { ...good, path: '/marketplace/v1/resources/abc?a=2' },
      { ...good, headers: { ...good.headers, 'x-callback-id': 'cb2' } },
      // Signed without the mount path: the canonical URL is the full original URL.
      signedRequest(running, '/marketplace/v1/resources/abc', { body: provision, signedPath: '/v1/resources/abc' }),
    ];
    for (const request of tampered) assertJsonError(await send(running.url, request), 401);
    assertJsonError(await send(running.url, { method: 'PUT', path: '/marketplace/v1/resources/abc', headers: { 'content-type': 'application/json' }, body: provision }), 401);
    assert.equal(setup.seen.length, count);
  });

  it('uses the first X-Signed-Headers for the list and signs every occurrence', async () => {
    const headers = { host: running.host, date: '2017-04-06T19:17:03Z', 'x-a': ['one', 'two'], 'x-signed-headers': ['host date x-a', 'x-unsigned'] };
    const path = '/marketplace/v1/resources/abc';
    const signature = signCustom({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, method: 'DELETE', url: path, headers, signedHeaders: ['host', 'date', 'x-a'] });
    const answer = await send(running.url, { method: 'DELETE', path, headers: { ...headers, 'x-signature': signature } });
    assert.equal(answer.status, 201, answer.text);
    assert.deepEqual(setup.seen.at(-1)!.signature?.signedHeaders, ['host', 'date', 'x-a']);

    // An X-Signed-Headers added in transit changes the signed line, so it is refused.
    const good = signedRequest(running, path, { method: 'DELETE' });
    const twoLists: OutgoingHttpHeaders = { ...good.headers, 'x-signed-headers': [good.headers['x-signed-headers']!, 'host'] };
    assertJsonError(await send(running.url, { ...good, headers: twoLists }), 401);
    // So is a second value of a signed header, and a second Host.
    const flat = Object.entries(good.headers).flatMap(([name, value]) => [name, value]);
    assertJsonError(await send(running.url, { ...good, headers: [...flat, 'date', good.headers.date!] }), 401);
    assertJsonError(await send(running.url, { ...good, headers: [...flat, 'host', 'evil.example'] }), 401);
  });

  it('takes an X-Signed-Headers sent once as one list: a comma in it is malformed, not a join of two', async () => {
    const headers = { host: running.host, date: '2017-04-06T19:17:03Z', 'x-a': 'one', 'x-signed-headers': 'host date, x-a' };
    const path = '/marketplace/v1/resources/abc';
    // Signed over exactly these bytes: only the reading of the list can refuse it.
    const signature = signCustom({ masterPrivateKey: master.privateKey, livePrivateKey: live.privateKey, method: 'DELETE', url: path, headers, signedHeaders: ['host', 'date'] });
    const count = setup.seen.length;
    assertJsonError(await send(running.url, { method: 'DELETE', path, headers: { ...headers, 'x-signature': signature } }), 401);
    assert.equal(setup.seen.length, count);
    assert.match(setup.capture.text(), /ERR_SIGNED_HEADERS_MALFORMED/);
  });

  it('answers 400 for a signed body that is not JSON, 415 for another media type or an encoding', async () => {
    assertJsonError(await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: '{"id": ' })), 400);
    assertJsonError(await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: 'id=abc', headers: { 'content-type': 'application/x-www-form-urlencoded' } })), 415);
    assertJsonError(await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: provision, headers: { 'content-encoding': 'gzip' } })), 415);
    // Authentication comes first: unsigned, the same requests are 401.
    assertJsonError(await send(running.url, { method: 'PUT', path: '/marketplace/v1/resources/abc', headers: { 'content-type': 'text/plain', 'content-encoding': 'gzip' }, body: 'x' }), 401);
    assert.ok(setup.seen.every((entry) => entry.body === undefined || typeof entry.body === 'object'));
  });

  it('accepts +json media types and a missing content type', async () => {
    const withVendorType = signedRequest(running, '/marketplace/v1/resources/abc', { body: provision, headers: { 'content-type': 'application/vnd.marketplace+json; charset=utf-8' } });
    assert.equal((await send(running.url, withVendorType)).status, 201);
    const bare = signer.sign({ method: 'PUT', url: '/marketplace/v1/resources/abc', host: running.host, body: provision });
    assert.equal((await send(running.url, { method: 'PUT', path: '/marketplace/v1/resources/abc', headers: bare, body: provision })).status, 201);
  });

  it('drops __proto__, constructor and prototype keys, escaped spellings included', async () => {
    const hostile = '{"id":"abc","__proto__":{"polluted":true},"features":{"constructor":{"prototype":{"polluted":true}},"\\u005f_proto__":{"polluted":true},"ok":1}}';
    const answer = await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: hostile }));
    assert.equal(answer.status, 201, answer.text);
    const body = setup.seen.at(-1)!.body as Record<string, unknown>;
    assert.deepEqual(JSON.parse(JSON.stringify(body)), { id: 'abc', features: { ok: 1 } });
    assert.equal(Object.hasOwn(body, '__proto__'), false);
    assert.equal(Object.getPrototypeOf(body), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.deepEqual(setup.seen.at(-1)!.rawBody, Buffer.from(hostile));
  });
});

describe('body limit', () => {
  it('answers 413 JSON when Content-Length is over the limit, and when a chunked body grows past it', async () => {
    const setup = marketplaceApp({ verify: { bodyLimit: 64 } });
    await withApp(setup, async (running) => {
      const big = JSON.stringify({ id: 'abc', padding: 'x'.repeat(100) });
      assertJsonError(await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: big })), 413);
      const { body: _big, ...chunked } = signedRequest(running, '/marketplace/v1/resources/abc', { body: big });
      assertJsonError(await send(running.url, { ...chunked, chunks: [big.slice(0, 40), big.slice(40, 80), big.slice(80)] }), 413);
      const small = JSON.stringify({ id: 'abc' });
      const fits = signedRequest(running, '/marketplace/v1/resources/abc', { body: small });
      assert.equal((await send(running.url, fits)).status, 201);
      const { body: _small, ...fitsChunked } = fits;
      assert.equal((await send(running.url, { ...fitsChunked, chunks: [small.slice(0, 4), small.slice(4)] })).status, 201);
      assert.equal(setup.seen.length, 2);
    });
  });
});

describe('mount order', () => {
  it('fails closed when express.json() consumed the body first, and says how to fix it', async () => {
    const setup = marketplaceApp({ first: [express.json()] });
    await withApp(setup, async (running) => {
      for (let i = 0; i < 2; i++) {
        assertJsonError(await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: provision })), 500);
      }
      assert.equal(setup.seen.length, 0);
      const hints = setup.capture.lines.filter((line) => line.includes('before express.json()'));
      assert.equal(hints.length, 1);
      assert.match(hints[0]!, /mount the marketplace router/);
      assert.equal(JSON.parse(hints[0]!).code, 'ERR_BODY_ALREADY_PARSED');
      // A bodyless request left alone by express.json() still verifies.
      assert.equal((await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { method: 'DELETE' }))).status, 201);
    });
  });

  it('verifies again, on the same bytes, when the middleware runs twice', async () => {
    const setup = marketplaceApp({ twice: true });
    await withApp(setup, async (running) => {
      assert.equal((await send(running.url, signedRequest(running, '/marketplace/v1/resources/abc', { body: provision }))).status, 201);
      assert.deepEqual(setup.seen[0]!.body, JSON.parse(provision));
    });
  });
});

describe('logging', () => {
  it('logs each rejection by code and never X-Signature or header values', async () => {
    const setup = marketplaceApp();
    await withApp(setup, async (running) => {
      const good = signedRequest(running, '/marketplace/v1/resources/abc', { body: provision, headers: { 'x-callback-id': 'callback-value-1234', 'x-callback-url': 'http://callback.example/v1/callbacks/callback-value-1234' } });
      assert.equal((await send(running.url, good)).status, 201);
      await send(running.url, { ...good, body: provision.replace('low', 'big') });
      await send(running.url, { ...good, headers: { ...good.headers, date: '2000-01-01T00:00:00Z' } });
      await send(running.url, { ...good, headers: { ...good.headers, 'x-signature': good.headers['x-signature']!.split(' ').slice(1).join(' ') } });
      const foreign = createSigner({ masterPrivateKey: generateKeyPair().privateKey, now: () => NOW });
      const foreignHeaders = foreign.sign({ method: 'PUT', url: '/marketplace/v1/resources/abc', host: running.host, headers: { 'content-type': 'application/json' }, body: provision });
      await send(running.url, { method: 'PUT', path: '/marketplace/v1/resources/abc', headers: foreignHeaders, body: provision });

      const text = setup.capture.text();
      for (const code of ['ERR_REQUEST_SIGNATURE_INVALID', 'ERR_DATE_STALE', 'ERR_SIGNATURE_MALFORMED', 'ERR_ENDORSEMENT_INVALID']) assert.ok(text.includes(code), code);
      const secrets = [...good.headers['x-signature']!.split(' '), ...foreignHeaders['x-signature']!.split(' '), 'callback-value-1234', 'callback.example'];
      for (const secret of secrets) assert.ok(!text.includes(secret), `log contains ${secret.slice(0, 8)}…`);
    });
  });
});

describe('failures after the checks', () => {
  it('passes a throw from what follows a refusal to next, from inside the callbacks, without ending the process', async () => {
    const app = express();
    const throwing = pino({ hooks: { logMethod(args, method, level) { if (level >= 40) throw new Error('log sink down'); method.apply(this, args); } } });
    app.use(verifySignature({ masterKey: master.publicKey, now: () => NOW, logger: throwing, publicHost: 'api.example.com' }));
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(599).json({ message: (error as Error).message }));
    const running = await listen(app);
    try {
      // Refused only once the body is read and the signature checked: the throw comes from a crypto callback.
      const headers = signer.sign({ method: 'PUT', url: '/v1/resources/abc', host: 'api.example.com', headers: { 'content-type': 'application/json' }, body: provision });
      const answer = await send(running.url, { method: 'PUT', path: '/v1/resources/abc', headers: { ...headers, host: 'api.example.com' }, body: provision.replace('low', 'big') });
      assert.deepEqual([answer.status, answer.json], [599, { message: 'log sink down' }]);
    } finally {
      await running.close();
    }
  });
});

describe('shared verifier', () => {
  it('keeps the endorsement cache within its bound under rotating live keys', async () => {
    const verifier = createVerifier({ masterKey: master.publicKey, now: () => NOW, endorsementCacheSize: 2 });
    const app = express();
    const done: RequestHandler = (_req, res) => void res.status(204).end();
    app.use(verifySignature({ verifier, logger: false }), done, errorResponder());
    const running = await listen(app);
    try {
      const signers = Array.from({ length: 5 }, () => createSigner({ masterPrivateKey: master.privateKey, now: () => NOW }));
      for (let round = 0; round < 2; round++) {
        for (const each of signers) {
          const headers = each.sign({ method: 'GET', url: '/v1/resources/abc/measures?period_start=a&period_end=b', host: running.host });
          assert.equal((await send(running.url, { method: 'GET', path: '/v1/resources/abc/measures?period_start=a&period_end=b', headers })).status, 204);
          assert.ok(verifier.cachedEndorsements() <= 2);
        }
      }
      assert.equal(verifier.cachedEndorsements(), 2);
    } finally {
      await running.close();
    }
  });
});

describe('verifySignature options', () => {
  const invalid = (options: unknown, pattern: RegExp) =>
    assert.throws(() => verifySignature(options as VerifySignatureOptions), (error: unknown) => error instanceof InvalidOptionsError && pattern.test(error.message));

  it('are checked at construction', () => {
    const verifier = createVerifier({ masterKey: master.publicKey });
    invalid({ verifier, masterKey: master.publicKey }, /"masterKey" cannot be combined with "verifier"/);
    invalid({ verifier: {} }, /verifier/);
    invalid({ bodyLimit: -1 }, /bodyLimit/);
    invalid({ bodyLimit: '1mb' }, /bodyLimit/);
    invalid({ logger: console }, /logger/);
    invalid({ bodylimit: 10 }, /did you mean "bodyLimit"/);
    invalid({ masterKey: 'nope' }, /masterKey/);
    invalid({ toleranceMs: -5 }, /toleranceMs/);
    assert.equal(typeof verifySignature({ verifier, bodyLimit: 0, logger: false }), 'function');
    assert.equal(typeof verifySignature(), 'function');
  });
});
