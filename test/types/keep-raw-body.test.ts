/**
 * Type-level tests of `keepRawBody` (type-checked by `npm run typecheck`, strict, against this
 * repository's @types/express 5; the packaging test compiles the same line against Express 4's
 * types from the packed tarball): it is a body-parser `verify` hook, nothing else.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import express from 'express';
import { keepRawBody, marketplaceRouter } from '../../src/index.js';

function typeChecks(): void {
  const app = express();
  app.use(express.json({ verify: keepRawBody }));
  app.use(express.raw({ verify: keepRawBody, type: '*/*' }));
  app.use(express.urlencoded({ verify: keepRawBody, extended: false }));
  app.use(marketplaceRouter({ logger: false, handlers: { provision: () => undefined, changePlan: () => undefined, deprovision: () => undefined, provisionCredentials: () => ({ credentials: { A: 'b' } }), deprovisionCredentials: () => undefined } }));
  // What the README used to say does not compile: body-parser types `req` as IncomingMessage.
  // @ts-expect-error rawBody is not a property of IncomingMessage (TS2339)
  express.json({ verify: (req, _res, buf) => { req.rawBody = buf; } });
  // @ts-expect-error a verify hook takes the body bytes, not a string
  keepRawBody({} as IncomingMessage, undefined, 'body');
  // @ts-expect-error it is a verify hook, not a middleware: it would never call next()
  app.use('/v1', keepRawBody);
}

describe('keepRawBody types', () => {
  it('keeps the bytes on req.rawBody', () => {
    const req = {} as IncomingMessage & { rawBody?: Buffer };
    keepRawBody(req, undefined, Buffer.from('{}'));
    assert.deepEqual(req.rawBody, Buffer.from('{}'));
    assert.equal(typeof typeChecks, 'function');
  });
});
