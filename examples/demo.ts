/**
 * `npm run demo`: starts the example provider on the embedded SQLite store and runs the whole
 * marketplace acceptance suite against it, first answering synchronously, then with
 * EXAMPLE_ASYNC=1 (every operation answers 202 and completes through a callback), on each host in
 * turn (EXAMPLE_ADAPTER=express, fastify, fetch). Exits 0 only when every case passes in both
 * modes on every host.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatCase, formatHeader, formatSummary, runAcceptance, shouldColor, type AcceptanceCase as CaseResult, type AcceptanceReport } from '../src/testkit/acceptance/index.js';
import { createRedactingLogger } from '../src/lib/logger.js';
import { generateKeyPair } from '../src/testkit/keys.js';
import { createProviderApp, EXAMPLE_ADAPTERS, type ExampleAdapter } from './provider-app.js';

const color = { color: shouldColor(process.stdout, process.env) };
const dir = mkdtempSync(join(tmpdir(), 'embedded-marketplace-demo-'));
const master = generateKeyPair();
const clientId = randomBytes(16).toString('hex');
const clientSecret = randomBytes(32).toString('hex');
// The provider's JSON log lines go to a file, not into the report; the end says what it holds.
const logFile = join(dir, 'provider.log');
const logStream = createWriteStream(logFile);
const logger = createRedactingLogger(logStream, 'warn');
let notChecked = 0;
/** Whether the provider's log is left on disk for the reader (it is named in the report). */
let keepLog = false;

/**
 * A case the suite could not really check (a "conflict" answered 400 for a made-up product, as the
 * example's catalog has one product) is reported not checked, never as a pass.
 */
function isNotChecked(result: CaseResult): boolean {
  return result.status === 'not-checked';
}

function printCase(result: CaseResult): void {
  if (!isNotChecked(result)) {
    console.log(formatCase(result, color));
    return;
  }
  notChecked++;
  console.log(`  ----  ${result.name} (${result.id}): NOT CHECKED\n        ${result.detail ?? ''}`);
}

/** A free loopback port for the fake connector, so the provider can be told its URL up front. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

async function runMode(adapter: ExampleAdapter, name: string, asyncMode: boolean): Promise<AcceptanceReport> {
  const connectorPort = await freePort();
  const provider = await createProviderApp({
    EXAMPLE_ADAPTER: adapter,
    STORE: `sqlite:${join(dir, `demo-${adapter}-${name}.db`)}`,
    MASTER_PUBLIC_KEY: master.publicKey,
    CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`,
    CONNECTOR_CLIENT_ID: clientId,
    CONNECTOR_CLIENT_SECRET: clientSecret,
    ...(asyncMode ? { EXAMPLE_ASYNC: '1' } : {}),
  }, { logger });
  const server = await new Promise<Server>((resolve) => {
    const s = provider.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const settings = { product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', conflictRegion: 'all::global', credential: 'multiple' } as const;
  console.log(`\n=== ${adapter} ${name}: the example provider on ${adapter} ${asyncMode ? 'answering 202 and calling back' : 'answering at once'} ===\n`);
  console.log(formatHeader({ url, connectorUrl: `http://127.0.0.1:${connectorPort}`, ...settings, excluded: [] }, color));
  console.log();
  try {
    const report = await runAcceptance({
      url,
      masterPrivateKey: master.privateKey,
      ...settings,
      clientId,
      clientSecret,
      connectorPort,
      callbackTimeoutMs: 15_000,
      onCase: printCase,
      onProgress: (note) => console.log(`      … ${note}`),
    });
    console.log(`\n${formatSummary(report, color)}`);
    return report;
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await provider.close();
  }
}

let exitCode = 1;
try {
  const counts = ({ summary }: AcceptanceReport) => `${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped, ${summary.notChecked} not checked`;
  const results: string[] = [];
  let green = true;
  for (const adapter of EXAMPLE_ADAPTERS) {
    const sync = await runMode(adapter, 'sync', false);
    const async = await runMode(adapter, 'async', true);
    green &&= sync.passed && async.passed;
    results.push(`${adapter}: sync ${sync.passed ? 'passed' : 'FAILED'} (${counts(sync)}), async ${async.passed ? 'passed' : 'FAILED'} (${counts(async)})`);
  }
  console.log(`\nDemo: ${results.join('; ')}; ${notChecked} check(s) could not be made (NOT CHECKED above, never counted as passed).`);
  await new Promise<void>((resolve) => logStream.end(resolve));
  const lines = readFileSync(logFile, 'utf8').split('\n').filter((line) => line !== '');
  // Warnings are expected (refused signatures, unknown products: the suite sends bad requests on purpose).
  if (lines.length > 0) {
    keepLog = true;
    console.log(`The provider wrote ${lines.length} warning or error log line(s) during the run, kept out of this report: ${logFile}`);
  }
  console.log(`
What ran:
  examples/provider-app.ts     the example provider: catalog, handlers (your code goes here), store, connector
  examples/hosts.ts            the same provider on Express, Fastify and a fetch host (EXAMPLE_ADAPTER)
  src/core/                    createProvider: signature check, routes, idempotency, callbacks, SSO
  src/adapters/                marketplaceRouter (Express) and marketplacePlugin (Fastify) over the core
  src/signature/               the marketplace's signature scheme and verifier
  src/testkit/acceptance/      the acceptance suite (also: npx embedded-marketplace test)
Next: README.md "In your app", docs/frameworks.md, docs/errors.md, docs/migrating.md.`);
  exitCode = green ? 0 : 1;
} catch (err) {
  console.error('demo: could not run:', err);
} finally {
  if (keepLog) {
    for (const name of readdirSync(dir)) if (join(dir, name) !== logFile) rmSync(join(dir, name), { recursive: true, force: true });
  } else {
    rmSync(dir, { recursive: true, force: true });
  }
}
process.exit(exitCode);
