import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { chromium, type Browser } from 'playwright-core';
import type { SimulatorLogEntry, SimulatorState } from '../../src/testkit/simulator/index.js';
import { act, CHROMIUM, CHROMIUM_ARGS, CHROMIUM_SKIP, openEvents, startExample, startToy, type SimSetup } from './helpers/simulator.js';

const entry = (state: SimulatorState, action: string): SimulatorLogEntry | undefined => state.log.find((e) => e.action === action);
const bySeq = (state: SimulatorState, seq: number): SimulatorLogEntry | undefined => state.log.find((e) => e.seq === seq);

describe('marketplace simulator (serve)', () => {
  describe('in headless Chromium, against a provider that answers at once', { skip: CHROMIUM_SKIP }, () => {
    let browser: Browser;
    let s: SimSetup;
    before(async () => {
      s = await startExample();
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });
    after(async () => {
      await browser?.close();
      await s?.close();
    });

    it('provisions, shows the credentials, and opens the dashboard through single sign-on', async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(s.url);
      await page.locator('#live', { hasText: 'live' }).waitFor();
      assert.equal(await page.textContent('#resource'), 'No resource yet.');
      assert.equal(await page.isDisabled('#rotate'), true);

      await page.click('#provision');
      await page.locator('#status', { hasText: 'provision: done' }).waitFor();
      // Values are masked until asked for.
      assert.equal(await page.textContent('#credentials .credential'), 'BONNETS_URL=••••••••');
      await page.click('#reveal');
      const credential = (await page.textContent('#credentials .credential')) ?? '';
      assert.match(credential, /^BONNETS_URL=https:\/\/u[0-9a-f]+:.+@bonnets\.example\/[0-9a-z]{29}$/);
      const resourceText = (await page.textContent('#resource')) ?? '';
      const resourceId = /Resource ([0-9a-z]{29}) on plan small/.exec(resourceText)?.[1];
      assert.ok(resourceId !== undefined, resourceText);
      assert.match((await page.textContent('#log')) ?? '', /provision credentials → 201 in \d+ ms[\s\S]*x-signature: [A-Za-z0-9_-]{86} [\s\S]*provision → 201 in \d+ ms[\s\S]*PUT http:\/\/127\.0\.0\.1:\d+\/v1\/resources\//);

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
      await page.locator('#status', { hasText: 'rotate: done' }).waitFor();
      await page.locator('#credentials .credential', { hasNotText: credential }).waitFor();
      assert.equal(await page.locator('#credentials .credential-set').count(), 1, 'a swap ends with one set');

      await page.click('#deprovision');
      await page.locator('#resource', { hasText: 'No resource yet.' }).waitFor();
      assert.equal(await page.textContent('#credentials'), 'None.');
      assert.match((await page.textContent('#status')) ?? '', /deprovision: done/);
      await context.close();
    });
  });

  describe('backend, against a provider that answers 202 and calls back', () => {
    let s: SimSetup;
    before(async () => {
      s = await startExample({ async: true });
    });
    after(() => s.close());

    it('waits for callbacks and rotates by swapping', async () => {
      const provisioned = await act(s.url, 'provision');
      assert.equal(provisioned.status, 200, provisioned.answer.message);
      const [first] = provisioned.answer.state.credentials;
      assert.ok(first !== undefined && first.values !== null);
      assert.equal(first.status, 'active');
      const credentialsEntry = provisioned.answer.state.log[0];
      assert.equal(credentialsEntry?.response?.status, 202);
      assert.equal(credentialsEntry?.callback?.state, 'done', 'the credential callback was accepted');
      assert.deepEqual(credentialsEntry?.callback?.attempts.map((a) => [a.status, a.authorized]), [[204, true]]);
      assert.equal(provisioned.answer.state.resource?.status, 'provisioned');

      const rotated = await act(s.url, 'rotate');
      assert.equal(rotated.status, 200, rotated.answer.message);
      assert.equal(rotated.answer.state.credentials.length, 1);
      assert.notDeepEqual(rotated.answer.state.credentials[0]?.values, first.values);
      assert.deepEqual(rotated.answer.state.log.slice(0, 2).map((e) => e.action), ['delete old credentials', 'provision credentials'], 'swap: new set first, then the old one deleted');
      const json = JSON.stringify(rotated.answer.state.log);
      assert.equal(json.includes(Object.values(first.values)[0] ?? '-'), false, 'the log redacts credential values');

      const refused = await act(s.url, 'resize', { plan: 'no-such-plan' });
      assert.equal(refused.status, 502);
      assert.match(refused.answer.message ?? '', /the provider answered 400/);

      assert.equal((await act(s.url, 'deprovision')).status, 200);
      assert.equal((await act(s.url, 'rotate')).answer.message, 'provision a resource first');
    });

    it('shows a 202 the moment it is answered, each callback attempt as it lands, then done', async () => {
      const feed = await openEvents(s.url);
      try {
        // Callbacks are refused until the page has shown the waiting entry: nothing is timed.
        s.connector.setDown('callbacks', { status: 503 });
        const from = (await feed.until('the first state', () => true)).log[0]?.seq ?? 0;
        const pressed = act(s.url, 'provision');
        const waiting = await feed.until('the provision entry waiting, with a refused attempt', (state) => {
          const e = state.log.find((x) => x.action === 'provision' && x.seq > from);
          return e?.callback?.state === 'waiting' && e.callback.attempts.some((a) => a.status === 503);
        });
        const shown = waiting.log.find((x) => x.action === 'provision' && x.seq > from)!;
        assert.equal(shown.response?.status, 202);
        assert.equal(waiting.resource?.status, 'pending');
        assert.equal(waiting.running, 'provision');
        assert.equal(waiting.pending?.callbackId, shown.callback?.id);
        // Stamped when sent, answered later, with its latency and every header.
        assert.ok(Date.parse(shown.at) <= Date.parse(shown.response.at));
        assert.equal(typeof shown.response?.latencyMs, 'number');
        assert.match(shown.response?.headers['content-type'] ?? '', /^application\/json/);
        assert.ok('date' in (shown.response?.headers ?? {}), 'the answer lists every header, Date included');
        // The countdowns: the button's own wait, and the marketplace's 24 h deadline.
        const answeredAt = Date.parse(shown.response.at);
        assert.ok(shown.callback!.waitUntil! - answeredAt > 55_000 && shown.callback!.waitUntil! - answeredAt <= 60_000 + 1000);
        assert.ok(Math.abs(shown.callback!.deadline - answeredAt - 24 * 3600_000) < 5000);
        assert.equal(shown.callback?.id, shown.request.headers['x-callback-id']);

        s.connector.setUp('callbacks');
        const landed = await feed.until('the provision callback done', (state) => bySeq(state, shown.seq)?.callback?.state === 'done');
        const done = bySeq(landed, shown.seq)!;
        assert.equal(done.callback?.attempts.at(-1)?.status, 204);
        assert.ok(done.callback.attempts.length >= 2, 'the refused attempts stay listed');
        assert.deepEqual(done.callback?.payload, { state: 'done', message: 'Your small bonnet is ready' });
        const answer = await pressed;
        assert.equal(answer.status, 200, answer.answer.message);
        assert.equal((await act(s.url, 'deprovision')).status, 200);
      } finally {
        s.connector.resetFailures();
        feed.close();
      }
    });

    it('lists every credential set, each with its own delete', async () => {
      assert.equal((await act(s.url, 'provision')).status, 200);
      await act(s.url, 'new-credentials');
      const three = await act(s.url, 'new-credentials');
      assert.equal(three.status, 200, three.answer.message);
      const sets = three.answer.state.credentials;
      assert.equal(sets.length, 3, 'a new set does not hide the older ones');
      assert.equal(new Set(sets.map((c) => JSON.stringify(c.values))).size, 3);

      const middle = sets[1]!;
      const deleted = await act(s.url, 'delete-credentials', { id: middle.id });
      assert.equal(deleted.status, 200, deleted.answer.message);
      assert.deepEqual(deleted.answer.state.credentials.map((c) => c.id), [sets[0]!.id, sets[2]!.id]);
      const del = deleted.answer.state.log[0]!;
      assert.equal(del.request.url.endsWith(`/v1/credentials/${middle.id}`), true);
      assert.equal(del.callback?.state, 'done');

      const unknown = await act(s.url, 'delete-credentials', { id: middle.id });
      assert.equal(unknown.answer.message, 'that credential set is not listed');
      assert.equal((await act(s.url, 'deprovision')).status, 200);
    });
  });

  describe('backend, rotation by replacing (--credential single)', () => {
    it('deletes the current set first, then asks for a new one, and leaves older sets alone', async () => {
      const s = await startExample({ simulator: { credential: 'single' } });
      try {
        assert.equal((await act(s.url, 'provision')).status, 200);
        const two = await act(s.url, 'new-credentials');
        const [older, current] = two.answer.state.credentials;
        const rotated = await act(s.url, 'rotate');
        assert.equal(rotated.status, 200, rotated.answer.message);
        assert.deepEqual(rotated.answer.state.log.slice(0, 2).map((e) => [e.action, e.request.method]), [['provision credentials', 'PUT'], ['delete old credentials', 'DELETE']]);
        assert.equal(rotated.answer.state.log[1]?.request.url.endsWith(`/v1/credentials/${current!.id}`), true, 'the newest set is the one replaced');
        const ids = rotated.answer.state.credentials.map((c) => c.id);
        assert.equal(ids.length, 2);
        assert.equal(ids[0], older!.id);
        assert.equal(ids.includes(current!.id), false);
      } finally {
        await s.close();
      }
    });
  });

  describe('backend, what it shows when things go wrong', () => {
    it('keeps watching after the button gave up, and applies a late callback', async () => {
      const s = await startExample({ async: true, simulator: { callbackTimeoutMs: 200 } });
      const feed = await openEvents(s.url);
      try {
        s.connector.setDown('callbacks', { status: 503 });
        const gaveUp = await act(s.url, 'provision');
        assert.equal(gaveUp.status, 502);
        assert.match(gaveUp.answer.message ?? '', /^no callback within 200 ms; entry #1 keeps watching callback [0-9a-z]{29} until the 24 h deadline$/);
        assert.equal(gaveUp.answer.state.resource?.status, 'pending', 'the resource exists at the provider, waiting');
        assert.equal(gaveUp.answer.state.log[0]?.callback?.state, 'waiting');

        s.connector.setUp('callbacks');
        const late = await feed.until('the late callback applied', (state) => state.resource?.status === 'provisioned');
        assert.equal(entry(late, 'provision')?.callback?.state, 'done');
      } finally {
        feed.close();
        await s.close();
      }
    });

    it('shows an error callback as such and keeps the resource', async () => {
      const s = await startToy({ async: true, bugs: { asyncErrorOnDeprovision: true } });
      try {
        assert.equal((await act(s.url, 'provision')).status, 200);
        const failed = await act(s.url, 'deprovision');
        assert.equal(failed.status, 502);
        assert.equal(failed.answer.message, 'the provider reported an error: Could not unravel');
        assert.equal(failed.answer.state.log[0]?.callback?.state, 'error');
        assert.equal(failed.answer.state.resource?.status, 'provisioned');
      } finally {
        await s.close();
      }
    });

    it('says "no answer" with the reason when the provider is down', async () => {
      const s = await startExample();
      await s.target.close();
      try {
        const down = await act(s.url, 'provision');
        assert.equal(down.status, 502);
        assert.match(down.answer.message ?? '', /^no answer: ECONNREFUSED from http:\/\/127\.0\.0\.1:\d+$/);
        assert.equal(down.answer.state.log[0]?.error, 'no answer: ECONNREFUSED');
        assert.equal(down.answer.state.log[0]?.response, undefined);
        assert.equal(down.answer.state.resource, null);
      } finally {
        await s.close();
      }
    });
  });

  describe('resend', () => {
    let s: SimSetup;
    before(async () => {
      s = await startExample();
    });
    after(() => s.close());

    it('sends the same signed request again, or re-signs it, and logs each answer', async () => {
      const provisioned = await act(s.url, 'provision');
      assert.equal(provisioned.status, 200);
      const original = entry(provisioned.answer.state, 'provision')!;

      const same = await fetch(`${s.url}/api/resend`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ seq: original.seq, mode: 'same' }) });
      const sameState = ((await same.json()) as { state: SimulatorState }).state;
      const replay = sameState.log[0]!;
      assert.equal(same.status, 200);
      assert.deepEqual(replay.resend, { of: original.seq, mode: 'same' });
      assert.equal(replay.action, `provision (resend #${original.seq}, same signature)`);
      assert.equal(replay.request.headers['x-signature'], original.request.headers['x-signature'], 'the very same signature');
      assert.equal(replay.request.headers.date, original.request.headers.date);
      // The example's router answers an identical repeat like the first time.
      assert.equal(replay.response?.status, original.response?.status);
      assert.deepEqual(replay.response?.body, original.response?.body);

      const resigned = await fetch(`${s.url}/api/resend`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ seq: original.seq, mode: 'resigned' }) });
      const again = ((await resigned.json()) as { state: SimulatorState }).state.log[0]!;
      assert.deepEqual(again.resend, { of: original.seq, mode: 'resigned' });
      assert.notEqual(again.request.headers['x-signature'], original.request.headers['x-signature'], 'a fresh signature');
      assert.deepEqual(again.request.body, original.request.body);
      assert.equal(again.request.headers['x-callback-id'], original.request.headers['x-callback-id'], 'a repeat of the same operation');
      assert.equal(again.response?.status, original.response?.status);

      const gone = await fetch(`${s.url}/api/resend`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ seq: 999, mode: 'same' }) });
      assert.equal(gone.status, 404);
      assert.deepEqual(await gone.json(), { message: 'That request is no longer in the log' });
      assert.equal((await act(s.url, 'deprovision')).status, 200);
    });
  });

  describe('single sign-on, as observed', () => {
    it('logs the code, /v1/sso\'s status and Location, the cookie names and the dashboard\'s status', async () => {
      const s = await startExample();
      try {
        const provisioned = await act(s.url, 'provision');
        const resourceId = provisioned.answer.state.resource!.id;
        const hop = await fetch(`${s.url}/sso`, { redirect: 'manual' });
        assert.equal(hop.status, 302);
        const state = (await (await fetch(`${s.url}/api/state`)).json()) as SimulatorState;
        const sso = state.log[0]!;
        assert.equal(sso.action, 'single sign-on');
        assert.ok(sso.sso?.finished);
        assert.equal(sso.sso.code.length, 43);
        const [first, second] = sso.sso.steps;
        assert.equal(first?.status, 303);
        assert.equal(first?.location, `/dashboard/${resourceId}`);
        assert.match(first?.url ?? '', /\/v1\/sso\?code=<redacted>&resource_id=/);
        assert.equal(first?.cookiesSet.length, 1);
        assert.match(first?.cookiesSet[0] ?? '', /^bonnets\.sid \(.*HttpOnly.*\)$/);
        assert.equal(second?.url, `${s.target.url}/dashboard/${resourceId}`);
        assert.deepEqual(second?.cookiesSent, ['bonnets.sid']);
        assert.equal(second?.status, 200);
        assert.equal(second?.title, `Bonnet ${resourceId}`);
        assert.equal(sso.sso.steps.length, 2);
        assert.deepEqual(sso.sso.connector, { codeExchanges: [201], resourceChecks: [200] });
        assert.equal(sso.response?.status, 303);
        assert.match(sso.response?.headers['set-cookie'] ?? '', /^bonnets\.sid=<redacted>;/);
        assert.equal(JSON.stringify(state).includes('s%3A'), false, 'no session cookie value anywhere');
        assert.ok(sso.sso.browserSentAt !== undefined);

        // The browser's own code still works: the check above used another.
        const location = new URL(hop.headers.get('location') ?? '');
        assert.equal(location.origin + location.pathname, `${s.target.url}/v1/sso`);
        const browserHop = await fetch(location, { redirect: 'manual', headers: { accept: 'text/html' } });
        assert.equal(browserHop.status, 303);
      } finally {
        await s.close();
      }
    });

    it('shows a dashboard that fails, and a provider that does not answer', async () => {
      const s = await startToy();
      try {
        await act(s.url, 'provision');
        await fetch(`${s.url}/sso`, { redirect: 'manual' });
        const state = (await (await fetch(`${s.url}/api/state`)).json()) as SimulatorState;
        const steps = state.log[0]!.sso!.steps;
        assert.deepEqual(steps.map((step) => step.status), [303, 404], 'the toy has no dashboard route');
        assert.match(steps[0]?.cookiesSet[0] ?? '', /^toy\.sid \(HttpOnly; Path=\/; SameSite=Lax\)$/);
        assert.match(steps[1]?.message ?? '', /Cannot GET \/dashboard\//);

        await s.target.close();
        await fetch(`${s.url}/sso`, { redirect: 'manual' });
        const down = (await (await fetch(`${s.url}/api/state`)).json()) as SimulatorState;
        assert.equal(down.log[0]?.sso?.steps[0]?.error, 'no answer: ECONNREFUSED');
        assert.equal(down.log[0]?.error, 'no answer: ECONNREFUSED');
      } finally {
        await s.close();
      }
    });
  });

  describe('guards', () => {
    let s: SimSetup;
    before(async () => {
      s = await startExample();
    });
    after(() => s.close());

    it('only answers JSON posts on a loopback Host, and redirects SSO only for a resource', async () => {
      const form = await fetch(`${s.url}/api/provision`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
      assert.equal(form.status, 415);
      const resendForm = await fetch(`${s.url}/api/resend`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' });
      assert.equal(resendForm.status, 415);
      // fetch always sends the URL's Host, so a raw request plays the rebound DNS name.
      for (const path of ['/api/state', '/api/events']) {
        const rebound = await new Promise<number>((resolve, reject) => {
          request(`${s.url}${path}`, { headers: { host: 'evil.example' } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          }).once('error', reject).end();
        });
        assert.equal(rebound, 403, path);
      }
      assert.equal((await fetch(`${s.url}/api/nope`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 404);
      assert.equal((await fetch(`${s.url}/sso`, { redirect: 'manual' })).status, 409);
    });

    it('streams the state to the page', async () => {
      const feed = await openEvents(s.url);
      const first = await feed.until('the first state', () => true);
      assert.equal(first.provider, s.target.url);
      assert.deepEqual(first.credentials, []);
      feed.close();
    });
  });
});
