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
 * imported. Both sides run interleaved in rounds, so drift in the machine's load hits both.
 */

export interface VerifyParams {
  /** Distinct pre-signed requests, cycled. */
  requests: number;
  /** In-flight operations. */
  concurrency: number;
  rounds: number;
  /** Length of each side's slice per round. */
  sliceMs: number;
}

export interface VerifyResult {
  concurrency: number;
  verifyOps: number;
  rawOps: number;
  /** Extra main-thread microseconds per verify(), from the two rates. */
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

  // Short warm-up of both paths (JIT, thread pool).
  await runFor(viaCrypto, params.concurrency, Math.min(300, params.sliceMs));
  await runFor(viaVerifier, params.concurrency, Math.min(300, params.sliceMs));

  const totals = { verify: { ops: 0, seconds: 0 }, raw: { ops: 0, seconds: 0 } };
  for (let round = 0; round < params.rounds; round++) {
    const order = round % 2 === 0 ? (['raw', 'verify'] as const) : (['verify', 'raw'] as const);
    for (const side of order) {
      const result = await runFor(side === 'raw' ? viaCrypto : viaVerifier, params.concurrency, params.sliceMs);
      totals[side].ops += result.ops;
      totals[side].seconds += result.seconds;
    }
  }
  const verifyOps = totals.verify.ops / totals.verify.seconds;
  const rawOps = totals.raw.ops / totals.raw.seconds;
  return { concurrency: params.concurrency, verifyOps, rawOps, overheadUs: 1e6 / verifyOps - 1e6 / rawOps };
}

serveCalls({ measure });
