import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { chromium, type Browser } from 'playwright-core';
import { createProviderApp, type ProviderApp } from '../../examples/provider-app.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSimulator, type Simulator, type SimulatorState } from '../../src/testkit/simulator/index.js';
import { listen, type Running } from '../helpers/http.js';
import { freePort } from './helpers/harness.js';

const CHROMIUM = '/usr/bin/chromium';
const CLIENT = { clientId: 'sim-client', clientSecret: 'sim-client-secret-51d0' };

interface Setup {
  provider: ProviderApp;
  target: Running;
  simulator: Simulator;
  url: string;
}

async function setup(asyncMode: boolean): Promise<Setup> {
  const master = generateKeyPair();
  const connectorPort = await freePort();
  const provider = await createProviderApp({
    STORE: 'memory',
    MASTER_PUBLIC_KEY: master.publicKey,
    CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`,
    CONNECTOR_CLIENT_ID: CLIENT.clientId,
    CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret,
    LOG_LEVEL: 'silent',
    ...(asyncMode ? { EXAMPLE_ASYNC: '1', EXAMPLE_ASYNC_DELAY_MS: '50' } : {}),
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
    connectorPort,
    callbackTimeoutMs: 5000,
  });
  const { url } = await simulator.listen();
  return { provider, target, simulator, url };
}

async function teardown(s: Setup): Promise<void> {
  await s.simulator.close();
  await s.target.close();
  await s.provider.close();
}

async function act(url: string, action: string, body: unknown = {}): Promise<{ status: number; answer: { ok: boolean; message?: string; state: SimulatorState } }> {
  const res = await fetch(`${url}/api/${action}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, answer: (await res.json()) as { ok: boolean; message?: string; state: SimulatorState } };
}

describe('marketplace simulator (serve)', () => {
  describe('in headless Chromium', { skip: existsSync(CHROMIUM) ? false : 'chromium not installed: apt-get install -y chromium' }, () => {
    let browser: Browser;
    let s: Setup;
    before(async () => {
      s = await setup(false);
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
      });
    });
    after(async () => {
      await browser.close();
      await teardown(s);
    });

    it('provisions, shows the credentials, and opens the dashboard through single sign-on', async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(s.url);
      assert.equal(await page.textContent('#resource'), 'No resource yet.');
      assert.equal(await page.isDisabled('#rotate'), true);

      await page.click('#provision');
      await page.waitForSelector('#credentials .credential');
      const credential = (await page.textContent('#credentials .credential')) ?? '';
      assert.match(credential, /^BONNETS_URL=https:\/\/u[0-9a-f]+:.+@bonnets\.example\/[0-9a-z]{29}$/);
      const resourceText = (await page.textContent('#resource')) ?? '';
      const resourceId = /Resource ([0-9a-z]{29}) on plan small/.exec(resourceText)?.[1];
      assert.ok(resourceId !== undefined, resourceText);
      assert.match((await page.textContent('#log')) ?? '', /provision credentials → 201[\s\S]*x-signature: <redacted>[\s\S]*provision → 201PUT http:\/\/127\.0\.0\.1:\d+\/v1\/resources\//);

      const [dashboard] = await Promise.all([context.waitForEvent('page'), page.click('#sso')]);
      await dashboard.waitForLoadState('domcontentloaded');
      assert.equal(new URL(dashboard.url()).pathname, `/dashboard/${resourceId}`);
      assert.equal(await dashboard.textContent('h1'), 'Your bonnet');
      assert.equal(await dashboard.textContent('#resource'), resourceId);
      assert.equal(await dashboard.textContent('#plan'), 'Plan: small');
      const cookies = await context.cookies(s.target.url);
      assert.ok(cookies.some((c) => c.name === 'bonnets.sid'), 'the provider set its session cookie');
      // A background tab's animation frames are throttled, and clicks wait on them.
      await dashboard.close();
      await page.bringToFront();

      await page.selectOption('#plan', 'large');
      await page.click('#resize');
      // Locators, not waitForFunction: the page's CSP forbids the eval a string predicate needs.
      await page.locator('#resource', { hasText: 'on plan large' }).waitFor();

      await page.click('#rotate');
      await page.locator('#credentials .credential', { hasNotText: credential }).waitFor();

      await page.click('#deprovision');
      await page.locator('#resource', { hasText: 'No resource yet.' }).waitFor();
      assert.equal(await page.textContent('#credentials'), 'None.');
      assert.match((await page.textContent('#status')) ?? '', /deprovision: done/);
      await context.close();
    });
  });

  describe('backend', () => {
    let s: Setup;
    before(async () => {
      s = await setup(true);
    });
    after(() => teardown(s));

    it('waits for callbacks of an asynchronous provider and rotates by swapping', async () => {
      const provisioned = await act(s.url, 'provision');
      assert.equal(provisioned.status, 200, provisioned.answer.message);
      const first = provisioned.answer.state.credentials;
      assert.ok(first !== null);
      assert.equal(provisioned.answer.state.log[0]?.callback?.status, 204, 'the credential callback was accepted');
      assert.equal(provisioned.answer.state.log[0]?.response?.status, 202);

      const rotated = await act(s.url, 'rotate');
      assert.equal(rotated.status, 200, rotated.answer.message);
      assert.notDeepEqual(rotated.answer.state.credentials?.values, first.values);
      assert.deepEqual(rotated.answer.state.log.slice(0, 2).map((e) => e.action), ['delete old credentials', 'provision credentials'], 'swap: new set first, then the old one deleted');
      const json = JSON.stringify(rotated.answer.state.log);
      assert.equal(json.includes(Object.values(first.values)[0] ?? '-'), false, 'the log redacts credential values');

      const refused = await act(s.url, 'resize', { plan: 'no-such-plan' });
      assert.equal(refused.status, 502);
      assert.match(refused.answer.message ?? '', /the provider answered 400/);

      assert.equal((await act(s.url, 'deprovision')).status, 200);
      assert.equal((await act(s.url, 'rotate')).answer.message, 'provision a resource first');
    });

    it('only answers JSON posts on a loopback Host, and redirects SSO only for a resource', async () => {
      const form = await fetch(`${s.url}/api/provision`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
      assert.equal(form.status, 415);
      // fetch always sends the URL's Host, so a raw request plays the rebound DNS name.
      const rebound = await new Promise<number>((resolve, reject) => {
        request(`${s.url}/api/state`, { headers: { host: 'evil.example' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }).once('error', reject).end();
      });
      assert.equal(rebound, 403);
      assert.equal((await fetch(`${s.url}/api/nope`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 404);
      assert.equal((await fetch(`${s.url}/sso`, { redirect: 'manual' })).status, 409);
    });
  });
});
