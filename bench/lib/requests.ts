import { randomFillSync } from 'node:crypto';
import type { RequestToSign } from './signing.js';

/** The catalog every benchmarked router sells: one product, the plan and region requests use. */
export const CATALOG = { generator: { plans: ['low', 'high'], regions: ['aws::us-east-1', 'aws::eu-west-1'] } };

const BASE32 = '0123456789abcdefghjkmnpqrtuvwxyz';

// Random bytes drawn in blocks: one system call per block rather than two per request, which
// matters when tens of thousands of requests are signed in the seconds before a run.
const entropy = Buffer.alloc(64 * 1024);
let used = entropy.length;

/** A marketplace-style id: 29 characters of the marketplace's base32 alphabet, random. */
export function marketplaceId(): string {
  if (used + 29 > entropy.length) {
    randomFillSync(entropy);
    used = 0;
  }
  let id = '';
  for (let i = used; i < used + 29; i++) id += BASE32[entropy[i]! & 31];
  used += 29;
  return id;
}

/**
 * A provisioning PUT shaped like the interface's signed example: callback headers, JSON body with
 * a trailing newline, and the same signed header list (host date x-callback-id x-callback-url
 * content-type content-length).
 */
export function provisionRequest(host: string, date: string, id = marketplaceId()): RequestToSign {
  const callbackId = marketplaceId();
  const body = Buffer.from(`${JSON.stringify({ id, plan: 'low', product: 'generator', region: 'aws::us-east-1' })}\n`);
  return {
    method: 'PUT',
    url: `/v1/resources/${id}`,
    host,
    date,
    headers: [
      ['x-callback-id', callbackId],
      ['x-callback-url', `http://127.0.0.1:5000/v1/callbacks/${callbackId}`],
      ['content-type', 'application/json'],
      ['content-length', String(body.length)],
    ],
    body,
  };
}
