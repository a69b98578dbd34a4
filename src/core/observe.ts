/**
 * One line per request, one `request` event for the metrics: route pattern, id, status, reason
 * code, latency, callback id, request id. Never headers or bodies; the id and callback id come from
 * the caller, so they are truncated. The same for every adapter: the route label comes from the
 * path (routes.ts), the status and code from the answer.
 */
import type { ServerResponse } from 'node:http';
import { truncateForLog, type Logger } from '../lib/logger.js';
import { noInstrumentation, type Instrumentation } from '../observability/hooks.js';
import { answeredCode } from './answer.js';
import { routeLabel } from './routes.js';

/** What the log line of one request needs from its start. */
export interface Watched {
  method: string;
  /** The path relative to the mount (the route label comes from it). */
  path: string;
  callbackId: string | string[] | undefined;
  reqId: string | undefined;
  started: bigint;
}

/** Records requests for one provider. */
export class RequestLog {
  readonly #logger: Logger;
  readonly #instrumentation: Instrumentation;
  /** The request hook of the default hooks does nothing: metrics are on only when it is another. */
  readonly #measured: boolean;

  constructor(logger: Logger, instrumentation: Instrumentation) {
    this.#logger = logger;
    this.#instrumentation = instrumentation;
    this.#measured = instrumentation.request !== noInstrumentation.request;
  }

  /** Whether anything is recorded now (info lines or metrics): when not, callers skip the work. */
  enabled(): boolean {
    return this.#measured || this.#logger.isLevelEnabled('info');
  }

  /**
   * The start of a request, or undefined when nothing is recorded (info off and no metrics: then
   * no clock, no listener, no object per request).
   */
  start(method: string, path: string, callbackId: string | string[] | undefined, reqId: string | undefined): Watched | undefined {
    if (!this.#measured && !this.#logger.isLevelEnabled('info')) return undefined;
    return { method, path, callbackId, reqId, started: process.hrtime.bigint() };
  }

  /** Records a request answered with `status` (and `code` for an error of ours). */
  finish(watched: Watched, status: number, code: string | undefined): void {
    const label = routeLabel(watched.path);
    if (label === undefined) return;
    const latencyMs = Number((process.hrtime.bigint() - watched.started) / 1000n) / 1000;
    if (this.#logger.isLevelEnabled('info')) {
      this.#logger.info({
        method: watched.method,
        route: label.route,
        id: truncateForLog(label.rawId),
        status,
        code,
        latencyMs,
        callbackId: truncateForLog(watched.callbackId),
        reqId: watched.reqId,
      }, 'marketplace request');
    }
    this.#instrumentation.request({ route: label.route, method: watched.method, status, code: code ?? '', seconds: latencyMs / 1000 });
  }

  /**
   * Watches a node response: the line is written when it has finished (the status as sent, the code
   * of the error answer written on it, or `codeOf`'s for answers written by others).
   */
  watch(res: ServerResponse, method: string, path: string, callbackId: string | string[] | undefined, reqId: string | undefined, codeOf?: (res: ServerResponse) => string | undefined): void {
    const watched = this.start(method, path, callbackId, reqId);
    if (watched === undefined) return;
    res.on('finish', () => this.finish(watched, res.statusCode, answeredCode(res) ?? codeOf?.(res)));
  }
}
