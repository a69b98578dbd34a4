import { readFileSync } from 'node:fs';
import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { encodeBase64Url } from '../../src/lib/base64.js';
import { canonicalRequest } from '../../src/signature/canonicalize.js';
import type { SignedRequest } from '../../src/signature/verifier.js';
import { decodeKey, publicKeyOf, signBytes } from '../../src/testkit/keys.js';

/** One entry of test/vectors/marketplace.json. */
export interface Vector {
  name: string;
  master_public_key: string;
  now: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  expect: 'valid';
}

export function loadVectors(): Vector[] {
  const file = new URL('../vectors/marketplace.json', import.meta.url);
  return (JSON.parse(readFileSync(file, 'utf8')) as { vectors: Vector[] }).vectors;
}

export function vectorRequest(vector: Vector): SignedRequest & { headers: Record<string, string>; body: Buffer } {
  return { method: vector.method, url: vector.url, headers: { ...vector.headers }, body: Buffer.from(vector.body, 'utf8') };
}

/**
 * Signs with full control over the parts the test kit's signer decides for you (which headers are
 * listed, the order), so that policy failures can be provoked under a valid signature chain.
 */
export function signCustom(input: {
  masterPrivateKey: string;
  livePrivateKey: string;
  method: string;
  url: string;
  headers: Record<string, string | string[]>;
  signedHeaders: string[];
  body?: Uint8Array;
}): string {
  const canonical = canonicalRequest({
    method: input.method,
    url: input.url,
    headers: input.headers,
    body: input.body,
    signedHeaders: input.signedHeaders,
  });
  const liveSeed = decodeKey(input.livePrivateKey, 'live');
  const livePublic = decodeKey(publicKeyOf(input.livePrivateKey), 'live public');
  const endorsement = signBytes(livePublic, decodeKey(input.masterPrivateKey, 'master'));
  return `${encodeBase64Url(signBytes(canonical, liveSeed))} ${encodeBase64Url(livePublic)} ${encodeBase64Url(endorsement)}`;
}

export interface RawAnswer {
  status: number;
  contentType: string | undefined;
  text: string;
  json: unknown;
}

/**
 * An HTTP/1.1 request with exactly the given headers (node:http, unlike fetch, lets Host be set and
 * headers repeat; a flat `[name, value, ...]` array even repeats Host) and the body either whole
 * or in chunks (chunked transfer encoding).
 */
export function send(
  base: string,
  input: { method: string; path: string; headers: OutgoingHttpHeaders | string[]; body?: Uint8Array | string; chunks?: (Uint8Array | string)[] },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const target = new URL(base);
    const req = httpRequest(
      { host: target.hostname, port: target.port, method: input.method, path: input.path, headers: input.headers, agent: false },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (chunk: Buffer) => parts.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          let json: unknown;
          try {
            json = text.length > 0 ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (input.chunks !== undefined) {
      for (const chunk of input.chunks) req.write(chunk);
      req.end();
    } else {
      req.end(input.body);
    }
  });
}
