/**
 * Type-level tests of the observability exports (checked by `npm run typecheck`): misuse must not
 * compile, correct use must. The runtime part checks the names are exported from the entry.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import { Registry } from 'prom-client';
import * as entry from '../../src/index.js';
import { createHealthCheck, healthHandler, memoryStore, mountObservability, type HealthReport, type HealthStatus, type MetricsOptions } from '../../src/index.js';

function typeChecks(): void {
  const app = express();
  const registry = new Registry();
  const health = createHealthCheck({ store: memoryStore(), timeoutMs: 500, outboxMaxAgeMs: 30 * 60_000 });
  mountObservability(app, { registry, health, paths: { live: false } });
  app.get('/healthz', healthHandler(health));
  const metrics: MetricsOptions = { registry };
  void metrics;
  const status: HealthStatus = 'degraded';
  void status;
  // @ts-expect-error the store is required
  createHealthCheck({ timeoutMs: 5 });
  // @ts-expect-error timeouts are numbers of milliseconds
  createHealthCheck({ store: memoryStore(), timeoutMs: '2s' });
  // @ts-expect-error a path is a string or false
  mountObservability(app, { registry, paths: { metrics: true } });
  // @ts-expect-error a status is ok, degraded or down
  const wrong: HealthReport = { status: 'fine', store: 'ok', outbox: null };
  void wrong;
  // @ts-expect-error healthHandler takes a health source, not a report
  healthHandler({ status: 'ok', store: 'ok', outbox: null });
}
void typeChecks;

describe('observability exports', () => {
  it('are part of the package entry', () => {
    for (const name of ['createHealthCheck', 'healthHandler', 'mountObservability']) assert.equal(typeof (entry as Record<string, unknown>)[name], 'function', name);
  });
});
