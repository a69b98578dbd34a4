import { createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { canonicalRequest } from '../src/signature/canonicalize.js';
import { createVerifier, type SignedRequest } from '../src/signature/index.js';
import { serveCalls } from './lib/child.js';
import { runFor } from './lib/measure.js';
import { provisionRequest } from './lib/requests.js';
import { BenchSigner, newKeyPair, rfc3339 } from './lib/signing.js';

/**
 * Measurement 1: `verify()` against the floor it cannot go under, a raw `crypto.verify` (the same
 * callback form, on libuv's thread pool) of the same canonical bytes with the live key already
 * imported. The two sides alternate in short slices and the ratio is the median over the pairs,
 * so that bursts of load from other processes hit both sides alike or drop out as outliers.
 */

export interface VerifyParams {
  /** Distinct pre-signed requests, cycled. */
  requests: number;
  /** In-flight operations. */
  concurrency: number;
  /** Pairs of slices (one raw, one verify(), in alternating order). */
  pairs: number;
  /** Length of each slice. */
  sliceMs: number;
}

export interface VerifyResult {
  concurrency: number;
  /** Totals over all slices. */
  verifyOps: number;
  rawOps: number;
  /** Median over the pairs of verify()/raw. */
  ratio: number;
  /** Extra microseconds per verify(), from the two total rates. */
  overheadUs: number;
}

async function measure(params: VerifyParams): Promise<VerifyResult> {
  const master = newKeyPair();
  const signer = new BenchSigner(master);
  const signedAt = Date.now();
  const date = rfc3339(signedAt);
  const host = 'provider.example.com';

  const requests: SignedRequest[] = [];
  const raw: { data: Buffer; signature: Buffer }[] = [];
  for (let i = 0; i < params.requests; i++) {
    const request = provisionRequest(host, date);
    const headers = signer.sign(request);
    // The shape the middleware passes: Node's req.headersDistinct, arrays of values by lowercase name.
    const distinct: Record<string, string[]> = { accept: ['application/json'], connection: ['keep-alive'] };
    for (const [name, value] of Object.entries(headers)) distinct[name] = [value];
    requests.push({ method: request.method, url: request.url, headers: distinct, body: request.body });
    const signedHeaders = headers['x-signed-headers']!.split(' ');
    raw.push({
      data: canonicalRequest({ method: request.method, url: request.url, headers, body: request.body, signedHeaders }),
      signature: Buffer.from(headers['x-signature']!.slice(0, 86), 'base64url'),
    });
  }

  const verifier = createVerifier({ masterKey: master.publicKey, now: () => signedAt });
  const liveKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: signer.live.publicKey }, format: 'jwk' });
  await verifier.verify(requests[0]!); // warms the endorsement cache

  const viaVerifier = async (i: number) => {
    await verifier.verify(requests[i % requests.length]!);
  };
  const viaCrypto = (i: number) => new Promise<void>((resolve, reject) => {
    const { data, signature } = raw[i % raw.length]!;
    cryptoVerify(null, data, liveKey, signature, (error, ok) => {
      if (error === null && ok) resolve();
      else reject(error ?? new Error('bench: raw verification failed'));
    });
  });

  // Warm-up of both paths (JIT, thread pool).
  await runFor(viaCrypto, params.concurrency, params.sliceMs);
  await runFor(viaVerifier, params.concurrency, params.sliceMs);

  const totals = { verify: { ops: 0, seconds: 0 }, raw: { ops: 0, seconds: 0 } };
  const ratios: number[] = [];
  for (let pair = 0; pair < params.pairs; pair++) {
    const rates = { verify: 0, raw: 0 };
    for (const side of pair % 2 === 0 ? (['raw', 'verify'] as const) : (['verify', 'raw'] as const)) {
      const result = await runFor(side === 'raw' ? viaCrypto : viaVerifier, params.concurrency, params.sliceMs);
      totals[side].ops += result.ops;
      totals[side].seconds += result.seconds;
      rates[side] = result.ops / result.seconds;
    }
    ratios.push(rates.verify / rates.raw);
  }
  ratios.sort((a, b) => a - b);
  const middle = ratios.length >> 1;
  const ratio = ratios.length % 2 === 1 ? ratios[middle]! : (ratios[middle - 1]! + ratios[middle]!) / 2;
  const verifyOps = totals.verify.ops / totals.verify.seconds;
  const rawOps = totals.raw.ops / totals.raw.seconds;
  return { concurrency: params.concurrency, verifyOps, rawOps, ratio, overheadUs: 1e6 / verifyOps - 1e6 / rawOps };
}

serveCalls({ measure });
