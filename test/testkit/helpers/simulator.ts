/**
 * Shared set-up of the simulator tests: a real provider (the example app, or the toy provider),
 * a fake connector the test controls, the simulator in front of both, and a reader of the page's
 * server-sent events to wait on what the page would show.
 */
import { existsSync } from 'node:fs';
import { createProviderApp, type ProviderApp } from '../../../examples/provider-app.js';
import { createFakeConnector, type FakeConnector } from '../../../src/testkit/fake-connector.js';
import { generateKeyPair } from '../../../src/testkit/keys.js';
import { createSimulator, type Simulator, type SimulatorOptions, type SimulatorState } from '../../../src/testkit/simulator/index.js';
import { listen, type Running } from '../../helpers/http.js';
import { createToyProvider, type ToyBugs } from './toy-provider.js';

export const CHROMIUM = '/usr/bin/chromium';
/** Why the Chromium tests skip, or false when they run. Never downloads a browser. */
export const CHROMIUM_SKIP: string | false = existsSync(CHROMIUM) ? false : `Chromium not found at ${CHROMIUM} (apt-get install -y chromium): the page is not checked in a browser`;
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'];

const CLIENT = { clientId: 'sim-client', clientSecret: 'sim-client-secret-51d0' };

export interface SimSetup {
  simulator: Simulator;
  connector: FakeConnector;
  target: Running;
  /** The simulator page's URL. */
  url: string;
  provider?: ProviderApp;
  close(): Promise<void>;
}

/**
 * The example provider (`examples/provider-app.ts`) behind a simulator. `async` makes every
 * operation answer 202 and call back through the outbox, retrying every 200 ms at most.
 */
export async function startExample(options: { async?: boolean; env?: Record<string, string>; simulator?: Partial<SimulatorOptions> } = {}): Promise<SimSetup> {
  const master = generateKeyPair();
  const connector = createFakeConnector(CLIENT);
  const { url: connectorUrl } = await connector.listen();
  const provider = await createProviderApp({
    STORE: 'memory',
    MASTER_PUBLIC_KEY: master.publicKey,
    CONNECTOR_URL: connectorUrl,
    CONNECTOR_CLIENT_ID: CLIENT.clientId,
    CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret,
    LOG_LEVEL: 'silent',
    ...(options.async === true ? { EXAMPLE_ASYNC: '1', EXAMPLE_ASYNC_DELAY_MS: '20', EXAMPLE_OUTBOX_POLL_MS: '50', EXAMPLE_OUTBOX_BACKOFF_MS: '200' } : {}),
    ...options.env,
  });
  const target = await listen(provider.app);
  const simulator = createSimulator({
    providerUrl: target.url,
    masterPrivateKey: master.privateKey,
    product: 'bonnets',
    plan: 'small',
    plans: ['large'],
    region: 'aws::us-east-1',
    ...CLIENT,
    connector,
    callbackTimeoutMs: 60_000,
    ...options.simulator,
  });
  const { url } = await simulator.listen();
  return {
    simulator,
    connector,
    target,
    url,
    provider,
    async close() {
      await simulator.close();
      await target.close();
      await provider.close();
      await connector.close();
    },
  };
}

/** The toy provider of the acceptance tests (no dashboard route: its SSO redirect ends in a 404). */
export async function startToy(options: { async?: boolean; bugs?: Partial<ToyBugs> } = {}): Promise<SimSetup> {
  const master = generateKeyPair();
  const connector = createFakeConnector(CLIENT);
  const { url: connectorUrl } = await connector.listen();
  const app = createToyProvider({ masterKey: master.publicKey, connectorUrl, ...CLIENT, async: options.async === true, bugs: options.bugs ?? {} });
  const target = await listen(app);
  const simulator = createSimulator({ providerUrl: target.url, masterPrivateKey: master.privateKey, product: 'widgets', plan: 'basic', plans: ['premium'], region: 'aws::us-east-1', ...CLIENT, connector, callbackTimeoutMs: 60_000 });
  const { url } = await simulator.listen();
  return {
    simulator,
    connector,
    target,
    url,
    async close() {
      await simulator.close();
      await target.close();
      await connector.close();
    },
  };
}

export interface ActAnswer {
  status: number;
  answer: { ok: boolean; message?: string; state: SimulatorState };
}

/** Presses a button of the page through its API (`POST /api/<action>`). */
export async function act(url: string, action: string, body: unknown = {}): Promise<ActAnswer> {
  const res = await fetch(`${url}/api/${action}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, answer: (await res.json()) as ActAnswer['answer'] };
}

/** The page's live feed (`GET /api/events`), read as the page reads it. */
export interface EventFeed {
  /** Every state received so far. */
  readonly states: SimulatorState[];
  /**
   * The first state (already received or to come) for which `predicate` holds. Rejects after a
   * generous guard (60 s) naming `what`, so that a broken page fails instead of hanging the suite.
   */
  until(what: string, predicate: (state: SimulatorState) => boolean): Promise<SimulatorState>;
  close(): void;
}

export async function openEvents(url: string): Promise<EventFeed> {
  const controller = new AbortController();
  const res = await fetch(`${url}/api/events`, { signal: controller.signal });
  if (res.status !== 200 || res.body === null) throw new Error(`GET /api/events answered ${res.status}`);
  const states: SimulatorState[] = [];
  const waiters = new Set<{ predicate: (state: SimulatorState) => boolean; resolve: (state: SimulatorState) => void }>();
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n');
        if (data === '') continue;
        const state = JSON.parse(data) as SimulatorState;
        states.push(state);
        for (const waiter of [...waiters]) {
          if (!waiter.predicate(state)) continue;
          waiters.delete(waiter);
          waiter.resolve(state);
        }
      }
    }
  })().catch(() => undefined);
  return {
    states,
    until(what, predicate) {
      const seen = states.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<SimulatorState>((resolve, reject) => {
        const guard = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`the page never showed: ${what}; last state: ${JSON.stringify(states.at(-1)).slice(0, 2000)}`));
        }, 60_000);
        const waiter = {
          predicate,
          resolve: (state: SimulatorState) => {
            clearTimeout(guard);
            resolve(state);
          },
        };
        waiters.add(waiter);
      });
    },
    close() {
      controller.abort();
    },
  };
}
