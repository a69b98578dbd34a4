/**
 * Load: about 3,000 mixed signed operations (provision, repeat, plan change, credentials,
 * concurrent duplicates, deprovision) at concurrency 64 against the example provider process, on
 * SQLite and on PostgreSQL, while a concurrent stream of invalid requests (bad signatures, stale
 * and future dates, another host, no signature, malformed or invalid bodies, oversized bodies)
 * tries to get in. Must hold: no 5xx, every invalid request refused with 4xx JSON (bodies carrying
 * `__proto__`/`constructor` keys may instead be accepted with those keys dropped), and afterwards
 * the store and the handler counts match the requests sent: nothing lost, nothing done twice.
 *
 * LOAD_RESOURCES (default 520, about 5.75 operations each) scales it.
 */
import assert from 'node:assert/strict';
import { after, describe, it, type TestContext } from 'node:test';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';
import { startExample, stopAll, type ExampleProcess, type HandlerCalls } from '../helpers/processes.js';
import {
  figures,
  isErrorJson,
  marketplace,
  newId,
  postgresAdmin,
  postgresSkipReason,
  postgresUnderTest,
  sqliteUnderTest,
  type Answer,
  type Marketplace,
  type StoreUnderTest,
  type Target,
} from './helpers.js';

const RESOURCES = Number(process.env.LOAD_RESOURCES ?? 520);
const CONCURRENCY = 64;
const INVALID_WORKERS = 4;
const INVALID_REQUESTS = 400;

const pgSkip = await postgresSkipReason();
if (pgSkip !== false) console.log(`PostgreSQL load test skipped: ${pgSkip}`);
const admin = pgSkip === false ? postgresAdmin() : undefined;
after(async () => {
  await admin?.end();
});

type Handler = 'provision' | 'changePlan' | 'deprovision' | 'provisionCredentials' | 'deprovisionCredentials';

/** One resource's scripted life and what it must leave behind. */
interface Script {
  kind: 'lifecycle' | 'plan-change' | 'credential-cycle' | 'concurrent-duplicates';
  resourceId: string;
  credentialId: string;
  /** Handler calls it must cause, by handler and id. */
  calls: Partial<Record<Handler, Record<string, number>>>;
  final: { resource: { plan: string } | undefined; credential: boolean };
  /** Credential values answered to the marketplace, to compare with the store. */
  credentialValues?: string;
}

/** Limits requests in flight to `size`. */
function semaphore(size: number) {
  let free = size;
  const waiting: (() => void)[] = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (free === 0) await new Promise<void>((resolve) => waiting.push(resolve));
    else free--;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next === undefined) free++;
      else next();
    }
  };
}

interface Tally {
  sent: number;
  byStatus: Map<number, number>;
  unexpected: string[];
}

function runner(market: Marketplace, target: Target) {
  const limit = semaphore(CONCURRENCY);
  const tally: Tally = { sent: 0, byStatus: new Map(), unexpected: [] };
  async function send(method: string, path: string, body: unknown, expected: number | readonly number[]): Promise<Answer> {
    const answer = await limit(() => market.send(target, method, path, body));
    tally.sent++;
    tally.byStatus.set(answer.status, (tally.byStatus.get(answer.status) ?? 0) + 1);
    const allowed = typeof expected === 'number' ? [expected] : expected;
    if (!allowed.includes(answer.status)) tally.unexpected.push(`${method} ${path} → ${answer.status} ${answer.text.slice(0, 120)} (expected ${allowed.join('/')})`);
    return answer;
  }
  return { send, tally };
}

const provisionBody = (id: string) => ({ id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' });
const credentialsOf = (answer: Answer): string => JSON.stringify((answer.body as { credentials?: unknown } | undefined)?.credentials);

async function runScript(script: Script, send: ReturnType<typeof runner>['send'], problems: string[]): Promise<void> {
  const r = `/v1/resources/${script.resourceId}`;
  const c = `/v1/credentials/${script.credentialId}`;
  const credBody = { id: script.credentialId, resource_id: script.resourceId };
  const sameAnswers = (what: string, answers: Answer[], pick: (a: Answer) => string = (a) => a.text) => {
    if (new Set(answers.map(pick)).size !== 1) problems.push(`${what} ${script.resourceId}: repeated requests got different answers`);
  };
  switch (script.kind) {
    case 'lifecycle': {
      const first = await send('PUT', r, provisionBody(script.resourceId), 201);
      sameAnswers('provision repeat', [first, await send('PUT', r, provisionBody(script.resourceId), 201)]);
      await send('PATCH', r, { plan: 'large' }, 200);
      const cred = await send('PUT', c, credBody, 201);
      sameAnswers('credential repeat', [cred, await send('PUT', c, credBody, 201)], credentialsOf);
      await send('DELETE', r, undefined, 204);
      await send('DELETE', r, undefined, 404);
      return;
    }
    case 'plan-change': {
      await send('PUT', r, provisionBody(script.resourceId), 201);
      await send('PATCH', r, { plan: 'large' }, 200);
      await send('PATCH', r, { plan: 'large' }, 200);
      script.credentialValues = credentialsOf(await send('PUT', c, credBody, 201));
      return;
    }
    case 'credential-cycle': {
      await send('PUT', r, provisionBody(script.resourceId), 201);
      await send('PUT', c, credBody, 201);
      await send('DELETE', c, undefined, 204);
      await send('DELETE', c, undefined, 404);
      return;
    }
    case 'concurrent-duplicates': {
      const provisions = await Promise.all([1, 2, 3].map(() => send('PUT', r, provisionBody(script.resourceId), 201)));
      sameAnswers('concurrent provision', provisions);
      const creds = await Promise.all([1, 2, 3].map(() => send('PUT', c, credBody, 201)));
      sameAnswers('concurrent credentials', creds, credentialsOf);
      const deletes = await Promise.all([1, 2].map(() => send('DELETE', r, undefined, [204, 404])));
      const statuses = deletes.map((d) => d.status).sort();
      if (statuses.join() !== '204,404') problems.push(`concurrent deprovision ${script.resourceId}: ${statuses.join()} instead of one 204 and one 404`);
      return;
    }
  }
}

function makeScripts(run: string): Script[] {
  const kinds = ['lifecycle', 'plan-change', 'credential-cycle', 'concurrent-duplicates'] as const;
  return Array.from({ length: RESOURCES }, (_, i) => {
    const kind = kinds[i % kinds.length]!;
    const resourceId = `load-${run}-${i}`;
    const credentialId = `load-${run}-${i}-cred`;
    const one = (id: string) => ({ [id]: 1 });
    switch (kind) {
      case 'lifecycle':
        return { kind, resourceId, credentialId, final: { resource: undefined, credential: false },
          calls: { provision: one(resourceId), changePlan: one(resourceId), provisionCredentials: one(credentialId), deprovision: one(resourceId) } };
      case 'plan-change':
        return { kind, resourceId, credentialId, final: { resource: { plan: 'large' }, credential: true },
          calls: { provision: one(resourceId), changePlan: one(resourceId), provisionCredentials: one(credentialId) } };
      case 'credential-cycle':
        return { kind, resourceId, credentialId, final: { resource: { plan: 'small' }, credential: false },
          calls: { provision: one(resourceId), provisionCredentials: one(credentialId), deprovisionCredentials: one(credentialId) } };
      case 'concurrent-duplicates':
        return { kind, resourceId, credentialId, final: { resource: undefined, credential: false },
          calls: { provision: one(resourceId), provisionCredentials: one(credentialId), deprovision: one(resourceId) } };
    }
  });
}

/** The invalid stream: each request must be refused with a 4xx JSON message and change nothing. */
function invalidRequests(market: Marketplace, target: Target, run: string, victims: readonly string[]) {
  const stranger = createSigner({ masterPrivateKey: generateKeyPair().privateKey });
  const rfc3339 = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`;
  const results = { sent: 0, refused4xxJson: 0, byKind: new Map<string, number>(), wrong: [] as string[], fiveXx: 0, badIds: [] as string[] };

  async function rawSend(path: string, headers: Record<string, string>, body: string): Promise<Answer> {
    const response = await fetch(target.url + path, { method: 'PUT', headers, body, signal: AbortSignal.timeout(30_000) });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, body: parsed, text, contentType: response.headers.get('content-type') ?? '' };
  }

  const kinds: { name: string; send(n: number): Promise<Answer> }[] = [
    { name: 'tampered-body', async send(n) {
      // Signed for plan "large", sent with plan "locked", aimed at a live resource.
      const id = victims[n % victims.length]!;
      return market.send(target, 'PATCH', `/v1/resources/${id}`, { plan: 'large' }, { sendBody: JSON.stringify({ plan: 'locked' }) });
    } },
    { name: 'unknown-master-key', async send(n) {
      const id = `bad-${run}-${n}`;
      const body = JSON.stringify(provisionBody(id));
      const headers = stranger.sign({ method: 'PUT', url: `/v1/resources/${id}`, host: target.host, headers: { 'content-type': 'application/json' }, body });
      delete headers.host;
      return rawSend(`/v1/resources/${id}`, headers, body);
    } },
    { name: 'stale-date', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, provisionBody(`bad-${run}-${n}`), { date: rfc3339(Date.now() - 15 * 60_000) }) },
    { name: 'future-date', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, provisionBody(`bad-${run}-${n}`), { date: rfc3339(Date.now() + 15 * 60_000) }) },
    { name: 'unsigned', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, provisionBody(`bad-${run}-${n}`), { unsigned: true }) },
    { name: 'other-host', async send(n) {
      const id = `bad-${run}-${n}`;
      return market.send({ url: target.url, host: 'provider.evil.example' }, 'PUT', `/v1/resources/${id}`, provisionBody(id));
    } },
    { name: 'malformed-json', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, `{"id":"bad-${run}-${n}","product":`) },
    { name: 'schema-invalid', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, { id: `bad-${run}-${n}`, product: 'bonnets', plan: 'small', region: 42 }) },
    { name: 'unknown-plan', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, { ...provisionBody(`bad-${run}-${n}`), plan: 'platinum' }) },
    { name: 'id-mismatch', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, provisionBody(`bad-${run}-${n}-other`)) },
    { name: 'prototype-pollution', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, `{"id":"bad-${run}-${n}","product":"bonnets","plan":"small","region":"aws::us-east-1","features":{"__proto__":{"polluted":true}},"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}`) },
    { name: 'oversized-body', send: (n) => market.send(target, 'PUT', `/v1/resources/bad-${run}-${n}`, { ...provisionBody(`bad-${run}-${n}`), padding: 'x'.repeat(1_100_000) }) },
  ];

  async function worker(start: number): Promise<void> {
    for (let n = start; n < INVALID_REQUESTS; n += INVALID_WORKERS) {
      // Oversized bodies are costly to sign and send: one in 25.
      const kind = n % 25 === 24 ? kinds[kinds.length - 1]! : kinds[n % (kinds.length - 1)]!;
      results.sent++;
      results.byKind.set(kind.name, (results.byKind.get(kind.name) ?? 0) + 1);
      let answer: Answer;
      try {
        answer = await kind.send(n);
      } catch (error) {
        results.wrong.push(`${kind.name} #${n}: no answer (${(error as Error).message})`);
        continue;
      }
      if (answer.status >= 500) results.fiveXx++;
      if (answer.status >= 400 && answer.status < 500 && isErrorJson(answer)) {
        results.refused4xxJson++;
      } else if (kind.name === 'prototype-pollution' && answer.status === 201) {
        // Valid once the dangerous keys are dropped: accepted is right as long as nothing was
        // polluted, which the store check and the test process check afterwards.
        results.badIds.push(`bad-${run}-${n}`);
      } else {
        results.wrong.push(`${kind.name} #${n}: ${answer.status} ${answer.text.slice(0, 120)}`);
      }
    }
  }
  return { results, run: () => Promise.all(Array.from({ length: INVALID_WORKERS }, (_, i) => worker(i))) };
}

async function loadScenario(t: TestContext, store: StoreUnderTest): Promise<void> {
  const market = marketplace();
  const provider: ExampleProcess = await startExample({ ...store.env, MASTER_PUBLIC_KEY: market.masterPublicKey, LOG_LEVEL: 'error' }, { name: `${store.kind} example`, timeoutMs: 30_000 });
  t.after(() => stopAll([provider]));
  const run = newId('r').slice(2);
  const scripts = makeScripts(run);
  const problems: string[] = [];
  const { send, tally } = runner(market, provider);
  const invalid = invalidRequests(market, provider, run, scripts.filter((s) => s.kind === 'plan-change').map((s) => s.resourceId));

  const started = Date.now();
  let next = 0;
  const lane = async () => {
    while (next < scripts.length) await runScript(scripts[next++]!, send, problems);
  };
  await Promise.all([...Array.from({ length: CONCURRENCY }, lane), invalid.run()]);
  const elapsedMs = Date.now() - started;

  // Handler counts against the requests sent: once per operation, never for a refused request.
  const calls: HandlerCalls = await provider.handlerCalls();
  let doubled = 0;
  let missingCalls = 0;
  for (const script of scripts) {
    for (const [handler, byId] of Object.entries(script.calls)) {
      for (const [id, expected] of Object.entries(byId)) {
        const actual = calls[handler]?.[id] ?? 0;
        if (actual > expected) doubled++;
        if (actual < expected) missingCalls++;
        if (actual !== expected) problems.push(`${handler}(${id}) ran ${actual} times, expected ${expected}`);
      }
    }
  }
  const expectedTotal = scripts.reduce((n, s) => n + Object.values(s.calls).reduce((m, byId) => m + Object.keys(byId).length, 0), 0) + invalid.results.badIds.length;
  const actualTotal = Object.values(calls).reduce((n, byId) => n + Object.values(byId).reduce((m, k) => m + k, 0), 0);
  if (actualTotal !== expectedTotal) problems.push(`handlers ran ${actualTotal} times in all, expected ${expectedTotal}`);
  const exit = await provider.stop();
  if (exit.code !== 0) problems.push(`the example exited with ${exit.code ?? exit.signal}: ${provider.stderr().slice(-500)}`);

  // The store against the requests sent.
  const reopened = await store.open();
  let lost = 0;
  try {
    for (const script of scripts) {
      const resource = await reopened.getResource(script.resourceId);
      const credential = await reopened.getCredential(script.credentialId);
      const wantResource = script.final.resource;
      if (wantResource === undefined ? resource !== undefined : resource?.plan !== wantResource.plan) {
        lost++;
        problems.push(`${script.kind} ${script.resourceId}: resource ${JSON.stringify(resource?.plan)} in the store, expected ${JSON.stringify(wantResource?.plan)}`);
      }
      if ((credential !== undefined) !== script.final.credential) {
        lost++;
        problems.push(`${script.kind} ${script.credentialId}: credential ${credential === undefined ? 'missing' : 'present'}`);
      }
      if (script.credentialValues !== undefined && credential !== undefined && JSON.stringify(credential.values) !== script.credentialValues) {
        problems.push(`${script.credentialId}: stored credential values differ from the ones answered`);
      }
    }
    for (let n = 0; n < INVALID_REQUESTS; n++) {
      const id = `bad-${run}-${n}`;
      if (!invalid.results.badIds.includes(id) && (await reopened.getResource(id)) !== undefined) problems.push(`an invalid request created ${id}`);
    }
    for (const id of invalid.results.badIds) {
      const resource = await reopened.getResource(id);
      if (resource === undefined || Object.keys(resource.features).length !== 0) problems.push(`${id}: dangerous keys reached the stored features`);
    }
    if ((await reopened.listPendingOperations(10)).length > 0) problems.push('operations left pending');
    if ((await reopened.listDeliveries()).length > 0) problems.push('deliveries left in the outbox');
  } finally {
    await reopened.close();
  }
  if ((await store.count('operations')) !== 0) problems.push('operation claims left in the store');

  const fiveXx = [...tally.byStatus].filter(([s]) => s >= 500).reduce((n, [, k]) => n + k, 0) + invalid.results.fiveXx;
  figures(t, `load (${store.kind})`, {
    resources: scripts.length,
    operations: tally.sent,
    concurrency: CONCURRENCY,
    statuses: [...tally.byStatus].sort(([a], [b]) => a - b).map(([s, k]) => `${s}:${k}`).join(','),
    invalidSent: invalid.results.sent,
    invalidRefused4xxJson: invalid.results.refused4xxJson,
    invalidKinds: invalid.results.byKind.size,
    pollutionBodiesAccepted: invalid.results.badIds.length,
    '5xx': fiveXx,
    lost: lost + missingCalls,
    doubled,
    elapsedMs,
  });
  assert.deepEqual(tally.unexpected.slice(0, 20), [], 'every valid request got its expected status');
  assert.deepEqual(invalid.results.wrong.slice(0, 20), [], 'every invalid request was refused with a 4xx JSON message');
  assert.deepEqual(problems.slice(0, 20), []);
  assert.equal(fiveXx, 0);
}

describe('load: mixed signed operations with a concurrent stream of invalid requests', () => {
  it('SQLite', async (t) => {
    const store = sqliteUnderTest({ memoryBacked: true });
    t.after(() => store.cleanup());
    await loadScenario(t, store);
  });

  it('PostgreSQL', { skip: pgSkip }, async (t) => {
    const store = postgresUnderTest(admin!);
    t.after(() => store.cleanup());
    await loadScenario(t, store);
  });
});
