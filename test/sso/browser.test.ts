import { describe, it } from 'node:test';
import * as assert from 'node:assert/strict';
import express from 'express';
import session from 'express-session';
import request from 'supertest';
import { ConnectorError } from '../../src/errors.js';
import { requireMarketplaceSession, ssoHandler, type SsoFailure } from '../../src/sso/index.js';
import { marketplaceRouter } from '../../src/provider/router.js';
import { memoryStore } from '../../src/store/memory.js';
import { pino } from 'pino';
import { logCapture } from '../helpers/http.js';

const RES = '2f1ak2x0b7xdwrnk7vz8y4q3cj9e1';
const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

function app(options: { onError?: (req: express.Request, res: express.Response, failure: SsoFailure) => void; onMissing?: (req: express.Request, res: express.Response, failure: SsoFailure) => void; exchange?: () => Promise<never> } = {}) {
  const calls: string[] = [];
  const capture = logCapture();
  const instance = express();
  instance.use(session({ secret: 'test-session-secret', resave: false, saveUninitialized: false }));
  instance.get('/v1/sso', ssoHandler({
    connector: {
      exchangeCode: options.exchange ?? (() => Promise.reject(new ConnectorError('ERR_CONNECTOR_INVALID_GRANT', 'invalid_grant', 400))),
      getResource: async (id) => {
        calls.push(id);
        return { id };
      },
    },
    logger: pino({}, capture.stream),
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  }));
  instance.get('/dashboard/:id', requireMarketplaceSession({ logger: false, ...(options.onMissing === undefined ? {} : { onMissing: options.onMissing }) }), (_req, res) => void res.send('ok'));
  return { app: instance, calls, capture };
}

describe('single sign-on for browsers', () => {
  it('answers an HTML page to browsers and JSON to API clients', async () => {
    const { app: instance } = app();
    const page = await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: RES }).set('Accept', BROWSER);
    assert.equal(page.status, 401);
    assert.match(page.headers['content-type'] as string, /^text\/html/);
    assert.match(page.text, /<!doctype html>[\s\S]*invalid, expired or already used/);
    const json = await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: RES }).set('Accept', 'application/json');
    assert.equal(json.status, 401);
    assert.deepEqual(Object.keys(json.body as object), ['message']);

    const guard = await request(instance).get(`/dashboard/${RES}`).set('Accept', BROWSER);
    assert.equal(guard.status, 401);
    assert.match(guard.text, /<h1>Sign-in did not work<\/h1>[\s\S]*Sign in through the marketplace/);
    assert.equal((await request(instance).get(`/dashboard/${RES}`)).body.message, 'Sign in through the marketplace to open this dashboard');
  });

  it('lets onError and onMissing answer instead (failureRedirect)', async () => {
    const { app: instance } = app({
      onError: (_req, res, failure) => res.redirect(303, `/sorry?reason=${failure.reason}&status=${failure.status}`),
      onMissing: (_req, res, failure) => res.redirect(303, `/login?reason=${failure.reason}`),
    });
    const sso = await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: RES });
    assert.equal(sso.status, 303);
    assert.equal(sso.headers.location, '/sorry?reason=invalid-code&status=401');
    const bad = await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: '..' });
    assert.equal(bad.headers.location, '/sorry?reason=bad-request&status=400');
    const guard = await request(instance).get(`/dashboard/${RES}`);
    assert.equal(guard.status, 303);
    assert.equal(guard.headers.location, '/login?reason=no-login');
  });

  it('refuses ids the provider routes refuse before any connector call', async () => {
    let exchanged = 0;
    const { app: instance, calls } = app({ exchange: () => { exchanged++; return Promise.reject(new Error('not reached')); } });
    for (const id of ['.', '..', '-x', 'a/b', 'x'.repeat(200)]) {
      assert.equal((await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: id })).status, 400, id);
    }
    assert.equal(exchanged, 0);
    assert.deepEqual(calls, []);
  });

  it('logs a refusal of the provider\'s client credentials at error level and answers 401', async () => {
    const { app: instance, capture } = app({ exchange: () => Promise.reject(new ConnectorError('ERR_CONNECTOR_AUTH', 'refused', 401)) });
    assert.equal((await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: RES })).status, 401);
    const line = JSON.parse(capture.lines.find((l) => l.includes('client credentials'))!) as { level: number; code: string };
    assert.equal(line.level, 50);
    assert.equal(line.code, 'ERR_CONNECTOR_AUTH');
  });

  it('answers GET /v1/sso with a JSON reason when the router has no SSO configured', async () => {
    const router = marketplaceRouter({
      store: memoryStore(),
      logger: false,
      publicHost: 'api.example.com',
      handlers: { provision: () => undefined, changePlan: () => undefined, deprovision: () => undefined, provisionCredentials: () => ({ credentials: { A: 'b' } }), deprovisionCredentials: () => undefined },
    });
    const instance = express();
    instance.use(router);
    const res = await request(instance).get('/v1/sso').query({ code: 'abc', resource_id: RES });
    await router.close();
    assert.equal(res.status, 404);
    assert.match(res.headers['content-type'] as string, /^application\/json/);
    assert.match((res.body as { message: string }).message, /not configured/);
  });
});
