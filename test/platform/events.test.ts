import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import supertest from 'supertest';
import { InvalidOptionsError, NotFoundError, ServiceUnavailableError } from '../../src/errors.js';
import {
  eventSecretHeader,
  eventSecretPath,
  marketplaceEvents,
  MemorySeenEventStore,
  type SeenEventClaim,
  type SeenEventStore,
  type MarketplaceEventContext,
  type MarketplaceEventsOptions,
  type ResourceEventData,
} from '../../src/platform/index.js';
import { capturedLogger, listen, manualClock } from './helpers.js';
import { deferred } from '../outbox/helpers.js';

interface Delivered {
  type: string;
  data: ResourceEventData;
  context: MarketplaceEventContext;
}

async function withReceiver(
  options: Partial<MarketplaceEventsOptions> & { mount?: 'post' | 'use'; before?: express.RequestHandler },
  run: (ctx: { post: (type: string | undefined, body: unknown, headers?: Record<string, string>) => supertest.Test; delivered: Delivered[]; logs: ReturnType<typeof capturedLogger>; url: string }) => Promise<void>,
): Promise<void> {
  const delivered: Delivered[] = [];
  const logs = capturedLogger();
  const { mount = 'post', before, ...rest } = options;
  const record = (type: string) => (data: ResourceEventData, context: MarketplaceEventContext) => {
    delivered.push({ type, data, context });
  };
  const receiver = marketplaceEvents({
    handlers: { 'resource:provisioned': record('resource:provisioned'), 'resource:deprovisioned': record('resource:deprovisioned') },
    logger: logs.logger,
    verify: false,
    ...rest,
  });
  const app = express();
  if (before !== undefined) app.use(before);
  if (mount === 'post') app.post('/v1/events', receiver);
  else app.use('/v1/events', receiver);
  const running = await listen(app);
  const post = (type: string | undefined, body: unknown, headers: Record<string, string> = {}) => {
    const req = supertest(running.url).post('/v1/events').set('User-Agent', 'Marketplace-Publisher/1.2.3').set('X-Marketplace-Request', '1234567890123456789');
    if (type !== undefined) req.set('X-Marketplace-Event', type);
    req.set(headers);
    if (typeof body === 'string') return req.set('Content-Type', headers['Content-Type'] ?? 'application/json').send(body);
    return req.send(body as object);
  };
  try {
    await run({ post, delivered, logs, url: running.url });
  } finally {
    await running.close();
  }
}

const envelope = (event: string, resource_id = 'r-1', subject = 'u-alice') => ({ event, version: 1, data: { resource_id, subject } });

describe('marketplaceEvents: dispatch', () => {
  it('hands resource:provisioned to its handler with {resource_id, subject}', async () => {
    await withReceiver({}, async ({ post, delivered }) => {
      const res = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { message: 'Event processed' });
      assert.equal(delivered.length, 1);
      assert.deepEqual(delivered[0]?.data, { resource_id: 'r-1', subject: 'u-alice' });
      assert.equal(delivered[0]?.context.type, 'resource:provisioned');
      assert.equal(delivered[0]?.context.version, 1);
      assert.equal(delivered[0]?.context.requestId, '1234567890123456789');
    });
  });

  it('relies on the header: the sample deprovisioned body says "resource:deprovision"', async () => {
    await withReceiver({}, async ({ post, delivered }) => {
      const res = await post('resource:deprovisioned', envelope('resource:deprovision'));
      assert.equal(res.status, 200);
      assert.deepEqual(delivered.map((d) => d.type), ['resource:deprovisioned']);
    });
  });

  it('never dispatches on the body field', async () => {
    await withReceiver({}, async ({ post, delivered }) => {
      await post('resource:provisioned', envelope('resource:deprovisioned'));
      assert.deepEqual(delivered.map((d) => d.type), ['resource:provisioned']);
    });
  });

  it('acknowledges unknown types with 200 and ignores them, whatever the body', async () => {
    await withReceiver({}, async ({ post, delivered, logs }) => {
      for (const [type, body] of [
        ['resource:resized', envelope('resource:resized')],
        ['credential:rotated', 'not json at all'],
        ['RESOURCE:PROVISIONED', envelope('resource:provisioned')],
      ] as const) {
        const res = await post(type, body);
        assert.equal(res.status, 200, type);
        assert.deepEqual(res.body, { message: 'Event type not handled; ignored' });
      }
      assert.equal(delivered.length, 0);
      assert.match(logs.text(), /acknowledged and ignored/);
    });
  });

  it('acknowledges a known type that has no handler configured', async () => {
    const seen: string[] = [];
    await withReceiver({ handlers: { 'resource:provisioned': (d) => void seen.push(d.resource_id) } }, async ({ post }) => {
      const res = await post('resource:deprovisioned', envelope('resource:deprovisioned'));
      assert.equal(res.status, 200);
      assert.deepEqual(seen, []);
    });
  });

  it('accepts an envelope without version as version 1, and passes another integer version on', async () => {
    await withReceiver({}, async ({ post, delivered }) => {
      await post('resource:provisioned', { event: 'resource:provisioned', data: { resource_id: 'a', subject: 's' } });
      await post('resource:provisioned', { event: 'resource:provisioned', version: 2, data: { resource_id: 'b', subject: 's', extra: true } });
      assert.deepEqual(delivered.map((d) => d.context.version), [1, 2]);
    });
  });

  it('answers 405 to other methods when mounted with app.use', async () => {
    await withReceiver({ mount: 'use' }, async ({ url }) => {
      const res = await supertest(url).get('/v1/events');
      assert.equal(res.status, 405);
      assert.equal(res.headers.allow, 'POST');
      assert.equal(typeof res.body.message, 'string');
    });
  });
});

describe('marketplaceEvents: bad deliveries', () => {
  const cases: [string, string | undefined, unknown, number, RegExp, Record<string, string>?][] = [
    ['no X-Marketplace-Event header', undefined, envelope('resource:provisioned'), 400, /X-Marketplace-Event header is required/],
    ['an empty X-Marketplace-Event header', '', envelope('resource:provisioned'), 400, /X-Marketplace-Event header is required/],
    ['a body that is not JSON', 'resource:provisioned', '{"event":', 400, /not valid JSON/],
    ['a JSON array', 'resource:provisioned', '[1]', 400, /must be a JSON object/],
    ['no data', 'resource:provisioned', { event: 'resource:provisioned', version: 1 }, 400, /no data object/],
    ['no resource_id', 'resource:provisioned', { version: 1, data: { subject: 's' } }, 400, /resource_id/],
    ['an empty resource_id', 'resource:provisioned', { version: 1, data: { resource_id: '', subject: 's' } }, 400, /resource_id/],
    ['a numeric subject', 'resource:deprovisioned', { version: 1, data: { resource_id: 'r', subject: 7 } }, 400, /subject/],
    ['a string version', 'resource:provisioned', { version: '1', data: { resource_id: 'r', subject: 's' } }, 400, /version must be an integer/],
    ['a non-JSON content type', 'resource:provisioned', 'resource_id=r', 415, /application\/json/, { 'Content-Type': 'application/x-www-form-urlencoded' }],
  ];
  for (const [name, type, body, status, message, headers] of cases) {
    it(`refuses ${name} with ${status} JSON`, async () => {
      await withReceiver({}, async ({ post, delivered }) => {
        const res = await post(type, body, headers);
        assert.equal(res.status, status);
        assert.match(res.headers['content-type'] ?? '', /^application\/json/);
        assert.match(res.body.message, message);
        assert.equal(delivered.length, 0);
      });
    });
  }

  it('answers 413 JSON for a body over maxBodyBytes', async () => {
    await withReceiver({ maxBodyBytes: 100 }, async ({ post, delivered }) => {
      const big = { version: 1, data: { resource_id: 'r', subject: 's', padding: 'x'.repeat(200) } };
      const res = await post('resource:provisioned', big);
      assert.equal(res.status, 413);
      assert.match(res.body.message, /too large/);
      assert.equal(delivered.length, 0);
    });
  });
});

/**
 * Signals when the n-th delivery has passed verify(): from there the receiver reaches its in-flight
 * check within the same tick, so waiting one macrotask more makes the overlap certain.
 */
function arrivalOf(n: number): { verify: () => boolean; arrived: Promise<void> } {
  let count = 0;
  let signal!: () => void;
  const arrived = new Promise<void>((resolve) => {
    signal = resolve;
  }).then(() => new Promise<void>((resolve) => setImmediate(resolve)));
  return {
    verify: () => {
      count += 1;
      if (count === n) signal();
      return true;
    },
    arrived,
  };
}

/**
 * Two copies of one delivery, the copy arriving while the first is held in its handler. Once the
 * copy has arrived the first handler call ends as `first` says (returns, or throws); any later
 * call returns at once. `check` gets both answers, `post` for more, and the handler's call count.
 */
async function overlappingCopies(
  first: 'returns' | 'throws',
  check: (ctx: { answers: [supertest.Response, supertest.Response]; post: (type: string, body: unknown) => supertest.Test; calls: () => number }) => Promise<void>,
): Promise<void> {
  let calls = 0;
  const entered = deferred();
  const gate = deferred();
  const handler = async () => {
    calls += 1;
    if (calls > 1) return;
    entered.resolve();
    await gate.promise;
    if (first === 'throws') throw new Error('failed');
  };
  const second = arrivalOf(2);
  await withReceiver({ handlers: { 'resource:provisioned': handler }, verify: second.verify }, async ({ post }) => {
    const original = post('resource:provisioned', envelope('resource:provisioned')).then((r) => r);
    await entered.promise;
    const copy = post('resource:provisioned', envelope('resource:provisioned')).then((r) => r);
    await second.arrived;
    gate.resolve();
    await check({ answers: await Promise.all([original, copy]), post, calls: () => calls });
  });
}

describe('marketplaceEvents: duplicates and retries', () => {
  it('delivers the same type, resource and subject once within the window', async () => {
    const clock = manualClock();
    await withReceiver({ now: clock.now, dedupeWindowMs: 60_000 }, async ({ post, delivered }) => {
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned'))).status, 200);
      const again = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(again.status, 200);
      assert.deepEqual(again.body, { message: 'Duplicate event; already processed' });
      assert.equal(delivered.length, 1);

      // Any difference is another event.
      await post('resource:provisioned', envelope('resource:provisioned', 'r-1', 'u-bob'));
      await post('resource:provisioned', envelope('resource:provisioned', 'r-2', 'u-alice'));
      await post('resource:deprovisioned', envelope('resource:deprovisioned'));
      assert.equal(delivered.length, 4);

      clock.advance(59_999);
      await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(delivered.length, 4, 'still inside the window');
      clock.advance(1);
      await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(delivered.length, 5, 'the window has passed');
    });
  });

  it('delivers every copy when dedupeWindowMs is 0', async () => {
    await withReceiver({ dedupeWindowMs: 0 }, async ({ post, delivered }) => {
      await post('resource:provisioned', envelope('resource:provisioned'));
      await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(delivered.length, 2);
    });
  });

  it('answers 500 when the handler fails, and the retry reaches the handler again', async () => {
    let calls = 0;
    const handler = () => {
      calls += 1;
      if (calls === 1) throw new Error('database down');
    };
    await withReceiver({ handlers: { 'resource:provisioned': handler } }, async ({ post, logs }) => {
      const first = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(first.status, 500);
      assert.deepEqual(first.body, { message: 'Internal error' });
      assert.match(logs.text(), /so that the marketplace retries/);
      const retry = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(retry.status, 200);
      assert.deepEqual(retry.body, { message: 'Event processed' });
      const duplicate = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.deepEqual(duplicate.body, { message: 'Duplicate event; already processed' });
      assert.equal(calls, 2);
    });
  });

  it('lets a copy arriving during the first delivery share its outcome instead of running twice', async () => {
    await overlappingCopies('returns', async ({ answers: [a, b], calls }) => {
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.equal(calls(), 1);
    });
  });

  it('answers 500 even when the handler throws a 4xx MarketplaceError', async () => {
    const handler = () => {
      throw new NotFoundError('No such tenant');
    };
    await withReceiver({ handlers: { 'resource:deprovisioned': handler } }, async ({ post }) => {
      const res = await post('resource:deprovisioned', envelope('resource:deprovisioned'));
      assert.equal(res.status, 500);
      assert.deepEqual(res.body, { message: 'Internal error' });
    });
  });

  it('fails a copy that shared a failed delivery, so both are retried', async () => {
    await overlappingCopies('throws', async ({ answers: [a, b], post, calls }) => {
      assert.equal(a.status, 500);
      assert.equal(b.status, 500);
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned'))).status, 200);
      assert.equal(calls(), 2);
    });
  });

  it('uses a given seenStore: claim before the handler, complete after it (which may be asynchronous)', async () => {
    const calls: string[] = [];
    const inner = new MemorySeenEventStore();
    const seenStore: SeenEventStore = {
      claim: async (key, claim) => {
        calls.push('claim');
        return inner.claim(key, claim);
      },
      complete: async (key, owner, expiresAt) => {
        calls.push(`complete ${expiresAt}`);
        return inner.complete(key, owner, expiresAt);
      },
      release: async (key, owner) => {
        calls.push('release');
        return inner.release(key, owner);
      },
    };
    const clock = manualClock();
    await withReceiver({ seenStore, now: clock.now, dedupeWindowMs: 1000 }, async ({ post, delivered }) => {
      await post('resource:provisioned', envelope('resource:provisioned'));
      await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(delivered.length, 1);
      assert.deepEqual(calls, ['claim', `complete ${clock.now() + 1000}`, 'claim']);
    });
  });

  it('releases the claim when the handler fails, so the retry runs it', async () => {
    const released: string[] = [];
    const inner = new MemorySeenEventStore();
    const seenStore: SeenEventStore = {
      claim: (key, claim) => inner.claim(key, claim),
      complete: (key, owner, expiresAt) => inner.complete(key, owner, expiresAt),
      release: async (key, owner) => {
        released.push(key);
        return inner.release(key, owner);
      },
    };
    let fail = true;
    await withReceiver(
      {
        seenStore,
        handlers: {
          'resource:provisioned': () => {
            if (fail) throw new Error('database down');
          },
        },
      },
      async ({ post }) => {
        assert.equal((await post('resource:provisioned', envelope('resource:provisioned'))).status, 500);
        assert.equal(released.length, 1);
        fail = false;
        assert.deepEqual((await post('resource:provisioned', envelope('resource:provisioned'))).body, { message: 'Event processed' });
        assert.deepEqual((await post('resource:provisioned', envelope('resource:provisioned'))).body, { message: 'Duplicate event; already processed' });
      },
    );
  });

  it('answers 503 with Retry-After while another instance holds the claim, without calling the handler', async () => {
    const busy: SeenEventClaim = { outcome: 'busy', leaseExpiresAt: Date.now() + 60_000 };
    const seenStore: SeenEventStore = {
      claim: async () => busy,
      complete: async () => assert.fail('nothing to complete'),
      release: async () => assert.fail('nothing to release'),
    };
    await withReceiver({ seenStore }, async ({ post, delivered }) => {
      const res = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(res.status, 503);
      assert.equal(res.headers['retry-after'], '1');
      assert.match(res.body.message, /being handled/);
      assert.equal(delivered.length, 0);
    });
  });

  it('renews the claim every half lease while the handler runs, and stops when it ends', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const claims: number[] = [];
    const inner = new MemorySeenEventStore();
    const seenStore: SeenEventStore = {
      claim: (key, claim) => {
        claims.push(claim.leaseExpiresAt - claim.now);
        return inner.claim(key, claim);
      },
      complete: (key, owner, expiresAt) => inner.complete(key, owner, expiresAt),
      release: (key, owner) => inner.release(key, owner),
    };
    const running = deferred();
    const gate = deferred();
    const receiver = marketplaceEvents({
      verify: false,
      logger: false,
      seenStore,
      claimLeaseMs: 10_000,
      handlers: {
        'resource:provisioned': async () => {
          running.resolve();
          await gate.promise;
        },
      },
    });
    const app = express();
    app.post('/v1/events', receiver);
    const answer = supertest(app).post('/v1/events').set('X-Marketplace-Event', 'resource:provisioned').send(envelope('resource:provisioned')).then((res) => res);
    await running.promise;
    t.mock.timers.tick(5_000);
    t.mock.timers.tick(5_000);
    gate.resolve();
    assert.equal((await answer).status, 200);
    t.mock.timers.tick(20_000);
    assert.deepEqual(claims, [10_000, 10_000, 10_000], 'the first claim and two renewals, none after the end');
  });

  it('answers 503 when the seen-event store is unreachable, without calling the handler', async () => {
    const seenStore: SeenEventStore = {
      claim: async () => {
        throw new ServiceUnavailableError();
      },
      complete: async () => undefined,
      release: async () => undefined,
    };
    await withReceiver({ seenStore }, async ({ post, delivered, logs }) => {
      const res = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(res.status, 503);
      assert.equal(res.headers['retry-after'], '1');
      assert.equal(delivered.length, 0);
      assert.match(logs.text(), /the seen-event store failed/);
      assert.doesNotMatch(logs.text(), /answering 500/);
      assert.doesNotMatch(logs.text(), /the handler failed/);
    });
  });

  it('MemorySeenEventStore: one claim wins, a lapsed claim can be taken over, done keys expire', async () => {
    const clock = manualClock();
    const store = new MemorySeenEventStore({ now: clock.now });
    const at = clock.now();
    assert.deepEqual(await store.claim('k', { owner: 'a', now: at, leaseExpiresAt: at + 100 }), { outcome: 'claimed' });
    assert.deepEqual(await store.claim('k', { owner: 'b', now: at, leaseExpiresAt: at + 100 }), { outcome: 'busy', leaseExpiresAt: at + 100 });
    assert.deepEqual(await store.claim('k', { owner: 'b', now: at + 100, leaseExpiresAt: at + 200 }), { outcome: 'claimed' }, 'lapsed: taken over');
    await store.complete('k', 'b', at + 1000);
    assert.deepEqual(await store.claim('k', { owner: 'c', now: at + 999, leaseExpiresAt: at + 1100 }), { outcome: 'done' });
    assert.deepEqual(await store.claim('k', { owner: 'c', now: at + 1000, leaseExpiresAt: at + 1100 }), { outcome: 'claimed' }, 'expired');
  });

  it('MemorySeenEventStore stays within maxEntries by forgetting the oldest handled deliveries, never a running claim', async () => {
    const clock = manualClock();
    const store = new MemorySeenEventStore({ maxEntries: 2, now: clock.now });
    const at = clock.now();
    const lease = { owner: 'a', now: at, leaseExpiresAt: at + 1000 };
    await store.claim('running', lease);
    await store.claim('old', lease);
    await store.complete('old', 'a', at + 5000);
    await store.claim('new', lease);
    await store.complete('new', 'a', at + 5000);
    assert.equal(store.size, 2);
    assert.deepEqual(await store.claim('running', { ...lease, owner: 'b' }), { outcome: 'busy', leaseExpiresAt: at + 1000 });
    assert.deepEqual(await store.claim('new', { ...lease, owner: 'b' }), { outcome: 'done' });
  });
});

describe('marketplaceEvents: ready verifiers', () => {
  const SECRET = 'f'.repeat(20) + '0123456789abcdef';

  it('eventSecretHeader accepts the secret (or any of a rotation list) and refuses a wrong or missing one with 401', async () => {
    const verify = eventSecretHeader({ header: 'X-Events-Secret', secret: ['old-secret-0123456789', SECRET] });
    await withReceiver({ verify }, async ({ post, delivered }) => {
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned', 'r-1'), { 'X-Events-Secret': SECRET })).status, 200);
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned', 'r-2'), { 'X-Events-Secret': 'old-secret-0123456789' })).status, 200);
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned', 'r-3'), { 'X-Events-Secret': SECRET.slice(1) })).status, 401);
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned', 'r-4'))).status, 401);
      assert.deepEqual(delivered.map((d) => d.data.resource_id), ['r-1', 'r-2']);
    });
  });

  it('eventSecretPath accepts the secret as the last path segment only', async () => {
    const receiver = marketplaceEvents({ verify: eventSecretPath({ secret: SECRET }), logger: false, handlers: { 'resource:provisioned': () => undefined } });
    const app = express();
    app.post('/v1/events/:secret', receiver);
    const send = (path: string) =>
      supertest(app).post(path).set('X-Marketplace-Event', 'resource:provisioned').send(envelope('resource:provisioned'));
    assert.equal((await send(`/v1/events/${SECRET}`)).status, 200);
    assert.equal((await send(`/v1/events/${SECRET}?x=1`)).status, 200);
    assert.equal((await send('/v1/events/not-the-secret')).status, 401);
  });

  it('forged deliveries never reach the seen store: they cannot flush the de-duplication window', async () => {
    const store = new MemorySeenEventStore({ maxEntries: 5 });
    const verify = eventSecretHeader({ secret: SECRET });
    await withReceiver({ verify, seenStore: store }, async ({ post, delivered }) => {
      const headers = { 'X-Marketplace-Secret': SECRET };
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned', 'r-real'), headers)).status, 200);
      for (let i = 0; i < 20; i += 1) {
        assert.equal((await post('resource:provisioned', envelope('resource:provisioned', `forged-${i}`))).status, 401);
      }
      assert.equal(store.size, 1);
      const redelivery = await post('resource:provisioned', envelope('resource:provisioned', 'r-real'), headers);
      assert.deepEqual(redelivery.body, { message: 'Duplicate event; already processed' });
      assert.equal(delivered.length, 1);
    });
  });

  it('refuses short secrets and odd header names at construction', () => {
    assert.throws(() => eventSecretHeader({ secret: 'short' }), /at least 16 characters/);
    assert.throws(() => eventSecretHeader({ secret: SECRET, header: 'bad header' }), /header name/);
    assert.throws(() => eventSecretPath({ secret: '' }), /secret/);
  });
});

describe('marketplaceEvents: verification hook', () => {
  it('refuses with 401 when verify answers false; the handler is not called', async () => {
    await withReceiver({ verify: () => false }, async ({ post, delivered }) => {
      const res = await post('resource:provisioned', envelope('resource:provisioned'));
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, { message: 'Event delivery could not be verified' });
      assert.equal(delivered.length, 0);
    });
  });

  it('gives verify the request and the raw body bytes', async () => {
    const bodies: string[] = [];
    const verify = (req: express.Request, body: Buffer) => {
      bodies.push(body.toString('utf8'));
      return req.headers['x-receiver-secret'] === 'shared';
    };
    await withReceiver({ verify }, async ({ post, delivered }) => {
      const raw = JSON.stringify(envelope('resource:provisioned'));
      assert.equal((await post('resource:provisioned', raw, { 'X-Receiver-Secret': 'shared' })).status, 200);
      assert.equal((await post('resource:provisioned', raw, { 'X-Receiver-Secret': 'guess' })).status, 401);
      assert.deepEqual(bodies, [raw, raw]);
      assert.equal(delivered.length, 1);
    });
  });

  it('answers 500 when verify throws (a retry may succeed)', async () => {
    await withReceiver(
      {
        verify: () => {
          throw new Error('key service down');
        },
      },
      async ({ post }) => {
        assert.equal((await post('resource:provisioned', envelope('resource:provisioned'))).status, 500);
      },
    );
  });

  it('works after express.json(), but refuses to run verify without the raw body', async () => {
    await withReceiver({ before: express.json() }, async ({ post, delivered }) => {
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned'))).status, 200);
      assert.equal(delivered.length, 1);
    });
    await withReceiver({ before: express.json(), verify: () => true }, async ({ post, logs }) => {
      assert.equal((await post('resource:provisioned', envelope('resource:provisioned'))).status, 500);
      assert.match(logs.text(), /mount marketplaceEvents\(\) before express.json\(\)/);
    });
  });
});

describe('marketplaceEvents: options are checked at construction', () => {
  const ok = { handlers: { 'resource:provisioned': () => undefined }, verify: false };
  const cases: [string, unknown, RegExp][] = [
    ['no handlers', { verify: false }, /handlers/],
    ['no verify', { handlers: ok.handlers }, /option "verify" is required.*eventSecretHeader.*eventSecretPath.*verify: false/],
    ['a verify that is neither a function nor false', { handlers: ok.handlers, verify: true }, /option "verify" is required/],
    ['a has/add seenStore', { ...ok, seenStore: { has: () => false, add: () => undefined } }, /claim, complete and release.*no longer accepted/],
    ['an empty handlers object', { handlers: {}, verify: false }, /needs at least one of resource:provisioned, resource:deprovisioned/],
    ['a misspelled event type', { handlers: { 'resource:provision': () => undefined }, verify: false }, /unknown option "resource:provision" \(did you mean "resource:provisioned"\?\)/],
    ['a non-function handler', { handlers: { 'resource:provisioned': 'log' }, verify: false }, /must be a function/],
    ['a negative window', { ...ok, dedupeWindowMs: -1 }, /dedupeWindowMs/],
    ['a fractional body limit', { ...ok, maxBodyBytes: 1.5 }, /maxBodyBytes/],
    ['a seenStore without release', { ...ok, seenStore: { claim: () => undefined, complete: () => undefined } }, /seenStore/],
    ['a misspelled option', { ...ok, dedupWindowMs: 5 }, /did you mean "dedupeWindowMs"/],
  ];
  for (const [name, options, message] of cases) {
    it(`throws InvalidOptionsError for ${name}`, () => {
      assert.throws(() => marketplaceEvents(options as MarketplaceEventsOptions), (error: unknown) => {
        assert.ok(error instanceof InvalidOptionsError);
        assert.match(error.message, message);
        return true;
      });
    });
  }
});
