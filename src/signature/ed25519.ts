import { createPublicKey, verify as cryptoVerify, type KeyObject } from 'node:crypto';

/**
 * Ed25519 on node:crypto (OpenSSL): key import from raw bytes and verification on libuv's thread
 * pool, so that a burst of signed requests does not serialise on the event loop.
 */

// DER SubjectPublicKeyInfo for id-Ed25519 (RFC 8410) up to the 32 key bytes.
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Ed25519 public keys and signatures are 32 and 64 bytes. */
export const PUBLIC_KEY_BYTES = 32;
export const SIGNATURE_BYTES = 64;

/** Imports a raw 32-byte Ed25519 public key. The caller checks the length and {@link isWeakPublicKey}. */
export function importPublicKey(raw: Uint8Array): KeyObject {
  const der = Buffer.allocUnsafe(SPKI_PREFIX.length + PUBLIC_KEY_BYTES);
  SPKI_PREFIX.copy(der, 0);
  der.set(raw, SPKI_PREFIX.length);
  return createPublicKey({ key: der, format: 'der', type: 'spki' });
}

/**
 * Verifies an Ed25519 signature off the event loop. Resolves `false` (never rejects) for a wrong
 * signature and for anything OpenSSL refuses, so that every failure takes the same path.
 */
export function verifyEd25519(data: Uint8Array, key: KeyObject, signature: Uint8Array): Promise<boolean> {
  return new Promise((resolve) => verifyEd25519Then(data, key, signature, resolve));
}

/** {@link verifyEd25519} with a callback, for the hot path: no promise per verification. */
export function verifyEd25519Then(data: Uint8Array, key: KeyObject, signature: Uint8Array, done: (valid: boolean) => void): void {
  const callback = releasingCallback(done);
  try {
    cryptoVerify(null, data, key, signature, callback);
  } catch {
    callback(null, false);
  }
}

/**
 * @internal The callback handed to node:crypto: it answers `done` once, with whether the signature
 * verified, and lets go of it when it runs.
 *
 * What node:crypto keeps of a finished job stays reachable for the young generation's collections
 * (scavenges) until the next full one. A callback holding `done` directly kept, that long, the
 * whole request it belongs to: the caller's closures and through them the HTTP request and
 * response. Every scavenge copied those requests and promoted them: on the Fastify plugin 17% of
 * the young generation survived each scavenge instead of 4%, and the collector took the main
 * thread 7–12 µs more per request on every host (docs/performance.md, "Late in the evening: the
 * collector").
 */
export function releasingCallback(done: (valid: boolean) => void): (error: Error | null, ok: boolean) => void {
  let pending: ((valid: boolean) => void) | undefined = done;
  return (error, ok) => {
    const answer = pending;
    pending = undefined;
    answer?.(error === null && ok);
  };
}

// Encodings of the eight points of small order (the y coordinate, sign bit cleared), as in
// libsodium's blocklist. OpenSSL accepts them as keys, and with the identity as key a signature
// made without any secret verifies for every message; strict RFC 8032 verifiers refuse them.
const SMALL_ORDER_Y = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
].map((hex) => Buffer.from(hex, 'hex'));

/**
 * True for a public key no honest signer has: a small-order point (in any encoding) or a
 * non-canonical encoding (y not reduced modulo 2^255 - 19). Cheap byte comparisons only.
 */
export function isWeakPublicKey(raw: Uint8Array): boolean {
  if (raw.length !== PUBLIC_KEY_BYTES) return true;
  const top = raw[31]! & 0x7f;
  if (top === 0x7f && raw[0]! >= 0xed && raw.subarray(1, 31).every((b) => b === 0xff)) return true;
  outer: for (const y of SMALL_ORDER_Y) {
    for (let i = 0; i < 31; i++) if (raw[i] !== y[i]) continue outer;
    if (top === y[31]) return true;
  }
  return false;
}
