import { randomFillSync } from 'node:crypto';
import type { ClaimInput, CommitInput } from '../../src/store/types.js';
import type { RequestToSign } from './signing.js';

/** The catalog every benchmarked router sells: one product, the plan and region requests use. */
export const CATALOG = { generator: { plans: ['low', 'high'], regions: ['aws::us-east-1', 'aws::eu-west-1'] } };

/** The message the bench handlers answer a provisioning with, kept on its resource. */
const PROVISIONED = 'Your generator is ready';

/** The handlers every benchmarked provider runs: instant, `onProvision` called once per provisioning. */
export function benchHandlers(onProvision: () => void = () => undefined) {
  return {
    provision: () => {
      onProvision();
      return PROVISIONED;
    },
    changePlan: () => undefined,
    deprovision: () => undefined,
    provisionCredentials: () => ({ credentials: { GENERATOR_URL: 'https://generator.example/x' } }),
    deprovisionCredentials: () => undefined,
  };
}

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
 * A signed marketplace request shaped like the interface's signed example: callback headers, the
 * JSON body with a trailing newline, and the same signed header list (host date x-callback-id
 * x-callback-url content-type content-length).
 */
function callbackRequest(method: string, host: string, date: string, id: string, payload: unknown): RequestToSign {
  const callbackId = marketplaceId();
  const body = Buffer.from(`${JSON.stringify(payload)}\n`);
  return {
    method,
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

/** A provisioning PUT of a new resource (`id`, random unless given), plan `low`. */
export function provisionRequest(host: string, date: string, id = marketplaceId()): RequestToSign {
  return callbackRequest('PUT', host, date, id, { id, plan: 'low', product: 'generator', region: 'aws::us-east-1' });
}

/**
 * A provisioning of resource `id` as the engine hands it to a store after the handler ran: the
 * claim's input (`key` is `operationKey('resource', id)`) and the commit that keeps the resource,
 * and, given `requestId`, the recorded answer. For filling stores and timing them without HTTP.
 */
export function storedProvisioning(key: string, id: string, now: number, requestId?: string): { input: ClaimInput; commit: CommitInput } {
  const features = Object.create(null) as Record<string, never>;
  const request = { kind: 'provision', product: 'generator', plan: 'low', region: 'aws::us-east-1', features } as const;
  const input: ClaimInput = { key, kind: 'provision', targetId: id, fingerprint: JSON.stringify(['provision', request.product, request.plan, request.region]), request, owner: 'bench', now, leaseMs: 30_000 };
  const commit: CommitInput = {
    mutation: { type: 'putResource', resource: { id, product: request.product, plan: request.plan, region: request.region, features, message: PROVISIONED, createdAt: now, updatedAt: now } },
  };
  if (requestId !== undefined) {
    input.requestId = requestId;
    input.replayExpiresAt = now + 600_000;
    commit.replay = { requestId, answer: { status: 201, body: { message: PROVISIONED } }, expiresAt: now + 600_000 };
  }
  return { input, commit };
}

/** A plan change (PATCH) of resource `id` to `plan`. */
export function planChange(host: string, date: string, id: string, plan: string): RequestToSign {
  return callbackRequest('PATCH', host, date, id, { plan });
}

/**
 * A clock running `speed` times faster than the wall clock from `origin` (ms since the epoch): the
 * --quick soak's server runs on it (bench/scale.ts), and its load generator signs Dates on it
 * (bench/soak.ts).
 */
export interface BenchClock {
  origin: number;
  speed: number;
}

/** The time on `clock` (ms since the epoch), or the wall clock's without one. */
export function clockTime(clock: BenchClock | undefined): number {
  return clock === undefined ? Date.now() : clock.origin + (Date.now() - clock.origin) * clock.speed;
}
