/**
 * Our routes are Express routes on both majors: a host app's metrics middleware, reading `req.route`
 * and `req.params` when the response finishes (as route-labelled metrics and OpenTelemetry's
 * Express instrumentation do), sees the route pattern and the id of every signed request, mounted
 * at the root or under a path; and the host's own routes added to the router still work.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import express5, { type NextFunction, type Request, type Response } from 'express';
import session from 'express-session';
import { expressAdapter, type MarketplaceRouter } from '../../src/adapters/express.js';
import { memoryStore } from '../../src/store/memory.js';
import { createFakeConnector, type FakeConnector } from '../../src/testkit/fake-connector.js';
import { marketplaceClient, type Running } from '../helpers/http.js';
import { waitFor } from '../outbox/helpers.js';
import { listening } from './bridge.js';
import { CATALOG, countingHandlers, newId } from './conformance.js';
import type { ExpressMajor } from './express-hosts.js';

const express4 = createRequire(import.meta.url)('express4') as ExpressMajor;
const PERIOD = 'period_start=2026-10-01T00:00:00Z&period_end=2026-11-01T00:00:00Z';
const CLIENT = { clientId: 'route-client', clientSecret: 'route-client-secret-value' };

for (const [name, express] of [['Express 5', express5 as unknown as ExpressMajor], ['Express 4', express4]] as const) {
  for (const mount of ['', '/marketplace']) {
    describe(`${name}: req.route and req.params for the host's middleware${mount === '' ? '' : ` (mounted at ${mount})`}`, () => {
      const client = marketplaceClient();
      const seen: { method: string; status: number; route: string | undefined; id: string | undefined; baseUrl: string }[] = [];
      let router: MarketplaceRouter;
      let connector: FakeConnector;
      let target: Running & { close(): Promise<void> };

      before(async () => {
        connector = createFakeConnector(CLIENT);
        const { url } = await connector.listen();
        connector.addResource({ id: 'r00000000000000000000000000000' });
        router = expressAdapter(express.Router, {
          handlers: countingHandlers().handlers, store: memoryStore(), catalog: CATALOG, masterKey: client.masterPublicKey, logger: false,
          outbox: false, connector: { url, ...CLIENT }, sso: true,
        });
        const app = express();
        // A metrics middleware as a host app writes one: the route pattern when the response finishes.
        app.use((req: Request, res: Response, next: NextFunction) => {
          res.on('finish', () => {
            const params = req.params as Record<string, string | undefined>;
            seen.push({ method: req.method, status: res.statusCode, route: (req.route as { path?: string } | undefined)?.path, id: params.id, baseUrl: req.baseUrl });
          });
          next();
        });
        app.use(session({ secret: 'route-session-secret', resave: false, saveUninitialized: false }));
        if (mount === '') app.use(router);
        else app.use(mount, router);
        router.get('/status', (_req: Request, res: Response) => void res.json({ ok: true }));
        const running = await listening(createServer(app));
        target = { ...running, server: running.server };
      });
      after(async () => {
        await target.close();
        await router.close();
        await connector.close();
      });

      it('sees the route pattern and the decoded id of every route, refusals included', async () => {
        const id = newId();
        const credential = newId();
        seen.length = 0;
        const steps: [string, string, unknown, number, string][] = [
          ['PUT', `/v1/resources/${id}`, { id, product: 'bonnets', plan: 'small', region: 'aws::us-east-1' }, 201, '/v1/resources/:id'],
          ['PATCH', `/v1/resources/${id}/`, { plan: 'large' }, 200, '/v1/resources/:id'],
          ['GET', `/v1/resources/${id}/measures?${PERIOD}`, undefined, 204, '/v1/resources/:id/measures'],
          ['PUT', `/v1/credentials/${credential}`, { id: credential, resource_id: id }, 201, '/v1/credentials/:id'],
          ['POST', `/v1/credentials/${credential}`, undefined, 405, '/v1/credentials/:id'],
          ['DELETE', `/v1/resources/${newId()}`, undefined, 404, '/v1/resources/:id'],
        ];
        for (const [method, path, body, status] of steps) {
          const answer = await client.send(target, method, `${mount}${path}`, body);
          assert.equal(answer.status, status, `${method} ${path}: ${answer.text}`);
        }
        const sso = await fetch(`${target.url}${mount}/v1/sso?code=nope&resource_id=r00000000000000000000000000000`, { redirect: 'manual' });
        assert.equal(sso.status, 401);
        // Each line is recorded on 'finish', which the client may see after its answer.
        await waitFor(() => seen.length >= steps.length + 1, 'the host middleware to see every response finish');
        assert.deepEqual(seen.map((s) => [s.method, s.status, s.route]), [...steps.map(([method, , , status, route]) => [method, status, route]), ['GET', 401, '/v1/sso']]);
        assert.deepEqual(seen.slice(0, 3).map((s) => s.id), [id, id, id]);
        assert.equal(seen[3]!.id, credential);
      });

      it('keeps the host\'s own routes on the router, and verifies before them under its prefixes', async () => {
        assert.deepEqual(await (await fetch(`${target.url}${mount}/status`)).json(), { ok: true });
        assert.equal((await fetch(`${target.url}${mount}/v1/resources/a/b`)).status, 401);
      });
    });
  }
}
