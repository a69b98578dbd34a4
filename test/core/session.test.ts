/**
 * The sealed session cookie of the fetch and node hosts: its attributes, what it opens (and when it
 * stops), and that it gives nothing away: no resource id, no token in clear, no opening under
 * another secret or name, no bit changed unnoticed; rotation by a list of secrets.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createProvider } from '../../src/core/provider.js';
import { sealedSession } from '../../src/core/session.js';
import type { Provider, ProviderOptions } from '../../src/core/types.js';
import { memoryStore } from '../../src/store/memory.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { fakeClock } from '../outbox/helpers.js';
import { countingHandlers, newId } from '../adapters/conformance.js';

const OLD = 'the-old-secret-of-this-provider-0123456789';
const NEW = 'the-new-secret-of-this-provider-9876543210';
const HOUR = 3600_000;

describe('sealedSession', () => {
  const clock = fakeClock();
  const login = { resourceId: 'r1234567890abcdefghijklmnopqr', expiresAt: clock.now() + HOUR };

  it('sets an HttpOnly, SameSite=Lax cookie for the login\'s lifetime, Secure on https only (or as told)', () => {
    const auto = sealedSession('test', { secret: OLD }, clock.now);
    const plain = auto.cookie(login, false);
    assert.match(plain, /^marketplace_session=v1\.[A-Za-z0-9_-]+; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax$/);
    assert.match(auto.cookie(login, true), /; SameSite=Lax; Secure$/);
    assert.match(sealedSession('test', { secret: OLD, secure: true }, clock.now).cookie(login, false), /; Secure$/);
    assert.doesNotMatch(sealedSession('test', { secret: OLD, secure: false }, clock.now).cookie(login, true), /Secure/);
    assert.match(sealedSession('test', { secret: OLD, cookieName: 'bonnets_login', path: '/dashboard' }, clock.now).cookie(login, false), /^bonnets_login=v1\.[^;]+; Path=\/dashboard;/);
  });

  it('opens its own cookie until the login expires, among other cookies', () => {
    const session = sealedSession('test', { secret: OLD }, clock.now);
    const value = session.cookie(login, false).split(';')[0]!;
    assert.deepEqual(session.open(`theme=dark; ${value}; lang=en`), login);
    assert.equal(session.open(undefined), undefined);
    assert.equal(session.open('theme=dark'), undefined);
    clock.advance(HOUR - 1);
    assert.deepEqual(session.open(value), login);
    clock.advance(1);
    assert.equal(session.open(value), undefined, 'expired');
    clock.set(login.expiresAt - HOUR);
  });

  it('keeps the resource and the expiry sealed: nothing readable, nothing changeable', () => {
    const session = sealedSession('test', { secret: OLD }, clock.now);
    const value = session.cookie(login, false).split(';')[0]!;
    const sealed = value.slice('marketplace_session='.length);
    assert.equal(Buffer.from(sealed.slice(3), 'base64url').toString('latin1').includes(login.resourceId), false);
    assert.notEqual(session.cookie(login, false).split(';')[0], value, 'a fresh IV every time');
    // Every single-character change of the sealed text is refused.
    for (let i = 3; i < sealed.length; i++) {
      const changed = sealed.slice(0, i) + (sealed[i] === 'A' ? 'B' : 'A') + sealed.slice(i + 1);
      assert.equal(session.open(`marketplace_session=${changed}`), undefined, `changed at ${i}`);
    }
    assert.equal(session.open(`marketplace_session=${sealed}x`), undefined);
    assert.equal(session.open(`marketplace_session=v2${sealed.slice(2)}`), undefined);
    assert.equal(session.open(`marketplace_session=${'v1.'.padEnd(600, 'A')}`), undefined);
    assert.equal(sealedSession('test', { secret: NEW }, clock.now).open(value), undefined, 'another secret');
    assert.equal(sealedSession('test', { secret: OLD, cookieName: 'other' }, clock.now).open(value.replace('marketplace_session', 'other')), undefined, 'another name');
  });

  it('rotates: the first secret seals, every listed one opens', () => {
    const before = sealedSession('test', { secret: OLD }, clock.now);
    const during = sealedSession('test', { secret: [NEW, OLD] }, clock.now);
    const after = sealedSession('test', { secret: NEW }, clock.now);
    const old = before.cookie(login, false).split(';')[0]!;
    const fresh = during.cookie(login, false).split(';')[0]!;
    assert.deepEqual(during.open(old), login);
    assert.deepEqual(after.open(fresh), login);
    assert.equal(before.open(fresh), undefined);
  });
});

describe('provider.session with the sealed cookie', () => {
  const CLIENT = { clientId: 'seal-client', clientSecret: 'seal-client-secret-value' };
  const clock = fakeClock(Date.now());
  let connector: FakeConnector;
  let provider: Provider;
  const resource = newId();

  before(async () => {
    connector = createFakeConnector({ ...CLIENT, tokenTtlSeconds: 7200, now: clock.now });
    const { url } = await connector.listen();
    connector.addResource({ id: resource });
    const options: ProviderOptions = {
      handlers: countingHandlers().handlers, store: memoryStore(), logger: false, now: clock.now, outbox: false,
      connector: { url, ...CLIENT }, sso: { session: { secret: OLD } },
    };
    provider = createProvider(options);
  });
  after(async () => {
    await provider.close();
    await connector.close();
  });

  it('answers the login of a signed-in browser until the token expires, on https with Secure', async () => {
    const code = connector.issueSsoCode({ resourceId: resource });
    const answer = await provider.fetch(new Request(`https://api.example.com/v1/sso?code=${encodeURIComponent(code)}&resource_id=${resource}`));
    assert.equal(answer.status, 303);
    const [cookie] = answer.headers.getSetCookie();
    assert.match(cookie ?? '', /; Max-Age=7200; HttpOnly; SameSite=Lax; Secure$/);
    const value = cookie!.split(';')[0]!;
    assert.equal(value.includes(code), false);
    const login = await provider.session(new Request('https://api.example.com/dashboard', { headers: { cookie: value } }));
    assert.equal(login?.resourceId, resource);
    assert.deepEqual(await provider.session({ headers: { cookie: value } }), login, 'a node request reads the same');
    // The connector client dates the token by the real clock: a minute more is past it whatever ran between.
    clock.advance(7200_000 + 60_000);
    assert.equal(await provider.session({ headers: { cookie: value } }), undefined);
  });
});
