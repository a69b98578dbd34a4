import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Secret comparison and generation. Secrets are compared through their SHA-256 digests so that
 * every comparison runs over 32 equal-length bytes: `timingSafeEqual` would throw on unequal lengths,
 * and a length check before it would leak the secret's length.
 */

export function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** The key under which a secret value (code, token) is stored: only its digest ever reaches a store. */
export function secretKey(value: string): string {
  return sha256(value).toString('base64url');
}

/**
 * Whether `candidate` equals one of the accepted digests. Every digest is compared, with no early exit,
 * so the time taken does not tell which entry (if any) matched.
 */
export function matchesAnyDigest(candidate: string, accepted: readonly Buffer[]): boolean {
  const digest = sha256(candidate);
  let matched = false;
  for (const expected of accepted) {
    if (timingSafeEqual(digest, expected)) matched = true;
  }
  return matched;
}

/** A fresh unguessable value: 256 bits, base64url. */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}
