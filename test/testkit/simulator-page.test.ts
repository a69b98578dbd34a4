import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chromium, type Browser } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, CHROMIUM_SKIP, startExample, type SimSetup } from './helpers/simulator.js';

const WAIT = { timeout: 60_000 };

/** Width and height of a PNG, from its IHDR chunk. */
function pngSize(png: Buffer): { width: number; height: number } {
  assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

describe('simulator page: 202 state, callbacks, usage, credentials, signing, curl, SSO hop', { skip: CHROMIUM_SKIP }, () => {
  let browser: Browser;
  let s: SimSetup;

  before(async () => {
    s = await startExample({ async: true, env: { EXAMPLE_MEASURES: '{"bonnet-hours":12}' } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });

  it('shows every step and checks its screenshots', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await page.goto(s.url);
    await page.locator('#live', { hasText: /^live$/ }).waitFor(WAIT);
    const empty = await page.screenshot({ fullPage: true });

    // The fake connector refuses callbacks until the page has shown the pending state.
    s.connector.setDown('callbacks', { status: 503 });
    await page.click('#provision');
    await page.locator('#pending', { hasText: /202 accepted, waiting for callback [0-9a-z]{29} \(\d+ s left\)/ }).waitFor(WAIT);
    const waiting = await page.screenshot({ fullPage: true });
    s.connector.setUp('callbacks');
    await page.locator('#status', { hasText: 'provision: done' }).waitFor(WAIT);
    assert.equal(await page.textContent('#pending'), '');
    assert.match((await page.locator('.entry .callback').first().textContent()) ?? '', /^callback [0-9a-z]{29}: done · accepted by the fake connector at [\d:.]+ \((\d+ ms|[\d.]+ s) after the 202\)1 attempt received: 204/);

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
    await page.locator('#status', { hasText: 'usage: done' }).waitFor(WAIT);
    assert.match((await page.locator('.entry').first().textContent()) ?? '', /usage \(measures\) → 200 in \d+ ms[\s\S]*bonnet-hours[\s\S]*12/);

    // Credential-only actions.
    await page.locator('#credentials .delete-set').click();
    await page.locator('#status', { hasText: 'delete-credentials: done' }).waitFor(WAIT);
    assert.equal(await page.textContent('#credentials .muted'), 'None.');
    await page.click('#new-credentials');
    await page.locator('#status', { hasText: 'new-credentials: done' }).waitFor(WAIT);
    await page.locator('#credentials .credential').waitFor(WAIT);

    // The SSO hop arrives on the page by itself once the tab is open.
    const [dashboard] = await Promise.all([context.waitForEvent('page'), page.click('#sso')]);
    await dashboard.waitForLoadState('domcontentloaded');
    await dashboard.close();
    await page.bringToFront();
    const hop = page.locator('.entry .sso').first();
    await hop.locator('.sso-browser').waitFor(WAIT);
    assert.match((await hop.textContent()) ?? '', /single-use code[\s\S]*GET http:\/\/127\.0\.0\.1:\d+\/v1\/sso\?code=<redacted>&resource_id=[0-9a-z]{29} without cookies → 303[\s\S]*Dashboard http:\/\/127\.0\.0\.1:\d+\/dashboard\/[0-9a-z]{29} answered 200\./);
    const full = await page.screenshot({ fullPage: true });

    await page.click('#clear-log');
    await page.locator('#log', { hasText: 'Nothing sent yet.' }).waitFor(WAIT);
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
