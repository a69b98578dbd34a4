/**
 * Verification of the marketplace's signed requests (interface section 5.2): the pure canonical
 * form, a framework-free verifier, and the Express middleware that reads the raw body.
 */
export { canonicalRequest } from './canonicalize.js';
export type { CanonicalRequestInput, HeaderValue, RequestHeaders } from './canonicalize.js';
export { parseDate, parseSignature, parseSignedHeaders } from './parse.js';
export type { ParsedSignature } from './parse.js';
export {
  createVerifier,
  DEFAULT_ENDORSEMENT_CACHE_SIZE,
  DEFAULT_TOLERANCE_MS,
  PRODUCTION_MASTER_PUBLIC_KEY,
} from './verifier.js';
export type { HeaderCheck, SignedRequest, VerifiedRequest, Verifier, VerifierOptions } from './verifier.js';
export { errorResponder, verifySignature } from './middleware.js';
export type { VerifySignatureOptions } from './middleware.js';
export { DEFAULT_BODY_LIMIT } from './raw-body.js';
