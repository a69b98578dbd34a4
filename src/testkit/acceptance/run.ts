import { randomBytes } from 'node:crypto';
import { InvalidOptionsError } from '../../errors.js';
import { asOptionsObject, optionalFunction, optionalPositiveNumber, rejectUnknownKeys, requireNonEmptyString } from '../../lib/options.js';
import { createFakeConnector, type FakeConnector } from '../fake-connector.js';
import { generateKeyPair } from '../keys.js';
import { createSigner } from '../signer.js';
import { RunContext, type Settings } from './context.js';
import { cleanupFeature, credentialsFeature, DATE_SKEW_MS, measuresFeature, planChangeFeature, provisionFeature, rotationFeature, ssoFeature } from './features.js';
import { ProviderClient } from './http.js';
import { FEATURE_DEPENDENCIES, FEATURES, OPTIONAL_FEATURES, type AcceptanceOptions, type AcceptanceReport, type Feature, type OptionalFeature } from './types.js';

const FACTORY = 'runAcceptance';
const KNOWN = [
  'url', 'masterPrivateKey', 'product', 'plan', 'newPlan', 'region', 'conflictProduct', 'conflictRegion', 'credential', 'clientId',
  'clientSecret', 'connectorPort', 'connector', 'exclude', 'require', 'callbackTimeoutMs', 'requestTimeoutMs', 'onStart', 'onCase', 'onProgress',
] as const;
const LABEL = /^[a-z0-9][a-z0-9\-_]{1,128}$/;
const REGION = /^([a-z0-9][a-z0-9\-_]{1,63})::([a-z0-9][a-z0-9\-_]{1,63})$/;

/**
 * What the provider's connector client (CONNECTOR_CLIENT_ID/CONNECTOR_CLIENT_SECRET) is needed for:
 * the fake connector checks it in both. Named in every error about missing client credentials.
 */
export const CONNECTOR_CLIENT_NEEDED_FOR = 'the fake connector checks it for single sign-on (the sso feature: the code exchange) '
  + 'and for the callbacks of long-running operations (a 202 answer to provisioning, credentials, a plan change or deprovisioning: '
  + 'the client_credentials token that authenticates the callback)';

/** The features that run: not excluded, and none of their dependencies excluded. */
export function effectiveFeatures(exclude: readonly Feature[]): Feature[] {
  const off = new Set<Feature>(exclude);
  // FEATURES lists dependencies before dependents, so one pass settles transitive exclusion.
  for (const feature of FEATURES) {
    if (FEATURE_DEPENDENCIES[feature].some((dep) => off.has(dep))) off.add(feature);
  }
  return FEATURES.filter((f) => !off.has(f));
}

function optionalLabel(raw: Record<string, unknown>, key: string, pattern: RegExp, example: string): string | undefined {
  const value = raw[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !pattern.test(value)) throw new InvalidOptionsError(`${FACTORY}: option "${key}" must look like ${example}`);
  return value;
}

/**
 * Runs the marketplace acceptance suite against a provider: provisioning (repeat, conflicts,
 * faulty labels, signature and Date checks), credentials, rotation, plan change, measures, single
 * sign-on through a fake connector, and cleanup. Long-running answers (202) are followed by waiting
 * for the provider's callback on the fake connector. Never throws for a failing provider: every
 * outcome is in the report.
 *
 * Each case is `passed`, `failed`, `skipped` (not run: single sign-on not configured at the
 * provider, or a prerequisite case failed) or `not-checked` (run, but its check could not be made,
 * e.g. a conflict with a made-up product the provider refused as unknown); only failures (and a
 * 202 whose callback never came) make `report.passed` false.
 *
 * The provider under test must trust the master key (`MASTER_PUBLIC_KEY`) and, for callbacks and
 * single sign-on, use the fake connector (`CONNECTOR_URL=http://127.0.0.1:<connectorPort>`, same
 * client id and secret).
 *
 * @example
 * ```ts
 * import { readMasterKey, runAcceptance } from 'embedded-marketplace/testkit';
 * const report = await runAcceptance({
 *   url: 'http://127.0.0.1:4567',
 *   masterPrivateKey: readMasterKey().privateKey,
 *   product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1',
 *   clientId: 'client', clientSecret: 'secret', connectorPort: 4568,
 * });
 * assert.equal(report.passed, true, JSON.stringify(report.cases.filter((c) => c.status === 'failed'), null, 2));
 * ```
 */
export async function runAcceptance(options: AcceptanceOptions): Promise<AcceptanceReport> {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, KNOWN);
  const url = requireNonEmptyString(FACTORY, raw, 'url');
  if (!/^https?:\/\//.test(url)) throw new InvalidOptionsError(`${FACTORY}: option "url" must be an http(s) URL such as http://127.0.0.1:4567`);
  const masterPrivateKey = requireNonEmptyString(FACTORY, raw, 'masterPrivateKey');
  const product = optionalLabel(raw, 'product', LABEL, 'a product label (^[a-z0-9][a-z0-9-_]{1,128}$)');
  const plan = optionalLabel(raw, 'plan', LABEL, 'a plan label (^[a-z0-9][a-z0-9-_]{1,128}$)');
  if (product === undefined || plan === undefined) throw new InvalidOptionsError(`${FACTORY}: options "product" and "plan" are required`);
  const newPlan = optionalLabel(raw, 'newPlan', LABEL, 'a plan label');
  const region = optionalLabel(raw, 'region', REGION, 'platform::location, e.g. aws::us-east-1 or all::global') ?? 'all::global';
  const conflictProduct = optionalLabel(raw, 'conflictProduct', LABEL, 'a product label');
  const conflictRegion = optionalLabel(raw, 'conflictRegion', REGION, 'platform::location');
  if (newPlan === plan) throw new InvalidOptionsError(`${FACTORY}: option "newPlan" must differ from "plan"`);
  if (conflictProduct === product) throw new InvalidOptionsError(`${FACTORY}: option "conflictProduct" must differ from "product"`);
  if (conflictRegion === region) throw new InvalidOptionsError(`${FACTORY}: option "conflictRegion" must differ from "region"`);
  const credential = raw.credential ?? 'multiple';
  if (credential !== 'single' && credential !== 'multiple') throw new InvalidOptionsError(`${FACTORY}: option "credential" must be "single" or "multiple"`);
  const exclude = raw.exclude ?? [];
  if (!Array.isArray(exclude) || exclude.some((f) => !(FEATURES as readonly unknown[]).includes(f))) {
    throw new InvalidOptionsError(`${FACTORY}: option "exclude" lists features among ${FEATURES.join(', ')}`);
  }
  const features = effectiveFeatures(exclude as Feature[]);
  if (features.includes('plan-change') && newPlan === undefined) {
    throw new InvalidOptionsError(`${FACTORY}: option "newPlan" (--new-plan) is required for the plan-change feature; pass a second plan or exclude plan-change`);
  }
  const clientId = raw.clientId === undefined ? undefined : requireNonEmptyString(FACTORY, raw, 'clientId');
  const clientSecret = raw.clientSecret === undefined ? undefined : requireNonEmptyString(FACTORY, raw, 'clientSecret');
  if (features.includes('sso') && raw.connector === undefined && (clientId === undefined || clientSecret === undefined)) {
    throw new InvalidOptionsError(`${FACTORY}: options "clientId" and "clientSecret" (--client-id, --client-secret, or $CONNECTOR_CLIENT_ID and $CONNECTOR_CLIENT_SECRET for the CLI) are required: the provider's CONNECTOR_CLIENT_ID and CONNECTOR_CLIENT_SECRET; ${CONNECTOR_CLIENT_NEEDED_FOR}. Pass them, or exclude sso (--exclude sso) if the provider has no single sign-on and answers every operation at once`);
  }
  const requireRaw = raw.require ?? [];
  if (!Array.isArray(requireRaw) || requireRaw.some((f) => !(OPTIONAL_FEATURES as readonly unknown[]).includes(f))) {
    throw new InvalidOptionsError(`${FACTORY}: option "require" lists optional features among ${OPTIONAL_FEATURES.join(', ')} (the others are always required)`);
  }
  const required = [...new Set(requireRaw as OptionalFeature[])];
  for (const feature of required) {
    if (!features.includes(feature)) throw new InvalidOptionsError(`${FACTORY}: option "require" names ${feature}, which is excluded`);
  }
  const connectorPort = optionalPositiveNumber(FACTORY, raw, 'connectorPort', { allowZero: true }) ?? 0;
  if (!Number.isInteger(connectorPort) || connectorPort > 65535) throw new InvalidOptionsError(`${FACTORY}: option "connectorPort" must be a port number`);
  const callbackTimeoutMs = optionalPositiveNumber(FACTORY, raw, 'callbackTimeoutMs') ?? 60_000;
  const requestTimeoutMs = optionalPositiveNumber(FACTORY, raw, 'requestTimeoutMs') ?? 60_000;
  const onStart = optionalFunction<AcceptanceOptions['onStart']>(FACTORY, raw, 'onStart');
  const onCase = optionalFunction<AcceptanceOptions['onCase']>(FACTORY, raw, 'onCase');
  const onProgress = optionalFunction<AcceptanceOptions['onProgress']>(FACTORY, raw, 'onProgress');
  const given = raw.connector as FakeConnector | undefined;
  if (given !== undefined && (typeof given !== 'object' || typeof given.issueSsoCode !== 'function')) {
    throw new InvalidOptionsError(`${FACTORY}: option "connector" must be a listening createFakeConnector(...)`);
  }

  const signer = createSigner({ masterPrivateKey });
  const signers = {
    stale: createSigner({ masterPrivateKey, now: () => new Date(Date.now() - DATE_SKEW_MS) }),
    future: createSigner({ masterPrivateKey, now: () => new Date(Date.now() + DATE_SKEW_MS) }),
    rogue: createSigner({ masterPrivateKey: generateKeyPair().privateKey }),
  };

  // Without client credentials the fake still needs some; the provider's callbacks then fail with a clear 401.
  const connector = given ?? createFakeConnector({ clientId: clientId ?? `unset-${randomBytes(8).toString('hex')}`, clientSecret: clientSecret ?? randomBytes(16).toString('hex') });
  if (given === undefined) {
    try {
      await connector.listen(connectorPort, '127.0.0.1');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new InvalidOptionsError(`${FACTORY}: the fake connector could not listen on 127.0.0.1:${connectorPort}${code === 'EADDRINUSE' ? ' (the port is in use)' : ''}; choose another --connector-port`);
    }
  }

  const connectorUrl = connector.url;
  const settings: Settings = {
    product, plan, newPlan, region, conflictProduct, conflictRegion, credential, callbackTimeoutMs,
    clientGiven: given !== undefined || (clientId !== undefined && clientSecret !== undefined), required,
  };
  const client = new ProviderClient(url, signer, requestTimeoutMs);
  const ctx = new RunContext(client, connector, settings, signers, onCase, onProgress);
  const startedAt = new Date();
  let callbacks: AcceptanceReport['callbacks'];
  try {
    onStart?.({ url: client.base.href.replace(/\/$/, ''), connectorUrl });
    if (features.includes('provision')) await provisionFeature(ctx);
    if (features.includes('credentials')) await credentialsFeature(ctx);
    if (features.includes('credential-rotation')) await rotationFeature(ctx);
    if (features.includes('plan-change')) await planChangeFeature(ctx);
    if (features.includes('resource-measures')) await measuresFeature(ctx);
    if (features.includes('sso')) await ssoFeature(ctx);
    if (features.includes('cleanup')) await cleanupFeature(ctx, features.includes('credentials'));
    callbacks = await ctx.settleCallbacks();
  } finally {
    if (given === undefined) await connector.close();
  }

  const cases = ctx.cases;
  const summary = {
    total: cases.length,
    passed: cases.filter((c) => c.status === 'passed').length,
    failed: cases.filter((c) => c.status === 'failed').length,
    skipped: cases.filter((c) => c.status === 'skipped').length,
    notChecked: cases.filter((c) => c.status === 'not-checked').length,
  };
  return {
    url: client.base.href.replace(/\/$/, ''),
    connectorUrl,
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - startedAt.getTime(),
    passed: summary.failed === 0 && callbacks.unacknowledged.length === 0,
    settings: { product, plan, newPlan, region, credential, excluded: FEATURES.filter((f) => !features.includes(f)), required },
    summary,
    callbacks,
    cases,
  };
}
