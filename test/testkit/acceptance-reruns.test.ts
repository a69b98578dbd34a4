/**
 * Re-runs against one running provider, and callbacks judged by their outcome: a provider that
 * keeps its connector token across runs, one that holds a token the fake connector never granted
 * and retries after the 401, one that does not retry, and one with the wrong client.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createProviderApp, type ProviderApp } from '../../examples/provider-app.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { formatSummary, runAcceptance, type AcceptanceReport } from '../../src/testkit/acceptance/index.js';
import { listen, type Running } from '../helpers/http.js';
import { waitFor } from '../helpers/processes.js';
import { CLIENT, explain, failedIds, freePort, runAgainstToy } from './helpers/harness.js';
import { createToyProvider } from './helpers/toy-provider.js';

const SETTINGS = { product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', conflictRegion: 'all::global' } as const;

describe('acceptance re-runs against one running provider that answers 202 and calls back', () => {
  const master = generateKeyPair();
  let connectorPort: number;
  let provider: ProviderApp;
  let target: Running;

  before(async () => {
    connectorPort = await freePort();
    provider = await createProviderApp({
      STORE: 'memory',
      MASTER_PUBLIC_KEY: master.publicKey,
      CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`,
      CONNECTOR_CLIENT_ID: CLIENT.clientId,
      CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret,
      EXAMPLE_ASYNC: '1',
      EXAMPLE_ASYNC_DELAY_MS: '20',
      LOG_LEVEL: 'silent',
    });
    target = await listen(provider.app);
  });
  after(async () => {
    await target.close();
    await provider.close();
  });

  /** The provider's outbox is empty: nothing is left retrying (a completing delivery goes in a moment). */
  const outboxDrained = () => waitFor('an empty outbox', async () => (await provider.marketplace.store.listDeliveries!()).length === 0);

  const run = (connector: FakeConnector): Promise<AcceptanceReport> =>
    runAcceptance({ url: target.url, masterPrivateKey: master.privateKey, ...SETTINGS, ...CLIENT, connector, callbackTimeoutMs: 30_000 });

  it('is green three times in a row, each run with its own fake connector on the same port, and leaves nothing retrying', async () => {
    for (const attempt of [1, 2, 3]) {
      // What the CLI does on every run: a new fake connector on --connector-port.
      const connector = createFakeConnector(CLIENT);
      await connector.listen(connectorPort);
      try {
        const report = await run(connector);
        assert.deepEqual(failedIds(report), [], `run ${attempt}:\n${explain(report)}`);
        assert.equal(report.passed, true, `run ${attempt}`);
        assert.deepEqual(report.callbacks.unacknowledged, [], `run ${attempt}: every 202 got its callback acknowledged`);
        assert.ok(report.callbacks.expected >= 8, `run ${attempt}: ${report.callbacks.expected} callbacks`);
        assert.deepEqual(connector.callbacks.filter((c) => c.status !== 204).map((c) => [c.id, c.status, c.authProblem]), [], `run ${attempt}: no callback refused`);
        const fetched = connector.tokenRequests.filter((t) => t.grantType === 'client_credentials').length;
        // The first run's token is kept by the provider and honoured by the later runs' fakes.
        if (attempt === 1) assert.ok(fetched >= 1, 'the first run saw the provider fetch a token');
        else assert.equal(fetched, 0, `run ${attempt}: the provider used the token it kept from run 1`);
        await outboxDrained();
      } finally {
        await connector.close();
      }
    }
  });

  it('passes with a note when the provider holds a token the fake refuses, gets a 401, fetches a new one and retries', async () => {
    const connector = createFakeConnector(CLIENT);
    await connector.listen(connectorPort);
    try {
      // A first run leaves the provider holding a token; revoked, it is one the connector refuses.
      assert.deepEqual(failedIds(await run(connector)), []);
      connector.revokeTokens();
      const report = await run(connector);
      assert.deepEqual(failedIds(report), [], explain(report));
      assert.equal(report.passed, true);
      const first = report.cases.find((c) => c.id === 'provision.new');
      assert.equal(first?.status, 'passed');
      assert.equal(first?.callback?.status, 204);
      assert.match(first?.detail ?? '', /^the callback was refused with 401 once \(a revoked token\), then the provider fetched a new token and retried, as it should$/);
      assert.deepEqual(connector.callbacks.filter((c) => c.status === 401).map((c) => c.authProblem), ['revoked']);
      assert.deepEqual(report.callbacks.unacknowledged, []);
      await outboxDrained();
    } finally {
      await connector.close();
    }
  });
});

describe('callbacks judged by their outcome', () => {
  const KEPT = 'fct1.0.zzzzzzzz.kept-from-an.earlier-run';

  it('a provider holding a token from elsewhere that retries after the 401 passes, with the 401 noted', async () => {
    const report = await runAgainstToy({}, { async: true, toy: { keepToken: true, initialToken: KEPT } });
    assert.deepEqual(failedIds(report), [], explain(report));
    const first = report.cases.find((c) => c.id === 'provision.new');
    assert.match(first?.detail ?? '', /refused with 401 once \(a token this fake connector did not grant, such as one kept from an earlier run\), then the provider fetched a new token and retried/);
    assert.equal(report.cases.filter((c) => /401/.test(c.detail ?? '')).length, 1, 'only the first callback met the kept token');
  });

  it('a provider that keeps a refused token and never retries fails, and the hint names the kept token, not the client', async () => {
    const report = await runAgainstToy({ noRetryOn401: true }, { async: true, toy: { keepToken: true, initialToken: KEPT }, callbackTimeoutMs: 500 });
    const first = report.cases.find((c) => c.id === 'provision.new');
    assert.equal(first?.status, 'failed');
    assert.equal(first?.callback?.status, 401);
    assert.match(first?.detail ?? '', /no callback was accepted within 1 s: 1 attempt\(s\) were refused with 401 \(a token this fake connector did not grant, such as one kept from an earlier run\) and the provider did not fetch a new token and retry\. It most likely kept a token from an earlier run or another connector: on a 401 a provider must drop its cached token, fetch a new one \(client_credentials\) and send the callback again \(docs\/connector\.md\); the client id and secret are not the cause/);
    assert.doesNotMatch(first?.detail ?? '', /CONNECTOR_CLIENT_SECRET/);
  });

  it('a provider with the wrong client secret fails at once, naming the client, without waiting out the callback timeout', { timeout: 120_000 }, async () => {
    // Ten minutes of callback timeout: only the early failure lets this test end.
    const report = await runAgainstToy({}, { async: true, toy: { clientSecret: 'not-the-secret-the-suite-was-given' }, callbackTimeoutMs: 600_000, exclude: ['credentials', 'plan-change', 'sso'] });
    const first = report.cases.find((c) => c.id === 'provision.new');
    assert.equal(first?.status, 'failed');
    assert.match(first?.detail ?? '', /^answered 202, but the fake connector refused the provider's client credentials \(401 invalid_client at POST \/v1\/oauth\/tokens\), so no callback can be authenticated: the provider's CONNECTOR_CLIENT_ID\/CONNECTOR_CLIENT_SECRET differ from --client-id\/--client-secret given here$/);
    assert.ok(report.durationMs < 600_000);
  });

  it('without client credentials (sso excluded) a provider that calls back fails at once, saying none were given', { timeout: 120_000 }, async () => {
    const master = generateKeyPair();
    const connectorPort = await freePort();
    const toy = await listen(createToyProvider({ masterKey: master.publicKey, connectorUrl: `http://127.0.0.1:${connectorPort}`, ...CLIENT, async: true }));
    try {
      const report = await runAcceptance({
        url: toy.url, masterPrivateKey: master.privateKey, product: 'widgets', plan: 'basic', region: 'aws::us-east-1',
        connectorPort, exclude: ['credentials', 'plan-change', 'sso'], callbackTimeoutMs: 600_000,
      });
      const first = report.cases.find((c) => c.id === 'provision.new');
      assert.equal(first?.status, 'failed');
      assert.match(first?.detail ?? '', /no --client-id\/--client-secret were given here, so the fake connector knows no client; pass the provider's CONNECTOR_CLIENT_ID and CONNECTOR_CLIENT_SECRET$/);
    } finally {
      await toy.close();
    }
  });

  it('a 202 whose callback never comes is counted apart, and the summary says the provider may still be retrying it', async () => {
    const report = await runAgainstToy({ asyncNoCallback: true }, { async: true, callbackTimeoutMs: 300 });
    assert.equal(report.passed, false);
    assert.deepEqual(report.callbacks.unacknowledged.map((u) => u.caseId), ['provision.new']);
    assert.equal(report.callbacks.acknowledged, report.callbacks.expected - 1);
    assert.match(formatSummary(report, { color: false }), /No callback came for 1 of \d+ 202 answer\(s\) \(provision\.new\): the provider may still be retrying them/);
  });

  it('waits, before closing the fake connector, for callbacks of 202s the cases did not wait for', async () => {
    // Refusals answered 202 fail at once; their "error" callbacks still land and are acknowledged.
    const report = await runAgainstToy({ async202ForErrors: true }, { async: true });
    assert.ok(report.callbacks.expected > 7);
    assert.deepEqual(report.callbacks.unacknowledged, []);
  });
});
