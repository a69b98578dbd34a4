import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { createProviderApp, type ProviderApp } from '../../examples/provider-app.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSimulator, type Simulator } from '../../src/testkit/simulator/index.js';
import { listen, type Running } from '../helpers/http.js';
import { freePort } from './helpers/harness.js';

const CHROMIUM = '/usr/bin/chromium';
const CLIENT = { clientId: 'sim-page-client', clientSecret: 'sim-page-secret-7c1e' };

/** Width and height of a PNG, from its IHDR chunk. */
function pngSize(png: Buffer): { width: number; height: number } {
  assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

describe('simulator page: 202 state, callbacks, usage, credentials, signing, curl, SSO hop', { skip: existsSync(CHROMIUM) ? false : 'chromium not installed at /usr/bin/chromium: apt-get install -y chromium' }, () => {
  let browser: Browser;
  let provider: ProviderApp;
  let target: Running;
  let simulator: Simulator;
  let url: string;

  before(async () => {
    const master = generateKeyPair();
    const connectorPort = await freePort();
    // The example answers 202 and calls back after 2 s: long enough for the page's 0.5 s poll to
    // show the pending state, which the test waits for (it never times anything).
    provider = await createProviderApp({
      STORE: 'memory', MASTER_PUBLIC_KEY: master.publicKey, CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`,
      CONNECTOR_CLIENT_ID: CLIENT.clientId, CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret, LOG_LEVEL: 'silent',
      EXAMPLE_ASYNC: '1', EXAMPLE_ASYNC_DELAY_MS: '2000', EXAMPLE_MEASURES: '{"bonnet-hours":12}',
    });
    target = await listen(provider.app);
    simulator = createSimulator({ providerUrl: target.url, masterPrivateKey: master.privateKey, product: 'bonnets', plan: 'small', plans: ['large'], region: 'aws::us-east-1', ...CLIENT, connectorPort, callbackTimeoutMs: 30_000 });
    ({ url } = await simulator.listen());
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'] });
  });
  after(async () => {
    await browser?.close();
    await simulator?.close();
    await target?.close();
    await provider?.close();
  });

  it('shows every step and checks its screenshots', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await page.goto(url);
    const empty = await page.screenshot({ fullPage: true });

    await page.click('#provision');
    await page.locator('#pending', { hasText: /202 accepted, waiting for callback [0-9a-z]{29} \(\d+ s left\)/ }).waitFor();
    const waiting = await page.screenshot({ fullPage: true });
    await page.locator('#status', { hasText: 'provision: done' }).waitFor({ timeout: 60_000 });
    assert.equal(await page.textContent('#pending'), '');
    assert.match((await page.locator('.entry .callback').first().textContent()) ?? '', /^callback [0-9a-z]{29} → 204 \(1 attempt\)/);

    // The canonical string and the full signature of the signed request.
    const canonical = (await page.locator('.entry .canonical').first().textContent()) ?? '';
    assert.match(canonical, /^put \/v1\/credentials\/[0-9a-z]{29}\nhost: 127\.0\.0\.1:\d+\ndate: /);
    assert.match((await page.locator('.entry .signature').first().textContent()) ?? '', /^X-Signature: [A-Za-z0-9_-]{86} [A-Za-z0-9_-]{43} [A-Za-z0-9_-]{86}$/);
    // Copy as curl: the command is there to copy, complete (no "..." and no redaction).
    const curl = (await page.locator('.entry .curl-command').first().textContent()) ?? '';
    assert.match(curl, /^curl -i -X PUT http:\/\/127\.0\.0\.1:\d+\/v1\/credentials\/[0-9a-z]{29} /);
    assert.doesNotMatch(curl, /\.\.\.|redacted/);
    assert.equal(await page.locator('.copy-curl').count() > 0, true);

    await page.click('#usage');
    await page.locator('#status', { hasText: 'usage: done' }).waitFor();
    assert.match((await page.locator('.entry').first().textContent()) ?? '', /usage \(measures\) → 200[\s\S]*bonnet-hours[\s\S]*12/);

    // Credential-only actions.
    await page.click('#delete-credentials');
    await page.locator('#status', { hasText: 'delete-credentials: done' }).waitFor({ timeout: 60_000 });
    assert.equal(await page.textContent('#credentials .muted'), 'None.');
    await page.click('#new-credentials');
    await page.locator('#status', { hasText: 'new-credentials: done' }).waitFor({ timeout: 60_000 });
    await page.locator('#credentials .credential').waitFor();

    // The SSO hop is logged when the page comes back to the front.
    const [dashboard] = await Promise.all([context.waitForEvent('page'), page.click('#sso')]);
    await dashboard.waitForLoadState('domcontentloaded');
    await dashboard.close();
    await page.bringToFront();
    await page.reload();
    const hop = (await page.locator('.entry .steps').first().textContent()) ?? '';
    assert.match(hop, /single-use code[\s\S]*redirected \(302\) to http:\/\/127\.0\.0\.1:\d+\/v1\/sso\?code=<code>&resource_id=[0-9a-z]{29}[\s\S]*303/);
    const full = await page.screenshot({ fullPage: true });

    await page.click('#clear-log');
    await page.locator('#log', { hasText: 'Nothing sent yet.' }).waitFor();
    const cleared = await page.screenshot({ fullPage: true });

    // The screenshots: real PNGs of the page, taller as the log grows, back to short once cleared.
    const sizes = [empty, waiting, full, cleared].map(pngSize);
    for (const size of sizes) assert.equal(size.width, 1200);
    assert.ok(sizes[2]!.height > sizes[0]!.height, `the full log (${sizes[2]!.height}px) is taller than the empty page (${sizes[0]!.height}px)`);
    assert.ok(sizes[3]!.height < sizes[2]!.height, 'clearing the log shortens the page');
    assert.notDeepEqual(waiting, empty);
    await context.close();
  });
});
