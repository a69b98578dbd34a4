/**
 * SKIP and NOT CHECKED: a case the suite could not make never passes, and a feature the provider
 * says it does not have is skipped with its own words as the reason.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createProviderApp } from '../../examples/provider-app.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { CASES, formatCase, formatSummary, runAcceptance, type AcceptanceOptions, type AcceptanceReport } from '../../src/testkit/acceptance/index.js';
import { ssoNotConfigured } from '../../src/testkit/acceptance/features.js';
import { listen } from '../helpers/http.js';
import { CLIENT, explain, failedIds, idsWith, runAgainstToy } from './helpers/harness.js';

const SSO = ['sso.reused-code', 'sso.sign-in', 'sso.tampered'];
const SETTINGS = { product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', conflictRegion: 'all::global' } as const;

/** The example provider without a connector: marketplaceRouter without `sso`, as a provider without single sign-on runs it. */
async function againstExampleWithoutSso(extra: Partial<AcceptanceOptions> = {}): Promise<AcceptanceReport> {
  const master = generateKeyPair();
  const provider = await createProviderApp({ STORE: 'memory', MASTER_PUBLIC_KEY: master.publicKey, LOG_LEVEL: 'silent' });
  const target = await listen(provider.app);
  try {
    return await runAcceptance({ url: target.url, masterPrivateKey: master.privateKey, ...SETTINGS, ...CLIENT, ...extra });
  } finally {
    await target.close();
    await provider.close();
  }
}

describe('a provider without single sign-on', () => {
  it('gets every SSO case skipped with the router\'s own answer as the reason, and the run still passes', async () => {
    const report = await againstExampleWithoutSso();
    assert.deepEqual(failedIds(report), [], explain(report));
    assert.deepEqual(idsWith(report, 'skipped'), SSO);
    for (const id of SSO) {
      const result = report.cases.find((c) => c.id === id);
      assert.match(result?.detail ?? '', /^GET \/v1\/sso answered 404 "Single sign-on is not configured on this provider \(marketplaceRouter options \\"sso\\" and \\"connector\\"\)": the provider has no single sign-on configured.*--require sso makes this a failure/, id);
      assert.equal(result?.passed, false);
    }
    // What was observed stays in the report: the 404 that says so.
    assert.equal(report.cases.find((c) => c.id === 'sso.sign-in')?.response?.status, 404);
    assert.equal(report.passed, true);
    assert.deepEqual(report.summary, { total: CASES.length, passed: CASES.length - 4, failed: 0, skipped: 3, notChecked: 1 });
    const summary = formatSummary(report, { color: false });
    assert.match(summary, /^32 cases: 28 passed, 0 failed, 3 skipped, 1 not checked in [\d.]+ s\nNo failure: the provider answers like the marketplace expects in every case checked\.\nNot checked \(see why above\): provision\.conflict-product\nSkipped: sso\.sign-in, sso\.tampered, sso\.reused-code$/);
    assert.match(formatCase(report.cases.find((c) => c.id === 'sso.tampered')!, { color: false }), /^SKIP {2}a tampered resource_id is refused \(sso\.tampered\)\n {6}skipped: GET \/v1\/sso answered 404/);
  });

  it('fails every SSO case with require: [\'sso\']', async () => {
    const report = await againstExampleWithoutSso({ require: ['sso'] });
    assert.deepEqual(failedIds(report), SSO);
    assert.equal(report.passed, false);
    assert.deepEqual(report.settings.required, ['sso']);
    for (const id of SSO) assert.match(report.cases.find((c) => c.id === id)?.detail ?? '', /Single sign-on is not configured.*--require sso/, id);
  });

  it('with a bare 404 at /v1/sso (no route, nothing said about single sign-on): sign-in fails with a hint, and the refusal cases are not checked, never passed', async () => {
    const report = await runAgainstToy({ noSsoRoute: true });
    assert.deepEqual(failedIds(report), ['sso.sign-in'], explain(report));
    assert.match(report.cases.find((c) => c.id === 'sso.sign-in')?.detail ?? '', /^answered 404; expected 303 \(or 302\) to the dashboard\. If the provider has no single sign-on, answer 404 \{"message": "Single sign-on is not configured …"\} \(the suite then skips these cases\) or pass --exclude sso$/);
    assert.deepEqual(idsWith(report, 'not-checked'), ['sso.reused-code', 'sso.tampered']);
    for (const id of ['sso.reused-code', 'sso.tampered']) {
      const result = report.cases.find((c) => c.id === id);
      assert.equal(result?.response?.status, 404, `${id} was still sent`);
      assert.match(result?.detail ?? '', /a valid sign-in failed too \(sso\.sign-in\).*fix sso\.sign-in first/);
    }
  });

  it('recognises "not configured" answers by status and message, and nothing else', () => {
    const answer = (status: number, body: unknown) => ({ status, json: typeof body === 'string' ? undefined : body, text: typeof body === 'string' ? body : JSON.stringify(body) });
    const yes = [
      answer(404, { message: 'Single sign-on is not configured on this provider (marketplaceRouter options "sso" and "connector")' }),
      answer(404, 'SSO is not enabled for this service'),
      answer(501, { message: 'Single sign on not supported' }),
      answer(404, { message: 'sso: disabled' }),
    ];
    const no = [
      answer(404, '<!DOCTYPE html><pre>Cannot GET /v1/sso</pre>'),
      answer(404, { message: 'Resource not found' }),
      answer(404, { message: 'Single sign-on failed: the code is unknown' }),
      answer(401, { message: 'Single sign-on is not configured' }),
      answer(500, 'SSO not configured'),
    ];
    for (const a of yes) assert.ok(ssoNotConfigured(a) !== undefined, a.text);
    for (const a of no) assert.equal(ssoNotConfigured(a), undefined, a.text);
  });
});

describe('cases whose check could not be made', () => {
  it('a conflict with a made-up region the provider refuses as unknown is NOT CHECKED; a made-up one it answers 409 for passes', async () => {
    const example = await againstExampleWithoutSso({ conflictRegion: undefined, exclude: ['sso'] });
    assert.deepEqual(idsWith(example, 'not-checked'), ['provision.conflict-product', 'provision.conflict-region']);
    assert.match(example.cases.find((c) => c.id === 'provision.conflict-region')?.detail ?? '', /^answered 400: region nowhere::acceptance-other is made up.*pass --conflict-region with a second value from your catalog/);
    // The toy compares properties before its catalog: its 409 for a made-up product proves the check.
    const toy = await runAgainstToy({}, { conflictProduct: undefined, conflictRegion: undefined });
    assert.deepEqual(idsWith(toy, 'not-checked'), []);
    assert.equal(toy.cases.find((c) => c.id === 'provision.conflict-product')?.response?.status, 409);
    assert.equal(toy.cases.find((c) => c.id === 'provision.conflict-product')?.status, 'passed');
  });

  it('a plan conflict without --new-plan uses a made-up plan: NOT CHECKED when refused as unknown', async () => {
    const report = await againstExampleWithoutSso({ newPlan: undefined, exclude: ['plan-change', 'sso'] });
    assert.deepEqual(failedIds(report), [], explain(report));
    assert.match(report.cases.find((c) => c.id === 'provision.conflict-plan')?.detail ?? '', /^answered 400: plan acceptance-unknown-plan is made up.*--new-plan/);
    assert.equal(report.cases.find((c) => c.id === 'provision.conflict-plan')?.status, 'not-checked');
  });

  it('a provider that refuses every signed request gets no PASS for the signature cases: their 401 proves nothing', async () => {
    // The suite signs with a master key the provider does not trust.
    const report = await runAgainstToy({}, { masterPrivateKey: generateKeyPair().privateKey });
    const signature = ['signature.bad', 'signature.future-date', 'signature.missing', 'signature.stale-date', 'signature.tampered'];
    assert.deepEqual(idsWith(report, 'not-checked').filter((id) => id.startsWith('signature.')), signature);
    for (const id of signature) {
      assert.match(report.cases.find((c) => c.id === id)?.detail ?? '', /^refused as expected, but the valid request it is a variant of \(provision\.new\) was refused too \(401\): a refusal proves nothing while the valid request fails; fix provision\.new first$/, id);
    }
    assert.equal(report.cases.find((c) => c.id === 'provision.new')?.status, 'failed');
    assert.deepEqual(idsWith(report, 'passed').filter((id) => id.startsWith('signature.')), []);
  });

  it('a provider with no credential routes (a JSON 404 for all of them) gets no PASS for the unknown-resource case', async () => {
    const report = await runAgainstToy({ noCredentialRoutes: true });
    assert.deepEqual(failedIds(report), ['credentials.new'], explain(report));
    assert.equal(report.cases.find((c) => c.id === 'credentials.unknown-resource')?.status, 'not-checked');
    assert.match(report.cases.find((c) => c.id === 'credentials.unknown-resource')?.detail ?? '', /\(credentials\.new\) was refused too \(404\)/);
  });

  it('answers that are allowed but carry nothing to check are NOT CHECKED: a 204 to a credential repeat, a 204 for usage', async () => {
    const report = await runAgainstToy({ credentialRepeat204: true, measuresNoUsage: true });
    assert.deepEqual(failedIds(report), [], explain(report));
    assert.deepEqual(idsWith(report, 'not-checked'), ['credentials.repeat', 'measures.period']);
    assert.match(report.cases.find((c) => c.id === 'credentials.repeat')?.detail ?? '', /^answered 204, which a repeat may, but with no credentials/);
    assert.match(report.cases.find((c) => c.id === 'measures.period')?.detail ?? '', /^answered 204 \(no usage yet\), which is allowed: the shape of a usage report \(200\) could not be checked/);
    // 204 for usage still shows the route knows the resource: the refusal cases after it stand.
    assert.equal(report.cases.find((c) => c.id === 'measures.unknown-resource')?.status, 'passed');
  });

  it('a 404 for the credentials of a deleted resource proves nothing when every credential delete answers 404', async () => {
    const report = await runAgainstToy({ credentialDelete404: true });
    assert.deepEqual(failedIds(report), ['cleanup.credential', 'rotation.delete-old'], explain(report));
    assert.equal(report.cases.find((c) => c.id === 'cleanup.credentials-follow')?.status, 'not-checked');
    assert.match(report.cases.find((c) => c.id === 'cleanup.credentials-follow')?.detail ?? '', /no DELETE of a live credential set succeeded/);
  });

  it('counts not-checked cases apart in the summary, never as passed', () => {
    const base = { feature: 'provision', passed: false, expected: 'e', durationMs: 1 } as const;
    const report = {
      url: 'http://127.0.0.1:1', connectorUrl: 'http://127.0.0.1:2', startedAt: '', durationMs: 1200, passed: true,
      settings: { product: 'p', plan: 'q', newPlan: undefined, region: 'all::global', credential: 'multiple', excluded: [], required: [] },
      summary: { total: 4, passed: 1, failed: 0, skipped: 2, notChecked: 1 },
      callbacks: { expected: 0, acknowledged: 0, unacknowledged: [] },
      cases: [
        { ...base, id: 'a.pass', name: 'a', status: 'passed', passed: true },
        { ...base, id: 'b.skip', name: 'b', status: 'skipped', detail: 'not configured' },
        { ...base, id: 'c.skip', name: 'c', status: 'skipped', detail: 'not configured' },
        { ...base, id: 'd.unchecked', name: 'd', status: 'not-checked', detail: 'made up' },
      ],
    } satisfies AcceptanceReport;
    assert.equal(formatSummary(report, { color: false }), [
      '4 cases: 1 passed, 0 failed, 2 skipped, 1 not checked in 1.2 s',
      'No failure: the provider answers like the marketplace expects in every case checked.',
      'Not checked (see why above): d.unchecked',
      'Skipped: b.skip, c.skip',
    ].join('\n'));
    assert.equal(formatCase(report.cases[3]!, { color: false }), 'NOT CHECKED  d (d.unchecked)\n      expected  e\n      why not   made up');
    assert.ok(formatCase(report.cases[3]!, { color: true }).startsWith('\u001b[36mNOT CHECKED\u001b[0m'));
  });
});
