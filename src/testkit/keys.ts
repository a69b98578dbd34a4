import { createHash } from 'node:crypto';
import * as ed from '@noble/ed25519';
import { decodeBase64Any, encodeBase64Url } from '../lib/base64.js';

/**
 * Ed25519 keys for the test kit, on @noble/ed25519 (pure JavaScript, independent of the OpenSSL
 * code the verifier uses, so that the two check each other). Keys travel as base64url text.
 */

// noble's synchronous API needs a SHA-512; node:crypto's is at hand. Leave one already wired alone.
ed.hashes.sha512 ??= (message) => new Uint8Array(createHash('sha512').update(message).digest());

/** An Ed25519 key pair as unpadded base64url: `privateKey` is the 32-byte RFC 8032 seed. */
export interface KeyPair {
  publicKey: string;
  privateKey: string;
}

/**
 * A fresh random Ed25519 key pair.
 *
 * @example
 * ```ts
 * const master = generateKeyPair();
 * const verifier = createVerifier({ masterKey: master.publicKey });
 * ```
 */
export function generateKeyPair(): KeyPair {
  const { secretKey, publicKey } = ed.keygen();
  return { publicKey: encodeBase64Url(publicKey), privateKey: encodeBase64Url(secretKey) };
}

/**
 * The public key (base64url) of a private key given in base64url or base64.
 *
 * @example
 * ```ts
 * publicKeyOf(generateKeyPair().privateKey); // 43 base64url characters
 * ```
 */
export function publicKeyOf(privateKey: string): string {
  return encodeBase64Url(ed.getPublicKey(decodeKey(privateKey, 'privateKey')));
}

/**
 * 32 key bytes from base64url or base64 text (padded or not).
 *
 * @throws {TypeError} naming `label` when the text is not 32 bytes of strict base64.
 */
export function decodeKey(text: string, label: string): Uint8Array {
  const bytes = typeof text === 'string' ? decodeBase64Any(text.trim()) : undefined;
  if (bytes?.length !== 32) throw new TypeError(`${label} must be a 32-byte Ed25519 key in base64url or base64`);
  return new Uint8Array(bytes);
}

/** Ed25519 signature of `message` by the seed `privateKey` (32 bytes). */
export function signBytes(message: Uint8Array, privateKey: Uint8Array): Uint8Array {
  return ed.sign(message, privateKey);
}

/**
 * Strict RFC 8032 verification with noble (`zip215: false`: canonical encodings only, small-order
 * keys refused). `false` for anything malformed, never a throw.
 *
 * @example
 * ```ts
 * strictVerify(signature, message, publicKeyBytes); // true or false
 * ```
 */
export function strictVerify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  try {
    return ed.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}
