import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { InternalError, isMarketplaceError, MarketplaceError } from '../errors.js';
import { errorSummary, type Answer } from '../idempotency/engine.js';
import type { Logger } from '../lib/logger.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';

/**
 * The provider routes' HTTP edge: rendering answers and errors, and the one log line per request.
 * Kept apart from the route table so that logging and error rendering have one home.
 */

export function send(res: Response, answer: Answer): void {
  if (answer.body === undefined || answer.status === 204) res.status(answer.status).end();
  else res.status(answer.status).json(answer.body);
}

const OUR_PATH = /^\/v1\/(?:resources|credentials|sso)(?:\/([^/?]+))?/;

/**
 * One line per request: route, id, status, reason code, latency, callback id. Never headers or
 * bodies. And one `request` event per answered request for metrics.
 */
export function requestLog(logger: Logger, instrumentation: Instrumentation = noInstrumentation): RequestHandler {
  const measured = instrumentation !== noInstrumentation;
  return (req, res, next) => {
    const logged = logger.isLevelEnabled('info');
    // With info off and no metrics nothing is recorded: no clock, no 'finish' listener, no closure per request.
    if (!logged && !measured) {
      next();
      return;
    }
    const path = req.path;
    const match = OUR_PATH.exec(path);
    if (match === null) {
      next();
      return;
    }
    const started = process.hrtime.bigint();
    const method = req.method;
    const callbackId = req.headers['x-callback-id'];
    res.on('finish', () => {
      const route = routePattern(path);
      const latencyMs = Number((process.hrtime.bigint() - started) / 1000n) / 1000;
      const code = res.locals.errorCode as string | undefined;
      if (logged) {
        logger.info({
          method,
          route,
          id: match[1],
          status: res.statusCode,
          code,
          latencyMs,
          callbackId: typeof callbackId === 'string' ? callbackId : undefined,
        }, 'marketplace request');
      }
      instrumentation.request({ route, method, status: res.statusCode, code: code ?? '', seconds: latencyMs / 1000 });
    });
    next();
  };
}

/** `/v1/resources/abc/measures` → `/v1/resources/:id/measures`: a label of few values. */
function routePattern(path: string): string {
  return path.replace(/^(\/v1\/\w+\/)[^/]+/, '$1:id');
}

/** Renders every error as the interface's JSON `{message}`; unexpected ones as a bare 500. */
export function errorResponder(logger: Logger) {
  return (error: unknown, _req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const known = isMarketplaceError(error) ? error : clientError(error);
    const answer = known ?? new InternalError({ cause: error });
    if (known === undefined || answer.status >= 500) logger.error({ err: errorSummary(known?.cause ?? error), code: answer.code }, 'marketplace request failed');
    res.locals.errorCode = answer.code;
    res.status(answer.status).json({ message: answer.message });
  };
}

/**
 * Express's own 4xx errors, raised before any handler runs (a path segment that is not valid
 * percent-encoding, `/v1/resources/%E0`), are the caller's mistake: a 500 would make the marketplace
 * retry a request that can never succeed.
 */
function clientError(error: unknown): MarketplaceError | undefined {
  const status = typeof error === 'object' && error !== null ? (error as { status?: unknown }).status : undefined;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 400 || status > 499) return undefined;
  return new MarketplaceError(status, 'ERR_BAD_REQUEST', error instanceof URIError ? 'Request path is not valid percent-encoding' : 'Malformed request', { cause: error });
}
