/**
 * The provider's Express-shaped helpers of before the core, kept for code that imports them: the
 * log line per request over the core's (core/observe.ts), and the error rendering (core/answer.ts).
 */
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../lib/logger.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';
import { errorAnswer, writeAnswer } from '../core/answer.js';
import { RequestLog } from '../core/observe.js';
import { requestIdOf } from '../core/provider.js';

export { requestIdOf } from '../core/provider.js';
export { decodePathId } from '../core/routes.js';
export { catchRejections } from '../adapters/express.js';

/**
 * One line per request and one `request` event for the metrics, written when `res` finishes: the
 * route pattern of `path` (relative to the mount), the status, and the code in `res.locals.errorCode`.
 */
export function requestLogger(logger: Logger, instrumentation: Instrumentation = noInstrumentation): (req: Request, res: Response, path: string) => void {
  const log = new RequestLog(logger, instrumentation);
  return (req, res, path) => {
    log.watch(res, req.method, path, req.headers['x-callback-id'], requestIdOf(req), () => res.locals.errorCode as string | undefined);
  };
}

/** Renders every error as the interface's JSON `{message}`; unexpected ones as a bare 500. */
export function errorResponder(logger: Logger) {
  return (error: unknown, req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const answer = errorAnswer(error, logger);
    res.locals.errorCode = answer.code;
    writeAnswer(res, answer, req.method);
  };
}
