import type { IncomingMessage } from 'node:http';

/**
 * A ready `verify` hook for `express.json()` (body-parser, Express 4 and 5): it keeps the exact body
 * bytes on `req.rawBody`, where the marketplace router (and `verifySignature`) find and verify them.
 * For apps that parse JSON globally and cannot mount the router first.
 *
 * Typed on `node:http`'s `IncomingMessage`, as body-parser calls it, so it compiles in strict
 * TypeScript with the types of Express 4 and 5 alike (an inline `(req, _res, buf) => { req.rawBody
 * = buf }` does not: `rawBody` is not a property of `IncomingMessage`). The bytes are verified,
 * never trusted: a changed body still answers 401.
 *
 * @param req the request body-parser is reading.
 * @param _res unused; present so the hook has body-parser's `verify` shape.
 * @param buf the raw body, as received.
 * @example
 * ```ts
 * import express from 'express';
 * import { keepRawBody, marketplaceRouter } from 'embedded-marketplace';
 *
 * const app = express();
 * app.use(express.json({ verify: keepRawBody }));       // your global parser, kept
 * app.use(marketplaceRouter({ handlers }));              // verifies req.rawBody
 * ```
 */
export function keepRawBody(req: IncomingMessage, _res: unknown, buf: Buffer): void {
  (req as IncomingMessage & { rawBody?: Buffer }).rawBody = buf;
}
