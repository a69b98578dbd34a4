/**
 * The operator endpoints of an app in one call: `/metrics` (Prometheus text), `/healthz`
 * (readiness) and `/livez` (liveness). Kept apart from the routers so an app can serve them on the
 * main port or on an internal one (a second Express app) as its network allows.
 */
import type { Request, Response, Router } from 'express';
import type { Registry } from 'prom-client';
import { InvalidOptionsError } from '../errors.js';
import { asOptionsObject, rejectUnknownKeys } from '../lib/options.js';
import { ALIVE, answerHealth, healthOf, type HealthReport, type HealthSource } from './health.js';
import { isRegistry } from './metrics.js';

/** Where each endpoint is mounted; `false` leaves it out. */
export interface ObservabilityPaths {
  /** Default `/metrics`. */
  metrics?: string | false;
  /** Default `/healthz`. */
  health?: string | false;
  /** Default `/livez`. */
  live?: string | false;
}

export interface ObservabilityOptions {
  /** The prom-client Registry given to the routers' `metrics` option. Without it, no `/metrics`. */
  registry?: unknown;
  /**
   * What `/healthz` reports: a router (its `health()`, looked up at each request) or any
   * {@link HealthSource}. Without one, `/healthz` answers like `/livez`.
   */
  health?: Partial<HealthSource> | (() => Promise<HealthReport>);
  /** Another name for `health`, for `mountObservability(app, { registry, router })`. */
  router?: Partial<HealthSource>;
  paths?: ObservabilityPaths;
}

const FACTORY = 'mountObservability';

function path(option: string | false | undefined, fallback: string, name: string): string | false {
  const value = option ?? fallback;
  if (value !== false && (typeof value !== 'string' || !value.startsWith('/'))) throw new InvalidOptionsError(`${FACTORY}: option "paths.${name}" must be a path starting with "/" or false`);
  return value;
}

/**
 * Serves `/metrics` (the registry in Prometheus text format), `/healthz` (readiness: the router's
 * `health()`, 503 when down) and `/livez` (liveness: 200 while the process answers, whatever the
 * store does) on `app`.
 *
 * @example
 * ```ts
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * const router = marketplaceRouter({ handlers, store, metrics: { registry } });
 * app.use(router);
 * mountObservability(app, { registry, router });
 * ```
 */
export function mountObservability(app: Pick<Router, 'get'>, options: ObservabilityOptions = {}): void {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, ['registry', 'health', 'router', 'paths']);
  if (options.health !== undefined && options.router !== undefined) throw new InvalidOptionsError(`${FACTORY}: give "health" or "router", not both`);
  const paths = options.paths === undefined ? {} : asOptionsObject(`${FACTORY}: option "paths"`, options.paths);
  rejectUnknownKeys(`${FACTORY}: option "paths"`, paths, ['metrics', 'health', 'live']);
  const registry = options.registry;
  if (registry !== undefined && !isRegistry(registry)) throw new InvalidOptionsError(`${FACTORY}: option "registry" must be a prom-client Registry`);
  const check = options.health === undefined ? undefined : healthOf(options.health);
  if (options.health !== undefined && check === undefined) throw new InvalidOptionsError(`${FACTORY}: option "health" must be an object with health() or a function answering a health report`);
  const router = options.router;
  if (router !== undefined && ((typeof router !== 'object' && typeof router !== 'function') || router === null)) throw new InvalidOptionsError(`${FACTORY}: option "router" must be the router whose health() /healthz reports`);

  // The router's health() is looked up per request: it may be attached after mounting.
  const health = (): Promise<HealthReport> => check?.() ?? (typeof router?.health === 'function' ? router.health() : Promise.resolve(ALIVE));
  const metricsPath = path(paths.metrics as string | false | undefined, '/metrics', 'metrics');
  const healthPath = path(paths.health as string | false | undefined, '/healthz', 'health');
  const livePath = path(paths.live as string | false | undefined, '/livez', 'live');

  if (registry !== undefined && metricsPath !== false) {
    app.get(metricsPath, (_req: Request, res: Response) => {
      void sendMetrics(res, registry);
    });
  }
  if (healthPath !== false) {
    app.get(healthPath, (_req: Request, res: Response) => {
      void answerHealth(res, health);
    });
  }
  if (livePath !== false) {
    app.get(livePath, (_req: Request, res: Response) => {
      res.set('Cache-Control', 'no-store').json({ status: 'ok' });
    });
  }
}

async function sendMetrics(res: Response, registry: Registry): Promise<void> {
  try {
    const text = await registry.metrics();
    res.set('Content-Type', registry.contentType).set('Cache-Control', 'no-store').send(text);
  } catch {
    res.status(500).json({ message: 'The metrics could not be collected' });
  }
}
