import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createProviderApp, type ProviderApp } from '../../examples/provider-app.js';
import { InvalidOptionsError } from '../../src/errors.js';
import { createFakeConnector } from '../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import {
  CASES,
  formatCase,
  formatSummary,
  runAcceptance,
  shouldColor,
  type AcceptanceOptions,
  type AcceptanceReport,
} from '../../src/testkit/acceptance/index.js';
import { listen, type Running } from '../helpers/http.js';
import { explain, failedIds, freePort, idsWith, runAgainstToy } from './helpers/harness.js';

const CLIENT = { clientId: 'example-client-id', clientSecret: 'example-client-secret-3f9a1c' };
const SETTINGS = { product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', conflictRegion: 'all::global' } as const;

async function startExample(masterPublicKey: string, connectorUrl: string, asyncMode: boolean): Promise<{ provider: ProviderApp; target: Running }> {
  const provider = await createProviderApp({
    STORE: 'memory',
    MASTER_PUBLIC_KEY: masterPublicKey,
    CONNECTOR_URL: connectorUrl,
    ...CLIENT,
    CONNECTOR_CLIENT_ID: CLIENT.clientId,
    CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret,
    LOG_LEVEL: 'silent',
    ...(asyncMode ? { EXAMPLE_ASYNC: '1', EXAMPLE_ASYNC_DELAY_MS: '50' } : {}),
  });
  return { provider, target: await listen(provider.app) };
}

describe('acceptance suite against the example provider', () => {
  it('passes every case when the provider answers at once (fake connector on a given port)', async () => {
    const master = generateKeyPair();
    const connectorPort = await freePort();
    const { provider, target } = await startExample(master.publicKey, `http://127.0.0.1:${connectorPort}`, false);
    try {
      const seen: string[] = [];
      const report = await runAcceptance({ url: target.url, masterPrivateKey: master.privateKey, ...SETTINGS, ...CLIENT, connectorPort, onCase: (c) => seen.push(c.id) });
      assert.deepEqual(failedIds(report), [], explain(report));
      // The example sells one product: the product conflict cannot be made, and says so.
      assert.deepEqual(idsWith(report, 'not-checked'), ['provision.conflict-product']);
      assert.equal(report.summary.passed, CASES.length - 1);
      assert.equal(report.summary.notChecked, 1);
      assert.equal(report.summary.skipped, 0);
      assert.equal(report.passed, true);
      assert.equal(report.connectorUrl, `http://127.0.0.1:${connectorPort}`);
      assert.deepEqual(seen, report.cases.map((c) => c.id), 'onCase saw every case in order');
      assert.equal(report.cases.some((c) => c.callback !== undefined), false, 'a synchronous provider sends no callbacks');
    } finally {
      await target.close();
      await provider.close();
    }
  });

  describe('when every operation answers 202 and completes through a callback', () => {
    const master = generateKeyPair();
    const connector = createFakeConnector(CLIENT);
    const codes: string[] = [];
    let report: AcceptanceReport;
    let printed = '';
    let example: { provider: ProviderApp; target: Running };

    before(async () => {
      const { url } = await connector.listen();
      const issue = connector.issueSsoCode.bind(connector);
      connector.issueSsoCode = (grant) => {
        const code = issue(grant);
        codes.push(code);
        return code;
      };
      example = await startExample(master.publicKey, url, true);
      report = await runAcceptance({
        url: `${example.target.url}/v1`,
        masterPrivateKey: master.privateKey,
        ...SETTINGS,
        ...CLIENT,
        connector,
        callbackTimeoutMs: 5000,
        onCase: (c) => (printed += `${formatCase(c, { color: false })}\n`),
        onProgress: (note) => (printed += `${note}\n`),
      });
      printed += formatSummary(report, { color: false });
    });
    after(async () => {
      await example.target.close();
      await example.provider.close();
      await connector.close();
    });

    it('passes every case, judging each callback', () => {
      assert.deepEqual(failedIds(report), [], explain(report));
      assert.equal(report.summary.passed, CASES.length - 1);
      assert.deepEqual(idsWith(report, 'not-checked'), ['provision.conflict-product']);
      assert.deepEqual(report.callbacks.unacknowledged, [], 'every 202 got its callback acknowledged');
      assert.equal(report.callbacks.acknowledged, report.callbacks.expected);
      assert.ok(report.callbacks.expected >= 8, `${report.callbacks.expected} 202 answers`);
      const withCallback = report.cases.filter((c) => c.callback !== undefined).map((c) => c.id);
      for (const id of ['provision.new', 'credentials.new', 'rotation.new-set', 'rotation.delete-old', 'plan-change.change', 'cleanup.credential', 'cleanup.resource']) {
        assert.ok(withCallback.includes(id), `${id} waited for its callback`);
      }
      assert.equal(report.cases.find((c) => c.id === 'provision.new')?.response?.status, 202);
      assert.equal(report.url, example.target.url, 'a trailing /v1 on the URL is ignored');
    });

    it('keeps credential values, SSO codes, session ids and the client secret out of the report and the output', () => {
      const values = connector.callbacks.flatMap((c) => Object.values((c.body as { credentials?: Record<string, string> }).credentials ?? {}));
      assert.ok(values.length >= 3, 'credential values went through callbacks');
      assert.ok(codes.length >= 2);
      const json = JSON.stringify(report);
      for (const secret of [...values, ...codes, CLIENT.clientSecret]) {
        assert.equal(json.includes(secret), false, 'report leaks a secret');
        assert.equal(printed.includes(secret), false, 'output leaks a secret');
      }
      assert.match(json, /bonnets\.sid=<redacted>/);
      assert.equal(/s%3A/.test(json), false, 'no signed session id');
      assert.match(json, /"x-signature":"<redacted>"/);
      assert.match(printed, /<redacted: \d+ chars>/);
    });

    it('prints a pass line with the request, the answer and what was expected for each case', () => {
      assert.match(printed, /PASS {2}provisions a new resource \(provision\.new\)\n {6}request {3}PUT http:\/\/127\.0\.0\.1:\d+\/v1\/resources\/[0-9a-z]{29} \{"id":/);
      assert.match(printed, /answer {4}202 \{"message":"Knitting your bonnet"\}/);
      assert.match(printed, /callback {2}[0-9a-z]{29} → 204 \{"state":"done"/);
      assert.match(printed, /expected {2}409 with a JSON \{"message"\}/);
      assert.match(printed, /NOT CHECKED {2}the same id with another product conflicts \(provision\.conflict-product\)\n(?: {6}.*\n)* {6}why not {3}answered 400: product acceptance-other-product is made up.*--conflict-product/);
      assert.doesNotMatch(printed, /PASS {2}the same id with another product conflicts/);
      assert.match(printed, /32 cases: 31 passed, 0 failed, 0 skipped, 1 not checked in [\d.]+ s\nNo failure: .*\nNot checked \(see why above\): provision\.conflict-product$/);
      assert.equal(printed.includes('\u001b['), false, 'no colors when asked for none');
    });
  });
});

describe('runAcceptance options', () => {
  const base: AcceptanceOptions = { url: 'http://127.0.0.1:9', masterPrivateKey: generateKeyPair().privateKey, product: 'bonnets', plan: 'small', newPlan: 'large', ...CLIENT };

  it('refuses wrong options with a hint before sending anything', async () => {
    const cases: [Partial<AcceptanceOptions> & Record<string, unknown>, RegExp][] = [
      [{ product: undefined }, /"product" and "plan" are required/],
      [{ newPlan: undefined }, /--new-plan.*plan-change/],
      [{ clientSecret: undefined }, /--client-id, --client-secret.*single sign-on \(the sso feature.*callbacks of long-running operations \(a 202 answer.*exclude sso/],
      [{ require: ['credentials'] as unknown as AcceptanceOptions['require'] }, /"require" lists optional features among sso/],
      [{ require: ['sso'], exclude: ['sso'] }, /"require" names sso, which is excluded/],
      [{ regoin: 'all::global' }, /unknown option "regoin" \(did you mean "region"\?\)/],
      [{ region: 'us-east-1' }, /platform::location/],
      [{ exclude: ['sso', 'billing'] as unknown as AcceptanceOptions['exclude'] }, /features among provision/],
      [{ credential: 'many' as 'single' }, /"single" or "multiple"/],
      [{ newPlan: 'small' }, /must differ/],
      [{ url: 'localhost:4567' }, /http\(s\) URL/],
    ];
    for (const [override, message] of cases) {
      await assert.rejects(runAcceptance({ ...base, ...override }), (err: unknown) => err instanceof InvalidOptionsError && message.test(err.message), JSON.stringify(override));
    }
  });

  it('needs neither a second plan nor client credentials when plan-change and sso are excluded, and skips what depends on an excluded feature', async () => {
    const report = await runAgainstToy({}, { newPlan: undefined, clientId: undefined, clientSecret: undefined, exclude: ['plan-change', 'sso', 'credentials'] });
    assert.deepEqual(failedIds(report), [], explain(report));
    assert.deepEqual(report.settings.excluded, ['credentials', 'credential-rotation', 'plan-change', 'sso']);
    const features = new Set(report.cases.map((c) => c.feature));
    assert.deepEqual([...features].sort(), ['cleanup', 'provision', 'resource-measures']);
    const skipped = report.cases.filter((c) => c.status === 'skipped').map((c) => c.id).sort();
    assert.deepEqual(skipped, ['cleanup.credential', 'cleanup.credential-again', 'cleanup.credentials-follow']);
    assert.equal(report.cases.find((c) => c.id === 'provision.conflict-plan')?.status, 'passed', 'the plan conflict runs with a made-up plan');
  });

  it('reports an unreachable provider as failures, not as a crash', async () => {
    const report = await runAcceptance({ ...base, url: `http://127.0.0.1:${await freePort()}`, exclude: ['sso'], requestTimeoutMs: 2000 });
    assert.equal(report.passed, false);
    assert.match(report.cases[0]?.detail ?? '', /connection refused: is the provider running/);
  });
});

describe('terminal colors', () => {
  it('colors only a TTY, and never with NO_COLOR', () => {
    assert.equal(shouldColor({ isTTY: true }, {}), true);
    assert.equal(shouldColor({ isTTY: false }, {}), false);
    assert.equal(shouldColor({}, {}), false);
    assert.equal(shouldColor({ isTTY: true }, { NO_COLOR: '1' }), false);
    assert.equal(shouldColor({ isTTY: false }, { FORCE_COLOR: '1' }), true);
    const failed = { id: 'x.y', feature: 'provision', name: 'n', status: 'failed', passed: false, expected: 'e', detail: 'why', durationMs: 1 } as const;
    assert.ok(formatCase(failed, { color: true }).includes('\u001b[31mFAIL'));
    assert.equal(formatCase(failed, { color: false }).includes('\u001b'), false);
  });
});
