import { createServer, type AddressInfo } from 'node:net';
import { createFakeConnector } from '../../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../../src/testkit/keys.js';
import { runAcceptance } from '../../../src/testkit/acceptance/index.js';
import type { AcceptanceOptions, AcceptanceReport } from '../../../src/testkit/acceptance/index.js';
import { listen } from '../../helpers/http.js';
import { createToyProvider, type ToyBugs, type ToyOptions } from './toy-provider.js';

export const CLIENT = { clientId: 'toy-client', clientSecret: 'toy-client-secret-value' };

/** A free loopback port (for a fake connector whose URL a provider must know before it starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Runs the whole suite against a toy provider with the given bugs; returns the report. `toy`
 * overrides the toy's own options (its client, token keeping).
 */
export async function runAgainstToy(
  bugs: Partial<ToyBugs>,
  extra: { async?: boolean; toy?: Partial<ToyOptions> } & Partial<AcceptanceOptions> = {},
): Promise<AcceptanceReport> {
  const { async: asyncMode, toy, ...overrides } = extra;
  const master = generateKeyPair();
  const connector = createFakeConnector(CLIENT);
  const { url: connectorUrl } = await connector.listen();
  const app = createToyProvider({ masterKey: master.publicKey, connectorUrl, ...CLIENT, async: asyncMode === true, bugs, ...toy });
  const target = await listen(app);
  try {
    return await runAcceptance({
      url: target.url,
      masterPrivateKey: master.privateKey,
      product: 'widgets',
      plan: 'basic',
      newPlan: 'premium',
      region: 'aws::us-east-1',
      conflictProduct: 'gadgets',
      conflictRegion: 'all::global',
      ...CLIENT,
      connector,
      callbackTimeoutMs: 2000,
      requestTimeoutMs: 5000,
      ...overrides,
    });
  } finally {
    await target.close();
    await connector.close();
  }
}

export const failedIds = (report: AcceptanceReport): string[] => idsWith(report, 'failed');

/** The ids of the cases with this status, sorted. */
export const idsWith = (report: AcceptanceReport, status: AcceptanceReport['cases'][number]['status']): string[] =>
  report.cases.filter((c) => c.status === status).map((c) => c.id).sort();

/** The failures as readable text for an assertion message. */
export const explain = (report: AcceptanceReport): string =>
  report.cases.filter((c) => c.status === 'failed').map((c) => `${c.id}: ${c.detail ?? ''} [${c.response?.status ?? 'no answer'}]`).join('\n');
