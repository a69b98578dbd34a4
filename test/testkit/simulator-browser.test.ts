/**
 * The simulator page in headless Chromium against the example provider answering 202 and calling
 * back: provision, credential sets, single sign-on, a live 202, Resend and deprovision, checked on
 * the page as a person reads it. Every wait is on something the page shows (locators), tied to an
 * event the test causes; nothing is timed. Screenshots are kept in test-artifacts/simulator/.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Locator } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, CHROMIUM_SKIP, startExample, type SimSetup } from './helpers/simulator.js';

const ARTIFACTS = resolve('test-artifacts', 'simulator');
// Generous: a busy 2-core machine runs other suites beside this one. Each wait ends on an event.
const WAIT = { timeout: 60_000 };

describe('simulator page in Chromium: provision, credential sets, SSO, a live 202, Resend, deprovision', { skip: CHROMIUM_SKIP }, () => {
  let browser: Browser;
  let s: SimSetup;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    s = await startExample({ async: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });

  it('shows what happened, live', async (t) => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    let loads = 0;
    page.on('load', () => loads++);
    const shots: string[] = [];
    const shot = async (name: string): Promise<void> => {
      const path = join(ARTIFACTS, `${String(shots.length + 1).padStart(2, '0')}-${name}.png`);
      writeFileSync(path, await page.screenshot({ fullPage: true }));
      shots.push(path);
      t.diagnostic(`screenshot: ${path}`);
    };
    /** One entry alone, readable at full size. */
    const keep = async (locator: Locator, name: string): Promise<void> => {
      const path = join(ARTIFACTS, `${String(shots.length + 1).padStart(2, '0')}-${name}.png`);
      writeFileSync(path, await locator.screenshot());
      shots.push(path);
      t.diagnostic(`screenshot: ${path}`);
    };
    const entryOf = (action: string): Locator => page.locator('.entry', { has: page.locator('.headline', { hasText: ` · ${action} → ` }) });
    const bySeq = async (locator: Locator): Promise<Locator> => page.locator(`.entry[data-seq="${await locator.first().getAttribute('data-seq')}"]`);

    await page.goto(s.url);
    await page.locator('#live', { hasText: /^live$/ }).waitFor(WAIT);
    await shot('empty');

    // --- a 202, live: callbacks are refused until the page shows the waiting entry -------------
    s.connector.setDown('callbacks', { status: 503 });
    await page.click('#provision');
    const provision = await bySeq(entryOf('provision'));
    await provision.locator('.callback[data-state="waiting"] .attempts-summary', { hasText: /^\d+ attempts? received: 503/ }).waitFor(WAIT);
    assert.match((await provision.locator('.headline').textContent()) ?? '', /^#\d+ sent \d\d:\d\d:\d\d\.\d{3} · provision → 202 in \d+ ms · callback waiting$/);
    const countdown = provision.locator('.countdown');
    const firstReading = (await countdown.textContent()) ?? '';
    assert.match(firstReading, /^the button waits \d+ s more; the provider has 2[34] h \d+ min left \(24 h deadline\)$/);
    assert.match((await provision.locator('.callback').textContent()) ?? '', /^callback [0-9a-z]{29}: waiting/);
    const answer = (await provision.locator('pre.response').textContent()) ?? '';
    assert.match(answer, /^202\n/);
    assert.match(answer, /^content-type: application\/json/m);
    assert.match(answer, /^date: /m);
    assert.match((await provision.locator('.exchange .label').nth(1).textContent()) ?? '', /^Answer at \d\d:\d\d:\d\d\.\d{3}, \d+ ms after sending$/);
    await page.locator('#pending', { hasText: /^provision: 202 accepted, waiting for callback [0-9a-z]{29} \(\d+ s left\)$/ }).waitFor(WAIT);
    assert.match((await page.textContent('#resource')) ?? '', /\(waiting for its provisioning callback\)$/);
    // It counts down by itself.
    await countdown.filter({ hasNotText: firstReading }).waitFor(WAIT);
    await shot('202-waiting');
    await keep(provision, '202-waiting-entry');

    s.connector.setUp('callbacks');
    await provision.locator('.callback[data-state="done"]').waitFor(WAIT);
    assert.match((await provision.locator('.callback').textContent()) ?? '', /^callback [0-9a-z]{29}: done · accepted by the fake connector at \d\d:\d\d:\d\d\.\d{3}/);
    assert.match((await provision.locator('.attempts-summary').textContent()) ?? '', /^\d+ attempts received: 503( ×\d+)?, 204$/);
    assert.match((await provision.locator('.attempts').textContent()) ?? '', /→ 503[\s\S]*→ 204$/);
    assert.match((await provision.locator('.callback-payload').textContent()) ?? '', /"state": "done"[\s\S]*"Your small bonnet is ready"/);
    await page.locator('#status', { hasText: 'provision: done' }).waitFor(WAIT);
    assert.equal(await page.textContent('#pending'), '');

    // --- credential sets: every one listed, each with its own delete --------------------------
    const sets = page.locator('#credentials .credential-set');
    await sets.filter({ hasText: 'active' }).first().waitFor(WAIT);
    assert.equal(await sets.count(), 1);
    assert.equal(await page.textContent('#credentials .credential'), 'BONNETS_URL=••••••••', 'masked until asked');
    await page.click('#new-credentials');
    await page.locator('#status', { hasText: 'new-credentials: done' }).waitFor(WAIT);
    assert.equal(await sets.count(), 2, 'a new set does not hide the first one');
    await page.click('#reveal');
    const values = await page.locator('#credentials .credential').allTextContents();
    assert.equal(values.length, 2);
    for (const value of values) assert.match(value, /^BONNETS_URL=https:\/\/u[0-9a-f]+:.+@bonnets\.example\/[0-9a-z]{29}$/);
    assert.notEqual(values[0], values[1]);
    await shot('credential-sets');
    const [firstId, secondId] = await sets.evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-id')));
    await sets.filter({ has: page.locator(`code:text-is("${firstId}")`) }).locator('.delete-set').click();
    await page.locator('#status', { hasText: 'delete-credentials: done' }).waitFor(WAIT);
    assert.deepEqual(await sets.evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-id'))), [secondId]);
    await page.click('#reveal');

    // --- single sign-on: the dashboard opens in a tab, the page shows the hop it observed ------
    const resourceId = /Resource ([0-9a-z]{29})/.exec((await page.textContent('#resource')) ?? '')?.[1];
    assert.ok(resourceId !== undefined);
    const [dashboard] = await Promise.all([context.waitForEvent('page'), page.click('#sso')]);
    await dashboard.waitForLoadState('domcontentloaded');
    assert.equal(await dashboard.textContent('h1'), 'Your bonnet');
    assert.equal(new URL(dashboard.url()).pathname, `/dashboard/${resourceId}`);
    const cookie = (await context.cookies(s.target.url)).find((c) => c.name === 'bonnets.sid');
    assert.ok(cookie !== undefined, 'the browser tab got its session cookie');
    // A background tab's animation frames are throttled, and clicks wait on them.
    await dashboard.close();
    await page.bringToFront();
    const sso = await bySeq(entryOf('single sign-on'));
    await sso.locator('.sso-dashboard', { hasText: `Dashboard ${s.target.url}/dashboard/${resourceId} answered 200.` }).waitFor(WAIT);
    assert.match((await sso.locator('.headline').textContent()) ?? '', / · single sign-on → 303 → dashboard 200$/);
    assert.match((await sso.locator('.sso-code').textContent()) ?? '', /^The fake connector issued a single-use code at \d\d:\d\d:\d\d\.\d{3} \(43 characters; not shown/);
    const first = (await sso.locator('.sso-first').textContent()) ?? '';
    assert.match(first, /^GET http:\/\/127\.0\.0\.1:\d+\/v1\/sso\?code=<redacted>&resource_id=[0-9a-z]{29} without cookies → 303 in \d+ ms/);
    assert.match(first, new RegExp(`Location: /dashboard/${resourceId} · sets cookies: bonnets\\.sid \\(`));
    assert.match((await sso.locator('.sso-step').nth(1).textContent()) ?? '', /with cookies bonnets\.sid → 200 in \d+ ms[\s\S]*title "Bonnet [0-9a-z]{29}"/);
    assert.match((await sso.locator('.sso-connector').textContent()) ?? '', /exchanged a code at the fake connector \(token endpoint → 201\) and read the resource \(→ 200\)/);
    await sso.locator('.sso-browser').waitFor(WAIT);
    const pageText = (await page.textContent('body')) ?? '';
    assert.equal(pageText.includes(cookie.value), false, 'no cookie value on the page');
    assert.equal(/code=(?!<redacted>)/.test(pageText), false, 'no SSO code on the page');
    await shot('sso');
    await keep(sso, 'sso-entry');

    // --- Resend: the same signed request (the replay), then re-signed (a repeat) -------------
    const seq = await provision.getAttribute('data-seq');
    await provision.locator('.resend-same').click();
    const replay = entryOf(`provision (resend #${seq}, same signature)`);
    await replay.locator('.headline', { hasText: /→ \d{3} in \d+ ms/ }).waitFor(WAIT);
    const signatureLine = (text: string): string | undefined => /x-signature: (.+)/.exec(text)?.[1];
    const originalRequest = (await provision.locator('pre.request').textContent()) ?? '';
    assert.equal(signatureLine((await replay.locator('pre.request').textContent()) ?? ''), signatureLine(originalRequest));
    await provision.locator('.resend-resigned').click();
    const repeat = entryOf(`provision (resend #${seq}, re-signed)`);
    await repeat.locator('.headline', { hasText: /→ \d{3} in \d+ ms/ }).waitFor(WAIT);
    assert.notEqual(signatureLine((await repeat.locator('pre.request').textContent()) ?? ''), signatureLine(originalRequest));
    await page.locator('#status', { hasText: `resend #${seq} (re-signed): answered, see the newest entry` }).waitFor(WAIT);
    await shot('resend');

    // --- deprovision (202, then its callback) -----------------------------------------------
    await page.click('#deprovision');
    const deprovision = await bySeq(entryOf('deprovision'));
    await deprovision.locator('.callback[data-state="done"]').waitFor(WAIT);
    await page.locator('#resource', { hasText: 'No resource yet.' }).waitFor(WAIT);
    await page.locator('#status', { hasText: 'deprovision: done' }).waitFor(WAIT);
    assert.equal(await page.textContent('#credentials'), 'None.');
    assert.match((await deprovision.locator('.headline').textContent()) ?? '', / · deprovision → 202 in \d+ ms · callback done$/);
    await shot('deprovisioned');

    assert.equal(loads, 1, 'everything arrived without a reload');
    t.diagnostic(`screenshots in ${ARTIFACTS}`);
    await context.close();
  });
});
