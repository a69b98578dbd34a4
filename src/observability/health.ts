/**
 * The Express side of readiness: {@link healthHandler} answers a report from
 * {@link createHealthCheck} (health-check.ts, framework-free) as JSON.
 */
import type { Request, RequestHandler, Response } from 'express';
import { InvalidOptionsError } from '../errors.js';
import { healthOf, type HealthReport, type HealthSource } from './health-check.js';

export { ALIVE, createHealthCheck, healthOf } from './health-check.js';
export type { HealthCheckOptions, HealthReport, HealthSource, HealthStatus, HealthStore, OutboxHealth } from './health-check.js';

/** The report of a source that threw instead of answering (a hand-written `health()`). */
const BROKEN: HealthReport = { status: 'down', store: 'down', outbox: null, reason: 'The health check failed' };

/**
 * Answers a health report as JSON: 200 for `ok` and `degraded` (the instance can still serve),
 * 503 for `down`, with `message` set as every non-2xx answer of the package has. Never cached.
 * Takes a router (anything with `health()`) or a bare check function.
 *
 * @example
 * ```ts
 * app.get('/healthz', healthHandler(router));
 * ```
 */
export function healthHandler(source: HealthSource | (() => Promise<HealthReport>)): RequestHandler {
  const health = healthOf(source);
  if (health === undefined) throw new InvalidOptionsError('healthHandler: expected a router with health() or a function answering a health report');
  return (_req: Request, res: Response) => {
    void answerHealth(res, health);
  };
}

/** Sends one report; shared by {@link healthHandler} and mountObservability. */
export async function answerHealth(res: Response, health: () => Promise<HealthReport>): Promise<void> {
  let report: HealthReport;
  try {
    report = await health();
  } catch {
    report = BROKEN;
  }
  res.set('Cache-Control', 'no-store');
  if (report.status === 'down') res.status(503).json({ message: report.reason ?? 'The instance is down', ...report });
  else res.status(200).json(report);
}
