import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express5 from 'express';
import { createRequire } from 'node:module';
import request from 'supertest';
import { keepRawBody, marketplaceRouter, memoryStore, type ProviderHandlers } from '../../src/index.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { createSigner, generateKeyPair } from '../../src/testkit/index.js';
import { logCapture } from '../helpers/http.js';

// An app that parses JSON globally, before the marketplace router: with `express.json({ verify:
// keepRawBody })` the router verifies the bytes the parser kept; with a plain `express.json()` it
// fails closed (500) and its log line names keepRawBody. On Express 5 and on Express 4.

const HOST = 'provider.test';
const ID = '2keeprawbody0000000000000001';
const handlers: ProviderHandlers = {
  provision: ({ plan }) => `Your ${plan} bonnet is ready`,
  changePlan: () => undefined,
  deprovision: () => undefined,
  provisionCredentials: () => ({ credentials: { BONNETS_URL: 'https://bonnets.example' } }),
  deprovisionCredentials: () => undefined,
};

type Express = typeof express5;
// Express 4 beside 5 (the `express4` alias); it ships no types of its own, and its API here is 5's.
const express4 = createRequire(import.meta.url)('express4') as Express;

function app(express: Express, verify: boolean) {
  const master = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey });
  const logs = logCapture();
  const router = marketplaceRouter({ handlers, store: memoryStore(), masterKey: master.publicKey, publicHost: HOST, logger: createRedactingLogger(logs.stream, 'warn') });
  const server = express();
  server.use(verify ? express.json({ verify: keepRawBody }) : express.json());
  server.use(router);
  server.post('/own-route', (req, res) => {
    res.json({ parsed: req.body as unknown });
  });
  const body = JSON.stringify({ id: ID, product: 'bonnets', plan: 'small', region: 'all::global' });
  const signed = (payload: string) => signer.sign({ method: 'PUT', url: `/v1/resources/${ID}`, host: HOST, headers: { 'content-type': 'application/json' }, body: payload });
  const put = (headers: Record<string, string>, payload: string) => request(server).put(`/v1/resources/${ID}`).set(headers).set('Host', HOST).send(payload);
  return { server, router, logs, body, signed, put };
}

for (const [name, express] of [['Express 5', express5], ['Express 4', express4]] as const) {
  describe(`express.json({ verify: keepRawBody }) before marketplaceRouter, ${name}`, () => {
    it('verifies the kept bytes: a signed PUT provisions, a changed body is refused', async () => {
      const setup = app(express, true);
      try {
        const created = await setup.put(setup.signed(setup.body), setup.body);
        assert.equal(created.status, 201, created.text);
        assert.deepEqual(created.body, { message: 'Your small bonnet is ready' });
        const tampered = setup.body.replace('small', 'large');
        const refused = await setup.put(setup.signed(setup.body), tampered);
        assert.equal(refused.status, 401, refused.text);
        // The app's own routes still get express.json()'s parse.
        const own = await request(setup.server).post('/own-route').send({ a: 1 });
        assert.deepEqual(own.body, { parsed: { a: 1 } });
      } finally {
        await setup.router.close();
      }
    });

    it('without it, fails closed with 500 ERR_BODY_ALREADY_PARSED and a log line naming keepRawBody', async () => {
      const setup = app(express, false);
      try {
        const answer = await setup.put(setup.signed(setup.body), setup.body);
        assert.equal(answer.status, 500, answer.text);
        assert.equal(typeof (answer.body as { message?: unknown }).message, 'string');
        const lines = setup.logs.lines.map((line) => JSON.parse(line) as { code?: string; msg?: string; hint?: string });
        const hint = lines.find((line) => line.code === 'ERR_BODY_ALREADY_PARSED');
        assert.ok(hint !== undefined, setup.logs.text());
        assert.match(JSON.stringify(hint), /express\.json\(\{ verify: keepRawBody \}\)/);
      } finally {
        await setup.router.close();
      }
    });
  });
}
