import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { gunzipSync } from 'node:zlib';
import type { TestContext } from 'node:test';
import express, { type Express } from 'express';
import fc from 'fast-check';
import { marketplaceRouter, memoryStore, type MarketplaceRouterOptions, type ProviderHandlers } from '../../src/index.js';
import { LABEL_PATTERN, REGION_PATTERN } from '../../src/domain/schemas.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner, type Signer } from '../../src/testkit/signer.js';
import { listen, type Running } from '../helpers/http.js';

/**
 * Shared machinery of the hostile-input suite: a fixed seed, a raw HTTP client that sends exactly
 * the headers it is given (repeats, any case, any order), the checks every answer must pass, and a
 * provider whose handlers count their calls and check what reaches them.
 */

// A fixed seed keeps CI deterministic; FC_SEED explores other inputs locally.
export const SEED = process.env.FC_SEED === undefined ? 20_170_406 : Number(process.env.FC_SEED);

/** fast-check parameters for a property: the seed, a bounded number of runs, no time-based interrupt. */
export function runs(numRuns: number): fc.Parameters<unknown> {
  return { seed: SEED, numRuns };
}

/** Counts the inputs a property tried and prints the figure in the test log (`ℹ` lines / TAP comments). */
export function tally(t: TestContext, label: string): { hit(): void; report(extra?: string): void; readonly count: number } {
  let count = 0;
  return {
    hit: () => void (count += 1),
    report: (extra) => t.diagnostic(`${label}: ${count} inputs tried${extra === undefined ? '' : `; ${extra}`}`),
    get count() {
      return count;
    },
  };
}

/**
 * Records unhandled promise rejections from the moment it is called. With a listener installed
 * Node no longer crashes on one, so the suite asserts the list is empty at the end instead.
 */
export function recordRejections(): { list: unknown[]; dispose(): void } {
  const list: unknown[] = [];
  const listener = (reason: unknown) => void list.push(reason);
  process.on('unhandledRejection', listener);
  return { list, dispose: () => void process.off('unhandledRejection', listener) };
}

const PROTOTYPE_KEYS = Reflect.ownKeys(Object.prototype).map(String).sort();

/** Object.prototype has exactly the keys it had when this module loaded, and `{}` carries nothing new. */
export function assertNoPollution(): void {
  assert.deepEqual(Reflect.ownKeys(Object.prototype).map(String).sort(), PROTOTYPE_KEYS, 'Object.prototype gained or lost a key');
  const probe = {} as Record<string, unknown>;
  for (const key of ['polluted', 'isAdmin', 'plan', 'credentials']) assert.equal(probe[key], undefined, `Object.prototype.${key} was set`);
}

/** Keys that reach a prototype when an object is merged naively. */
export const POISON_KEYS = ['__proto__', 'constructor', 'prototype'] as const;

/** True when `value` holds a poisoned key as an own property at any depth. */
export function hasPoisonedKey(value: unknown, depth = 0): boolean {
  if (typeof value !== 'object' || value === null || depth > 64) return false;
  for (const key of Reflect.ownKeys(value)) {
    if ((POISON_KEYS as readonly PropertyKey[]).includes(key)) return true;
    if (hasPoisonedKey((value as Record<PropertyKey, unknown>)[key], depth + 1)) return true;
  }
  return false;
}

export interface RawRequest {
  method: string;
  /** Request target as sent on the wire (path and query). */
  path: string;
  /** Header lines in order, names as written; nothing is added but Content-Length and Connection. */
  headers: readonly (readonly [string, string])[];
  body?: Buffer | undefined;
  /** Send the body with Transfer-Encoding: chunked instead of a Content-Length. */
  chunked?: boolean;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The parsed JSON body, or undefined when there is none or it is not JSON. */
  json: unknown;
}

/**
 * One request over a fresh loopback connection with exactly the given header lines (node's client
 * adds no Host when headers are given as a list). Content-Length is added when the list lacks it.
 */
export function sendRaw(target: Running, input: RawRequest): Promise<RawAnswer> {
  const { port } = new URL(target.url);
  const body = input.body ?? Buffer.alloc(0);
  const flat: string[] = [];
  for (const [name, value] of input.headers) flat.push(name, value);
  if (input.chunked === true) flat.push('transfer-encoding', 'chunked');
  else if (!input.headers.some(([name]) => name.toLowerCase() === 'content-length')) flat.push('content-length', String(body.length));
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: Number(port), method: input.method, path: input.path, headers: flat, agent: false, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const text = (res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
        let json: unknown;
        try {
          json = text.length > 0 ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    if (input.chunked === true) {
      // Several chunks, so that a limit is crossed in the middle of the stream, not up front.
      for (let at = 0; at < body.length; at += 100) req.write(body.subarray(at, at + 100));
      req.end();
    } else {
      req.end(body);
    }
  });
}

/** What the interface demands of every refusal: JSON `{"message": <3..256 chars>}`. */
export function assertJsonRejection(answer: Pick<RawAnswer, 'status' | 'headers' | 'json' | 'text'>, context = ''): void {
  assert.ok(answer.status >= 400, `expected a refusal${context}`);
  assert.match(String(answer.headers['content-type']), /^application\/json/, `a ${answer.status} must be JSON${context}: ${answer.text.slice(0, 120)}`);
  const message = (answer.json as { message?: unknown } | undefined)?.message;
  assert.equal(typeof message, 'string', `a ${answer.status} must carry a message${context}: ${answer.text.slice(0, 120)}`);
  const length = (message as string).length;
  assert.ok(length >= 3 && length <= 256, `message of ${length} characters${context}`);
}

/** No 5xx, ever: the marketplace would retry a request that can never succeed. */
export function assertNo5xx(answer: Pick<RawAnswer, 'status' | 'text'>, context = ''): void {
  assert.ok(answer.status < 500, `answered ${answer.status}${context}: ${answer.text.slice(0, 160)}`);
}

// --- generators --------------------------------------------------------------------------------

const ID_ALPHABET = '0123456789abcdefghjkmnpqrtuvwxyz';
let idSerial = 0;
/** A fresh 29-character id in the marketplace's base32 alphabet (`fuzz` aside), unique within the process. */
export function freshId(): string {
  idSerial += 1;
  let n = idSerial;
  let tail = '';
  for (let i = 0; i < 8; i++) {
    tail = ID_ALPHABET[n % 32]! + tail;
    n = Math.floor(n / 32);
  }
  return `2fuzz${'0'.repeat(16)}${tail}`;
}

/** Printable ASCII and Latin-1: what an HTTP field value can carry (no CR, LF or NUL). */
export const fieldValue = fc.stringMatching(/^[\x21-\x7e\xa1-\xff](?:[\x20-\x7e\xa0-\xff]{0,40}[\x21-\x7e\xa1-\xff])?$/);
/** A header name that means nothing to HTTP framing. */
export const harmlessHeaderName = fc.oneof(
  fc.stringMatching(/^x-[a-z0-9-]{1,16}$/).filter((name) => !['x-signature', 'x-signed-headers', 'x-callback-id', 'x-callback-url'].includes(name)),
  fc.constantFrom('accept', 'user-agent', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'forwarded', 'via', 'cookie', 'authorization', 'x-request-id', 'accept-language', 'cache-control', 'if-none-match', 'origin', 'referer', 'prototype', 'constructor', 'hasownproperty', 'tostring', 'x-http-method-override'),
);

/** A JSON text whose keys may be `__proto__` and friends, also spelled with `\u` escapes. */
export const poisonedKey = fc.constantFrom('"__proto__"', '"constructor"', '"prototype"', '"__pro\\u0074o__"', '"\\u005f_proto__"', '"constr\\u0075ctor"', '"protot\\u0079pe"');
const plainKey = fc.oneof(fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)), fc.constantFrom('"polluted"', '"isAdmin"', '"id"', '"plan"', '"features"', '"toString"', '"hasOwnProperty"', '"valueOf"'));
const anyKey = fc.oneof({ weight: 3, arbitrary: plainKey }, { weight: 1, arbitrary: poisonedKey });
const leaf = fc.oneof(
  fc.constant('null'),
  fc.boolean().map(String),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.string({ maxLength: 16 }).map((s) => JSON.stringify(s)),
  fc.constant('{"polluted":"yes","isAdmin":true}'),
);

/** JSON text of any shape, with poisoned keys anywhere (generated as text so they stay own keys). */
export const jsonText: fc.Arbitrary<string> = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
  object: fc.array(fc.tuple(anyKey, tie('value')), { maxLength: 5 }).map((entries) => `{${entries.map(([k, v]) => `${k}:${v}`).join(',')}}`),
})).value;

/** An object entry list as JSON text. */
export function objectText(entries: readonly (readonly [string, string])[]): string {
  return `{${entries.map(([k, v]) => `${k.startsWith('"') ? k : JSON.stringify(k)}:${v}`).join(',')}}`;
}

/** Extra entries to add to an otherwise valid body: unknown fields, poisoned keys, nested junk. */
export const extraEntries = fc.array(fc.tuple(anyKey, jsonText), { maxLength: 3 });

// --- the provider under test ----------------------------------------------------------------------

export const CATALOG = { bonnets: { plans: ['small', 'large', 'custom'], regions: ['aws::us-east-1', 'all::global'] } };
const LABEL = new RegExp(LABEL_PATTERN);
const REGION = new RegExp(REGION_PATTERN);

export interface ProviderHarness {
  target: Running;
  signer: Signer;
  app: Express;
  /** Handler calls by name, and their total. */
  calls: Record<string, number>;
  totalCalls(): number;
  /** Invariants a handler found broken (should stay empty). */
  violations: string[];
  /** Signed header lines for a request to this provider, plus the body bytes. */
  sign(method: string, path: string, body?: string | Buffer, headers?: Record<string, string>): { headers: [string, string][]; body: Buffer };
  /** Signs and sends. */
  send(method: string, path: string, body?: string | Buffer, headers?: Record<string, string>): Promise<RawAnswer>;
  close(): Promise<void>;
}

/** A provider on the real router (memory store, catalog, a connector URL for the callback checks). */
export async function providerHarness(options: { queryParser?: 'simple' | 'extended'; router?: Partial<MarketplaceRouterOptions> } = {}): Promise<ProviderHarness> {
  const master = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey });
  const calls: Record<string, number> = {};
  const violations: string[] = [];
  const bump = (name: string) => void (calls[name] = (calls[name] ?? 0) + 1);
  const check = (ok: boolean, what: string) => {
    if (!ok) violations.push(what);
  };
  const handlers: ProviderHandlers = {
    provision(request) {
      bump('provision');
      check(LABEL.test(request.product) && LABEL.test(request.plan) && REGION.test(request.region), `provision got unchecked labels ${JSON.stringify([request.product, request.plan, request.region])}`);
      check(Object.getPrototypeOf(request.features) === null, 'provision features have a prototype');
      check(Object.values(request.features).every((v) => ['string', 'number', 'boolean'].includes(typeof v)), 'provision features hold a non-primitive');
      check(!hasPoisonedKey(request.features) && !hasPoisonedKey(request.body), 'provision got a poisoned key');
      return `Your ${request.plan} bonnet is ready`;
    },
    changePlan(request) {
      bump('changePlan');
      check(LABEL.test(request.plan), 'changePlan got an unchecked plan');
      check(request.features === undefined || (Object.getPrototypeOf(request.features) === null && !hasPoisonedKey(request.features)), 'changePlan features unsafe');
      return 'Plan changed';
    },
    deprovision() {
      bump('deprovision');
    },
    provisionCredentials() {
      bump('provisionCredentials');
      return { credentials: { BONNETS_URL: 'https://user:pw@bonnets.example/1' } };
    },
    deprovisionCredentials() {
      bump('deprovisionCredentials');
    },
    measures() {
      bump('measures');
      return { 'bonnet-hours': 1 };
    },
  };
  const router = marketplaceRouter({
    handlers,
    store: memoryStore(),
    catalog: CATALOG,
    masterKey: signer.masterPublicKey,
    // Callback headers are checked against the connector's origin; nothing is ever sent (no handler answers 202).
    connector: { url: 'http://127.0.0.1:9', clientId: 'fuzz-client', clientSecret: 'fuzz-secret' },
    outbox: false,
    logger: false,
    ...options.router,
  });
  const app = express();
  if (options.queryParser !== undefined) app.set('query parser', options.queryParser);
  app.use(router);
  app.use((_req, res) => void res.status(404).json({ message: 'host app: not found' }));
  const target = await listen(app);

  function sign(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}) {
    const bytes = body === undefined ? Buffer.alloc(0) : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const given = { ...headers };
    if (bytes.length > 0 && given['content-type'] === undefined) given['content-type'] = 'application/json';
    const signed = signer.sign({ method, url: path, host: target.host, headers: given, body: bytes });
    return { headers: Object.entries(signed), body: bytes };
  }

  return {
    target,
    signer,
    app,
    calls,
    totalCalls: () => Object.values(calls).reduce((a, b) => a + b, 0),
    violations,
    sign,
    send: (method, path, body, headers) => {
      const signed = sign(method, path, body, headers);
      return sendRaw(target, { method, path, headers: signed.headers, body: signed.body });
    },
    close: async () => {
      await target.close();
      await router.close();
    },
  };
}

/** A valid provisioning body for `id`, as entries so that tests can edit it. */
export function provisionEntries(id: string, plan = 'small'): [string, string][] {
  return [['id', JSON.stringify(id)], ['product', '"bonnets"'], ['plan', JSON.stringify(plan)], ['region', '"aws::us-east-1"'], ['features', '{"size":3}']];
}
