import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CASES } from '../../src/testkit/acceptance/index.js';
import { explain, failedIds, runAgainstToy } from './helpers/harness.js';
import type { ToyBugs } from './helpers/toy-provider.js';

interface Row {
  bug: keyof ToyBugs;
  mode?: { async?: boolean; credential?: 'single' | 'multiple' };
  /** Exactly the cases that must fail against a provider with this one bug. */
  fails: string[];
}

/**
 * Broken provider → the acceptance cases that must fail. Every case of the suite appears in some
 * row (checked below), so none of them passes vacuously.
 */
const TABLE: Row[] = [
  { bug: 'skipSignature', fails: ['signature.bad', 'signature.future-date', 'signature.missing', 'signature.stale-date', 'signature.tampered'] },
  { bug: 'ignoreDate', fails: ['signature.future-date', 'signature.stale-date'] },
  { bug: 'acceptFutureDate', fails: ['signature.future-date'] },
  { bug: 'conflictCreates', fails: ['provision.conflict-plan', 'provision.conflict-product', 'provision.conflict-region'] },
  { bug: 'ignoreRegionInCompare', fails: ['provision.conflict-region'] },
  { bug: 'noCatalogCheck', fails: ['plan-change.faulty-plan', 'provision.faulty-plan', 'provision.faulty-product', 'provision.faulty-region'] },
  { bug: 'repeatConflicts', fails: ['provision.repeat'] },
  { bug: 'credentialRepeatNewValues', fails: ['credentials.repeat'] },
  { bug: 'credentialUnknownResource201', fails: ['credentials.unknown-resource'] },
  { bug: 'sameCredentialsOnRotation', fails: ['rotation.new-set'] },
  { bug: 'sameCredentialsOnRotation', mode: { credential: 'single' }, fails: ['rotation.new-set'] },
  { bug: 'badCredentialKeys', fails: ['credentials.new'] },
  { bug: 'credentialDelete200', fails: ['cleanup.credential', 'rotation.delete-old'] },
  { bug: 'patchUnknown200', fails: ['plan-change.unknown-resource'] },
  { bug: 'measuresWrongShape', fails: ['measures.period'] },
  { bug: 'measuresUnknownEmpty', fails: ['measures.unknown-resource'] },
  { bug: 'measuresNoPeriodCheck', fails: ['measures.bad-period'] },
  { bug: 'ssoNoResourceCheck', fails: ['sso.sign-in', 'sso.tampered'] },
  { bug: 'ssoNoExchange', fails: ['sso.reused-code', 'sso.sign-in', 'sso.tampered'] },
  { bug: 'ssoNoCookie', fails: ['sso.sign-in'] },
  { bug: 'noSsoRoute', fails: ['sso.sign-in'] },
  { bug: 'noCredentialRoutes', fails: ['credentials.new'] },
  { bug: 'credentialDelete404', fails: ['cleanup.credential', 'rotation.delete-old'] },
  { bug: 'deleteAgain204', fails: ['cleanup.credential-again', 'cleanup.credentials-follow', 'cleanup.resource-again'] },
  { bug: 'resourceDeleteKeepsCredentials', fails: ['cleanup.credentials-follow'] },
  { bug: 'asyncNoCallback', mode: { async: true }, fails: ['provision.new'] },
  { bug: 'asyncCredentialsOnPlanChange', mode: { async: true }, fails: ['plan-change.change'] },
  { bug: 'asyncErrorOnDeprovision', mode: { async: true }, fails: ['cleanup.resource'] },
  { bug: 'async202ForErrors', mode: { async: true }, fails: ['plan-change.faulty-plan', 'provision.faulty-plan', 'provision.faulty-product', 'provision.faulty-region'] },
];

describe('acceptance suite against deliberately broken providers', () => {
  it('passes every case against the same provider without bugs (sync, async, single credentials)', async () => {
    for (const mode of [{}, { async: true }, { credential: 'single' as const }]) {
      const report = await runAgainstToy({}, mode);
      assert.deepEqual(failedIds(report), [], `${JSON.stringify(mode)}:\n${explain(report)}`);
      assert.equal(report.summary.skipped, 0);
      assert.equal(report.summary.passed, CASES.length);
      assert.equal(report.passed, true);
    }
  });

  for (const row of TABLE) {
    const label = `${row.bug}${row.mode === undefined ? '' : ` (${JSON.stringify(row.mode)})`}`;
    it(`${label} → fails ${row.fails.join(', ')}`, async () => {
      const report = await runAgainstToy({ [row.bug]: true }, { ...row.mode, ...(row.bug === 'asyncNoCallback' ? { callbackTimeoutMs: 600 } : {}) });
      assert.deepEqual(failedIds(report), [...row.fails].sort(), explain(report));
      assert.equal(report.passed, false);
      for (const failed of report.cases.filter((c) => c.status === 'failed')) {
        assert.ok(failed.detail !== undefined && failed.detail.length > 10, `${failed.id} says why it failed`);
        assert.ok(failed.expected.length > 0);
      }
    });
  }

  it('shows every case of the suite failing against at least one broken provider', () => {
    const covered = new Set(TABLE.flatMap((row) => row.fails));
    const vacuous = CASES.map((c) => c.id).filter((id) => !covered.has(id));
    assert.deepEqual(vacuous, [], 'cases that no broken provider makes fail');
  });
});
