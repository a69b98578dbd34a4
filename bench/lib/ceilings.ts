import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { RequestHeaders } from '../../src/signature/canonicalize.js';

/**
 * The one-verify ceiling, once per host: the least any correct provider does per signed request.
 * The same route three times — for Express, for Fastify, and for a `Request → Response` function
 * behind the fetch bridge (@hono/node-server) — so that each adapter is measured against what its
 * own framework costs: raw body, the canonical form of the signed headers, ONE Ed25519
 * verification of the request signature on libuv's thread pool (crypto.verify with a callback),
 * JSON.parse, `201 {message}`. No endorsement check, no validation, no store, no idempotency.
 */

/** The canonical form builder of the compiled package (bench/server.ts loads it from dist/). */
export type Canonicalize = (input: { method: string; url: string; headers: RequestHeaders; body: Uint8Array; signedHeaders: readonly string[] }) => Buffer;

/** Counts each request the ceiling accepted (the bench checks one per answered request). */
export type OnHandled = () => void;

// The live keys seen so far, imported once each (the adapters cache their endorsement likewise).
const liveKeys = new Map<string, KeyObject>();

function liveKey(live: string): KeyObject {
  let key = liveKeys.get(live);
  if (key === undefined) {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: live }, format: 'jwk' });
    liveKeys.set(live, key);
  }
  return key;
}

/**
 * The shared step: canonical form, one verification on the thread pool, JSON.parse. Answers the
 * status and body to send through `answer`, from the crypto callback.
 */
function verifyOnce(canonicalize: Canonicalize, method: string, url: string, headers: RequestHeaders, body: Buffer, answer: (status: number, message: string) => void): void {
  const [signature = '', live = ''] = String(headers['x-signature'] ?? '').split(' ');
  const signedHeaders = String(headers['x-signed-headers'] ?? '').split(' ');
  const canonical = canonicalize({ method, url, headers, body, signedHeaders });
  verify(null, canonical, liveKey(live), Buffer.from(signature, 'base64url'), (error, valid) => {
    if (error !== null || !valid) {
      answer(401, 'Invalid signature');
      return;
    }
    const parsed = JSON.parse(body.toString('utf8')) as { id?: unknown };
    answer(201, `Resource ${String(parsed.id)} provisioned`);
  });
}

/** Express: `app.put('/v1/resources/:id', express.raw({ type: () => true }), route)`. */
export function expressCeiling(canonicalize: Canonicalize, onHandled: OnHandled) {
  return (req: { method: string; originalUrl: string; headers: IncomingHttpHeaders; body: unknown }, res: { status(code: number): { json(body: unknown): unknown } }): void => {
    verifyOnce(canonicalize, req.method, req.originalUrl, req.headers, req.body as Buffer, (status, message) => {
      if (status === 201) onHandled();
      res.status(status).json({ message });
    });
  };
}

/** Mounts {@link fastifyCeiling} on `app` behind a content-type parser that hands over the raw bytes. */
export function mountFastifyCeiling(app: FastifyInstance, canonicalize: Canonicalize, onHandled: OnHandled): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.put('/v1/resources/:id', fastifyCeiling(canonicalize, onHandled));
}

/**
 * Fastify: a route in a context whose only content-type parser hands over the raw bytes
 * (`removeAllContentTypeParsers()`, then `'*'` with `parseAs: 'buffer'`).
 */
function fastifyCeiling(canonicalize: Canonicalize, onHandled: OnHandled) {
  return (request: { method: string; url: string; headers: IncomingHttpHeaders; body: unknown }, reply: { code(status: number): { send(body: unknown): unknown } }): void => {
    verifyOnce(canonicalize, request.method, request.url, request.headers, request.body as Buffer, (status, message) => {
      if (status === 201) onHandled();
      reply.code(status).send({ message });
    });
  };
}

/** The Web form: `Request → Response`, served on Node by @hono/node-server's `getRequestListener`. */
export function fetchCeiling(canonicalize: Canonicalize, onHandled: OnHandled): (request: Request) => Promise<Response> {
  return async (request) => {
    const url = new URL(request.url);
    if (request.method !== 'PUT' || !url.pathname.startsWith('/v1/resources/')) return Response.json({ message: 'Not found' }, { status: 404 });
    const body = Buffer.from(await request.arrayBuffer());
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    return new Promise<Response>((resolve) => {
      verifyOnce(canonicalize, request.method, url.pathname + url.search, headers, body, (status, message) => {
        if (status === 201) onHandled();
        resolve(new Response(JSON.stringify({ message }), { status, headers: { 'content-type': 'application/json; charset=utf-8' } }));
      });
    });
  };
}
