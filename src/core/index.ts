/**
 * The core as adapters use it (internal to the package: the root exports `createProvider` and the
 * public types only). An adapter turns its framework's request into plain values, calls the core's
 * steps or its whole pipeline, and writes the answer:
 *
 * - whole pipeline: `provider.node(req, res, next)` for anything with node's req/res (Fastify's
 *   `request.raw`/`reply.raw` included), `provider.fetch(request)` for Web hosts;
 * - step by step, with the framework routing our paths (see adapters/express.ts): `core.log.watch`
 *   (the log line and metrics), `core.parts.signature.check` (body bytes from a stream, bytes or a
 *   reader; or `core.verifyRequest(input)` for both in one promise), `core.parseBody`,
 *   `core.serve(route, action, id, query, headers, body, verified, reqId)`,
 *   `core.answerSso(...)`, then `writeAnswer(res, answer, method)` or `toResponse(answer, method)`.
 */
export { createProvider, coreOf, providerOf, ProviderCore, requestIdOf } from './provider.js';
export { composeProvider, COMMON_OPTIONS, type ProviderParts } from './compose.js';
export { errorAnswer, fromEngine, methodNotAllowed, toResponse, writeAnswer, answeredCode } from './answer.js';
export { actionOf, ALLOW, decodePathId, matchPath, parseQuery, routeLabel, type PathMatch, type RouteAction, type RoutePattern } from './routes.js';
export { RequestLog } from './observe.js';
export type { SsoAnswer, SsoRequest } from './sso.js';
export { sentOnceEach, type Accepted, type SignedBody, type SignedInput } from '../signature/check.js';
export { signInSteps, type MarketplaceSessionData, type SignInResult } from '../sso/exchange.js';
export type * from './types.js';
