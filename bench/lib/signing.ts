import { createPrivateKey, generateKeyPairSync, sign, type JsonWebKey, type KeyObject } from 'node:crypto';
import { canonicalRequest } from '../../src/signature/canonicalize.js';

/**
 * A signer for load generation on node:crypto. The test kit's signer runs on pure-JavaScript
 * Ed25519 (about 1.4 ms a signature here), too slow to pre-sign tens of thousands of requests in
 * the seconds before a run; OpenSSL signs in well under 0.1 ms. Ed25519 is deterministic, so
 * run.ts checks at start-up that both signers produce byte-identical headers.
 */

/** An Ed25519 key pair: the private key as a KeyObject, the public key as raw base64url. */
export interface BenchKeyPair {
  privateKey: KeyObject;
  /** 32 raw bytes, unpadded base64url: what X-Signature carries and `masterKey` accepts. */
  publicKey: string;
  /** Private JWK (`d` is the RFC 8032 seed in base64url): travels to child processes over IPC. */
  jwk: JsonWebKey;
}

/** A fresh random key pair. */
export function newKeyPair(): BenchKeyPair {
  const { privateKey } = generateKeyPairSync('ed25519');
  return fromPrivate(privateKey);
}

/** The key pair of a private JWK (from {@link BenchKeyPair.jwk}). */
export function importKeyPair(jwk: JsonWebKey): BenchKeyPair {
  return fromPrivate(createPrivateKey({ key: jwk, format: 'jwk' }));
}

function fromPrivate(privateKey: KeyObject): BenchKeyPair {
  const jwk = privateKey.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string' || typeof jwk.d !== 'string') throw new Error('bench: not an Ed25519 private key');
  return { privateKey, publicKey: jwk.x, jwk };
}

/** The server a load generator (bench/load.ts, bench/soak.ts) sends signed requests to, and the key they are signed under. */
export interface SignedTarget {
  /** `http://127.0.0.1:port` */
  url: string;
  /** The server's Host (`127.0.0.1:port`), which is signed. */
  host: string;
  /** The master key's private JWK ({@link BenchKeyPair.jwk}); each load generator endorses a live key of its own with it. */
  master: JsonWebKey;
}

/** One request to sign; headers are signed in the given order after host and date. */
export interface RequestToSign {
  method: string;
  url: string;
  host: string;
  /** RFC 3339 Date to sign. */
  date: string;
  headers: readonly (readonly [string, string])[];
  body: Buffer;
}

/** Signs requests with one live key endorsed by the master key, in the testkit signer's header layout. */
export class BenchSigner {
  readonly live: BenchKeyPair;
  readonly #endorsement: string;

  constructor(master: BenchKeyPair, live: BenchKeyPair = newKeyPair()) {
    this.live = live;
    this.#endorsement = sign(null, Buffer.from(live.publicKey, 'base64url'), master.privateKey).toString('base64url');
  }

  /** The headers to send: host, date, the given ones, x-signed-headers, x-signature. */
  sign(request: RequestToSign): Record<string, string> {
    const names = ['host', 'date'];
    const headers: Record<string, string> = { host: request.host, date: request.date };
    for (const [name, value] of request.headers) {
      names.push(name);
      headers[name] = value;
    }
    headers['x-signed-headers'] = names.join(' ');
    const canonical = canonicalRequest({ method: request.method, url: request.url, headers, body: request.body, signedHeaders: names });
    const signature = sign(null, canonical, this.live.privateKey).toString('base64url');
    headers['x-signature'] = `${signature} ${this.live.publicKey} ${this.#endorsement}`;
    return headers;
  }
}

/** A signer for `target`: a fresh live key, endorsed by its master key. */
export function signerFor(target: SignedTarget): BenchSigner {
  return new BenchSigner(importKeyPair(target.master));
}

/** RFC 3339 in UTC to the second, as the marketplace writes Date. */
export function rfc3339(at: number): string {
  return `${new Date(at).toISOString().slice(0, 19)}Z`;
}
