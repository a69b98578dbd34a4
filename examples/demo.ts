/**
 * `npm run demo`: starts the example provider on the embedded SQLite store and runs the whole
 * marketplace acceptance suite against it, first answering synchronously, then with
 * EXAMPLE_ASYNC=1 (every operation answers 202 and completes through a callback). Exits 0 only
 * when every case passes in both modes.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatCase, formatHeader, formatSummary, runAcceptance, shouldColor, type AcceptanceReport } from '../src/testkit/acceptance/index.js';
import { generateKeyPair } from '../src/testkit/keys.js';
import { createProviderApp } from './provider-app.js';

const color = { color: shouldColor(process.stdout, process.env) };
const dir = mkdtempSync(join(tmpdir(), 'embedded-marketplace-demo-'));
const master = generateKeyPair();
const clientId = randomBytes(16).toString('hex');
const clientSecret = randomBytes(32).toString('hex');

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

async function runMode(name: string, asyncMode: boolean): Promise<AcceptanceReport> {
  const connectorPort = await freePort();
  const provider = await createProviderApp({
    STORE: `sqlite:${join(dir, `demo-${name}.db`)}`,
    MASTER_PUBLIC_KEY: master.publicKey,
    CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`,
    CONNECTOR_CLIENT_ID: clientId,
    CONNECTOR_CLIENT_SECRET: clientSecret,
    LOG_LEVEL: 'error',
    ...(asyncMode ? { EXAMPLE_ASYNC: '1' } : {}),
  });
  const server = await new Promise<Server>((resolve) => {
    const s = provider.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const settings = { product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', conflictRegion: 'all::global', credential: 'multiple' } as const;
  console.log(`\n=== ${name}: the example provider ${asyncMode ? 'answering 202 and calling back' : 'answering at once'} ===\n`);
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
      onCase: (result) => console.log(formatCase(result, color)),
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
  const sync = await runMode('sync', false);
  const async = await runMode('async', true);
  const green = sync.passed && async.passed;
  console.log(`\nDemo: sync ${sync.passed ? 'passed' : 'FAILED'} (${sync.summary.passed}/${sync.summary.total}), async ${async.passed ? 'passed' : 'FAILED'} (${async.summary.passed}/${async.summary.total}).`);
  exitCode = green ? 0 : 1;
} catch (err) {
  console.error('demo: could not run:', err);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(exitCode);
