import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectorError, InvalidOptionsError, MarketplaceError } from '../../src/errors.js';
import { createMarketplaceGraphQLClient, MarketplaceGraphQLError, type MarketplaceGraphQLClientOptions } from '../../src/platform/index.js';

const API_TOKEN = 'platform-api-token-5d1e9f0c7a';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: { query: string; variables: Record<string, unknown> };
}

type Responder = (received: Received, res: ServerResponse) => void;

/** A stand-in for the marketplace's GraphQL endpoint on a loopback port. */
async function fakeMarketplace(): Promise<{ url: string; received: Received[]; respond: (responder: Responder) => void; close(): Promise<void> }> {
  const received: Received[] = [];
  let responder: Responder = (_r, res) => res.end();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const entry: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: text === '' ? ({} as Received['body']) : JSON.parse(text) };
      received.push(entry);
      responder(entry, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    received,
    respond: (next) => {
      responder = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function rejection(promise: Promise<unknown>): Promise<ConnectorError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ConnectorError, `expected a ConnectorError, got ${String(error)}`);
    assert.ok(error instanceof MarketplaceError);
    assert.ok(!error.message.includes(API_TOKEN));
    assert.ok(!JSON.stringify(error).includes(API_TOKEN));
    return error;
  }
  assert.fail('expected a rejection');
}

describe('marketplace GraphQL client', () => {
  let fake: Awaited<ReturnType<typeof fakeMarketplace>>;
  let client: ReturnType<typeof createMarketplaceGraphQLClient>;
  before(async () => {
    fake = await fakeMarketplace();
    client = createMarketplaceGraphQLClient({ endpoint: fake.url, apiToken: API_TOKEN, timeoutMs: 2000 });
  });
  after(() => fake.close());

  it('createProfileAuthToken posts the mutation with the platform API token as Bearer', async () => {
    fake.respond((_r, res) => json(res, 200, { data: { createProfileAuthToken: { data: { token: 'mkt-token-1' } } } }));
    const result = await client.createProfileAuthToken('u-alice');
    assert.deepEqual(result, { token: 'mkt-token-1' });
    const sent = fake.received.at(-1)!;
    assert.equal(sent.method, 'POST');
    assert.equal(sent.url, '/graphql');
    assert.equal(sent.headers.authorization, `Bearer ${API_TOKEN}`);
    assert.match(sent.headers['content-type'] ?? '', /^application\/json/);
    assert.match(sent.body.query, /mutation\b[\s\S]*createProfileAuthToken\(input: \$input\)[\s\S]*data \{ token \}/);
    assert.deepEqual(sent.body.variables, { input: { profileId: 'u-alice' } });
  });

  it('updateProfileSubject sends {id, subject} and returns the profile', async () => {
    fake.respond((_r, res) => json(res, 200, { data: { updateProfileSubject: { data: { id: 'prof-1', subject: 'user-42' } } } }));
    const profile = await client.updateProfileSubject({ id: 'u-alice', subject: 'user-42', irreversible: true });
    assert.deepEqual(profile, { id: 'prof-1', subject: 'user-42' });
    const sent = fake.received.at(-1)!;
    assert.match(sent.body.query, /updateProfileSubject\(input: \$input\)/);
    assert.deepEqual(sent.body.variables, { input: { id: 'u-alice', subject: 'user-42' } });
  });

  it('updateProfileSubject refuses to run without the irreversible confirmation', async () => {
    const before = fake.received.length;
    for (const input of [{ id: 'u', subject: 's' }, { id: 'u', subject: 's', irreversible: false }, { id: 'u', subject: 's', irreversible: 'yes' }, undefined]) {
      await assert.rejects(
        // @ts-expect-error the confirmation is required by the type as well
        client.updateProfileSubject(input),
        (error: unknown) => error instanceof TypeError && /irreversible: true/.test(error.message),
      );
    }
    await assert.rejects(client.updateProfileSubject({ id: '', subject: 's', irreversible: true }), TypeError);
    await assert.rejects(client.createProfileAuthToken(''), TypeError);
    assert.equal(fake.received.length, before, 'nothing was sent');
  });

  it('surfaces a GraphQL errors array as MarketplaceGraphQLError (ERR_GRAPHQL)', async () => {
    const errors = [
      { message: 'profile not found', path: ['createProfileAuthToken'], extensions: { type: 'NotFound' } },
      { message: 'second problem' },
    ];
    for (const status of [200, 400]) {
      fake.respond((_r, res) => json(res, status, { data: null, errors }));
      const error = await rejection(client.createProfileAuthToken('nobody'));
      assert.ok(error instanceof MarketplaceGraphQLError);
      assert.equal(error.code, 'ERR_GRAPHQL');
      assert.equal(error.upstreamStatus, status);
      assert.deepEqual(error.errors, errors);
      assert.match(error.message, /profile not found/);
    }
  });

  const failures: [string, Responder, string, number | undefined][] = [
    ['401', (_r, res) => json(res, 401, { message: 'bad token' }), 'ERR_CONNECTOR_AUTH', 401],
    ['403', (_r, res) => json(res, 403, {}), 'ERR_CONNECTOR_AUTH', 403],
    ['500 with an HTML body', (_r, res) => res.writeHead(500, { 'Content-Type': 'text/html' }).end('<h1>oops</h1>'), 'ERR_CONNECTOR_RESPONSE', 500],
    ['200 that is not JSON', (_r, res) => res.writeHead(200).end('not json'), 'ERR_CONNECTOR_RESPONSE', 200],
    ['200 without data', (_r, res) => json(res, 200, {}), 'ERR_CONNECTOR_RESPONSE', 200],
    ['200 with a null payload', (_r, res) => json(res, 200, { data: { createProfileAuthToken: null } }), 'ERR_CONNECTOR_RESPONSE', 200],
    ['200 without token', (_r, res) => json(res, 200, { data: { createProfileAuthToken: { data: {} } } }), 'ERR_CONNECTOR_RESPONSE', 200],
    ['an empty errors array and no data', (_r, res) => json(res, 200, { errors: [] }), 'ERR_CONNECTOR_RESPONSE', 200],
  ];
  for (const [name, responder, code, upstreamStatus] of failures) {
    it(`answers ${name} with ${code}`, async () => {
      fake.respond(responder);
      const error = await rejection(client.createProfileAuthToken('u-alice'));
      assert.equal(error.code, code);
      assert.equal(error.upstreamStatus, upstreamStatus);
    });
  }

  it('times out with ERR_TIMEOUT when the marketplace does not answer', async () => {
    const slow = createMarketplaceGraphQLClient({ endpoint: fake.url, apiToken: API_TOKEN, timeoutMs: 100 });
    fake.respond(() => undefined); // never answers; close() ends the connection
    const error = await rejection(slow.createProfileAuthToken('u-alice'));
    assert.equal(error.code, 'ERR_TIMEOUT');
    assert.match(error.message, /within 100 ms/);
  });

  it('answers ERR_CONNECTOR_UNREACHABLE when nothing listens', async () => {
    const gone = await fakeMarketplace();
    await gone.close();
    const error = await rejection(createMarketplaceGraphQLClient({ endpoint: gone.url, apiToken: API_TOKEN }).createProfileAuthToken('u'));
    assert.equal(error.code, 'ERR_CONNECTOR_UNREACHABLE');
  });

  it('does not follow a redirect, so the token is never sent elsewhere', async () => {
    const elsewhere = await fakeMarketplace();
    try {
      fake.respond((_r, res) => res.writeHead(307, { Location: elsewhere.url }).end());
      const error = await rejection(client.createProfileAuthToken('u-alice'));
      assert.equal(error.code, 'ERR_CONNECTOR_RESPONSE');
      assert.equal(error.upstreamStatus, 307);
      assert.equal(elsewhere.received.length, 0);
    } finally {
      await elsewhere.close();
    }
  });

  it('uses an injected fetch', async () => {
    const calls: string[] = [];
    const fetchStub: typeof fetch = async (input) => {
      calls.push(String(input));
      return new Response(JSON.stringify({ data: { createProfileAuthToken: { data: { token: 'stub' } } } }), { status: 200 });
    };
    const stubbed = createMarketplaceGraphQLClient({ endpoint: 'https://marketplace.example/graphql', apiToken: API_TOKEN, fetch: fetchStub });
    assert.deepEqual(await stubbed.createProfileAuthToken('u'), { token: 'stub' });
    assert.deepEqual(calls, ['https://marketplace.example/graphql']);
  });
});

describe('marketplace GraphQL client: options', () => {
  const valid: MarketplaceGraphQLClientOptions = { endpoint: 'https://marketplace.example/graphql', apiToken: API_TOKEN };
  const cases: [string, unknown, RegExp][] = [
    ['no endpoint', { apiToken: API_TOKEN }, /"endpoint" is required/],
    ['a relative endpoint', { ...valid, endpoint: '/graphql' }, /absolute URL/],
    ['plain http to a remote host', { ...valid, endpoint: 'http://marketplace.example/graphql' }, /must use https/],
    ['no apiToken', { endpoint: valid.endpoint }, /"apiToken" is required/],
    ['an apiToken with a newline', { ...valid, apiToken: 'a\nb' }, /whitespace/],
    ['a zero timeout', { ...valid, timeoutMs: 0 }, /timeoutMs/],
    ['a misspelled option', { ...valid, apiKey: 'x' }, /unknown option "apiKey"/],
  ];
  for (const [name, options, message] of cases) {
    it(`throws InvalidOptionsError for ${name}`, () => {
      assert.throws(() => createMarketplaceGraphQLClient(options as MarketplaceGraphQLClientOptions), (error: unknown) => {
        assert.ok(error instanceof InvalidOptionsError);
        assert.match(error.message, message);
        assert.ok(!error.message.includes(API_TOKEN));
        return true;
      });
    });
  }

  it('allows plain http on loopback', () => {
    for (const endpoint of ['http://127.0.0.1:9/graphql', 'http://localhost/graphql', 'http://[::1]:8080/graphql']) {
      assert.doesNotThrow(() => createMarketplaceGraphQLClient({ endpoint, apiToken: API_TOKEN }));
    }
  });
});
