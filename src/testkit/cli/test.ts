import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { InvalidOptionsError } from '../../errors.js';
import { formatCase, formatHeader, formatSummary, shouldColor } from '../acceptance/format.js';
import { effectiveFeatures, runAcceptance } from '../acceptance/run.js';
import { FEATURES, OPTIONAL_FEATURES, type Feature, type OptionalFeature } from '../acceptance/types.js';
import { durationOption, EXIT, loadMasterKey, parse, portOption, UsageError, type CliIo } from './io.js';
import { waitForProviderFlag, waitOption } from './wait.js';

/** Where the fake connector listens unless --connector-port says otherwise. */
export const DEFAULT_CONNECTOR_PORT = 4568;
/** The provider URL when none is given: the example provider's. */
export const DEFAULT_PROVIDER_URL = 'http://127.0.0.1:4567';

export const TEST_USAGE = `Usage: embedded-marketplace test [options] [URL]

Runs the marketplace acceptance suite against the provider at URL (default ${DEFAULT_PROVIDER_URL}),
signing with ./masterkey.json. The provider must run with MASTER_PUBLIC_KEY set to that file's
public key and, for single sign-on and callbacks, CONNECTOR_URL=http://127.0.0.1:<connector port>
with the same CONNECTOR_CLIENT_ID and CONNECTOR_CLIENT_SECRET as given here.

Each case prints PASS, FAIL, SKIP (not run: single sign-on not configured at the provider, or a
case it needs failed) or NOT CHECKED (run, but its check could not be made; never a pass).

  --product NAME          product label to provision (required)
  --plan NAME             plan label to provision (required)
  --new-plan NAME         a second plan: plan change and plan conflict (required unless --exclude plan-change)
  --region NAME           region (default all::global)
  --credential MODE       single (rotation replaces) or multiple (rotation swaps; default)
  --client-id ID          the provider's connector client id (default $CONNECTOR_CLIENT_ID)
  --client-secret SECRET  the provider's connector client secret (default $CONNECTOR_CLIENT_SECRET)
  --connector-port PORT   port of the fake connector on 127.0.0.1 (default ${DEFAULT_CONNECTOR_PORT})
  --exclude FEATURE       leave out a feature and those depending on it (repeatable, or comma-separated):
                          ${FEATURES.join(', ')}
  --require FEATURE       fail, not skip, when the provider answers that it does not have this optional
                          feature (${OPTIONAL_FEATURES.join(', ')})
  --wait SECONDS          first wait up to SECONDS for the provider to answer at all (while it starts)
  --conflict-product NAME a second real product, to check the product conflict strictly
  --conflict-region NAME  a second real region, to check the region conflict strictly
  --callback-timeout DUR  how long to wait for a callback after a 202 (default 60s; e.g. 90s, 5m)
  --json FILE             also write the report as JSON to FILE ("-" for stdout; the progress then goes to stderr)
  --master-key FILE       the master key file (default ./masterkey.json)

Exit status: 0 when no case failed (skipped and not checked cases do not fail a run), 1 when one
failed, 2 for a usage or setup error (including a provider that did not answer within --wait).
`;

/** `test`: the acceptance run with terminal output; the exit status says whether it passed. */
export async function testCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(args, {
    product: { type: 'string' },
    plan: { type: 'string' },
    'new-plan': { type: 'string' },
    region: { type: 'string' },
    credential: { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'connector-port': { type: 'string' },
    exclude: { type: 'string', multiple: true },
    require: { type: 'string', multiple: true },
    wait: { type: 'string' },
    'conflict-product': { type: 'string' },
    'conflict-region': { type: 'string' },
    'callback-timeout': { type: 'string' },
    json: { type: 'string' },
    'master-key': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) {
    io.stdout.write(TEST_USAGE);
    return EXIT.ok;
  }
  if (positionals.length > 1) throw new UsageError(`test takes one URL, got ${positionals.length} arguments`);
  const url = positionals[0] ?? DEFAULT_PROVIDER_URL;
  const { product, plan } = values;
  if (product === undefined || plan === undefined) throw new UsageError('--product and --plan are required (the product and plan to provision)');
  const credential = values.credential ?? 'multiple';
  if (credential !== 'single' && credential !== 'multiple') throw new UsageError('--credential must be single or multiple');
  const exclude = (values.exclude ?? []).flatMap((e) => e.split(',')).map((e) => e.trim()).filter((e) => e.length > 0);
  for (const feature of exclude) {
    if (!(FEATURES as readonly string[]).includes(feature)) throw new UsageError(`--exclude ${feature}: unknown feature; use one of ${FEATURES.join(', ')}`);
  }
  const required = (values.require ?? []).flatMap((e) => e.split(',')).map((e) => e.trim()).filter((e) => e.length > 0);
  for (const feature of required) {
    if (!(OPTIONAL_FEATURES as readonly string[]).includes(feature)) {
      throw new UsageError(`--require ${feature}: only an optional feature can be required (${OPTIONAL_FEATURES.join(', ')}); the others always are`);
    }
    if (exclude.includes(feature)) throw new UsageError(`--require ${feature} and --exclude ${feature} contradict each other`);
  }
  const connectorPort = portOption(values['connector-port'], '--connector-port', DEFAULT_CONNECTOR_PORT);
  const callbackTimeoutMs = durationOption(values['callback-timeout'], '--callback-timeout', 60_000);
  const waitMs = waitOption(values.wait);
  const clientId = values['client-id'] ?? io.env.CONNECTOR_CLIENT_ID;
  const clientSecret = values['client-secret'] ?? io.env.CONNECTOR_CLIENT_SECRET;
  const features = effectiveFeatures(exclude as Feature[]);
  const key = loadMasterKey(io, values['master-key']);

  const jsonToStdout = values.json === '-';
  const out = jsonToStdout ? io.stderr : io.stdout;
  const format = { color: shouldColor(out, io.env) };
  const notAnswering = await waitForProviderFlag(url, waitMs, (line) => out.write(line), undefined, io.clock);
  if (notAnswering !== undefined) {
    io.stderr.write(`embedded-marketplace test: ${notAnswering}\n`);
    return EXIT.usage;
  }
  let report;
  try {
    report = await runAcceptance({
      url,
      masterPrivateKey: key.privateKey,
      product,
      plan,
      ...(values['new-plan'] === undefined ? {} : { newPlan: values['new-plan'] }),
      ...(values.region === undefined ? {} : { region: values.region }),
      ...(values['conflict-product'] === undefined ? {} : { conflictProduct: values['conflict-product'] }),
      ...(values['conflict-region'] === undefined ? {} : { conflictRegion: values['conflict-region'] }),
      credential,
      ...(clientId === undefined ? {} : { clientId }),
      ...(clientSecret === undefined ? {} : { clientSecret }),
      connectorPort,
      exclude: exclude as Feature[],
      require: required as OptionalFeature[],
      callbackTimeoutMs,
      onStart: (info) => out.write(`${formatHeader({
        ...info,
        product,
        plan,
        newPlan: values['new-plan'],
        region: values.region ?? 'all::global',
        credential,
        excluded: FEATURES.filter((f) => !features.includes(f)),
      }, format)}\n\n`),
      onCase: (result) => out.write(`${formatCase(result, format)}\n`),
      onProgress: (note) => out.write(`      ${format.color ? `\u001b[2m… ${note}\u001b[0m` : `… ${note}`}\n`),
    });
  } catch (err) {
    if (err instanceof InvalidOptionsError) throw new UsageError(err.message.replace(/^runAcceptance: /, ''));
    throw err;
  }
  out.write(`\n${formatSummary(report, format)}\n`);
  if (values.json !== undefined) {
    const text = `${JSON.stringify(report, null, 2)}\n`;
    if (jsonToStdout) io.stdout.write(text);
    else writeFileSync(resolve(io.cwd, values.json), text);
  }
  return report.passed ? EXIT.ok : EXIT.failed;
}
