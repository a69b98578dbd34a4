import { BadRequestError, InternalError, NotFoundError } from '../errors.js';
import { parseRfc3339 } from '../lib/rfc3339.js';
import type { Logger } from '../lib/logger.js';
import type { MeasuresStore } from '../store/types.js';
import type { Answer } from '../idempotency/engine.js';
import type { ProviderHandlers } from '../domain/handlers.js';

function periodParam(value: unknown, name: string): { text: string; at: number } {
  if (typeof value !== 'string' || value.length === 0) throw new BadRequestError(`Missing query parameter ${name}`, 'ERR_VALIDATION');
  const at = parseRfc3339(value);
  if (at === undefined) throw new BadRequestError(`${name} must be an RFC 3339 date-time`, 'ERR_VALIDATION');
  return { text: value, at };
}

/**
 * GET /v1/resources/:id/measures (gaps.md): totals for `[period_start, period_end)` from the
 * provider's `measures` handler, or else from the usage ledger kept in the store.
 */
export async function answerMeasures(
  deps: { store: MeasuresStore; handlers: ProviderHandlers; logger: Logger },
  id: string,
  query: Record<string, unknown>,
): Promise<Answer> {
  const start = periodParam(query.period_start, 'period_start');
  const end = periodParam(query.period_end, 'period_end');
  if (end.at <= start.at) throw new BadRequestError('period_end must be later than period_start', 'ERR_VALIDATION');
  const resource = await deps.store.getResource(id);
  if (resource === undefined) throw new NotFoundError('Resource not found');

  let measures: Record<string, number>;
  if (deps.handlers.measures !== undefined) {
    const result = await deps.handlers.measures(
      { resource, periodStart: new Date(start.at), periodEnd: new Date(end.at) },
      { callbackId: undefined, logger: deps.logger },
    );
    if (result === undefined || result === null || Object.keys(result).length === 0) return { status: 204 };
    measures = result;
  } else {
    if (!(await deps.store.hasUsage(id, start.at, end.at))) return { status: 204 };
    measures = await deps.store.sumUsage(id, start.at, end.at);
  }
  // Features in one order (sorted), whatever order the store or handler gave them in: the
  // answer for a closed period is the same bytes on every read and every instance.
  const clean: Record<string, number> = {};
  for (const [feature, total] of Object.entries(measures).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (!Number.isSafeInteger(total)) {
      deps.logger.error({ resourceId: id, feature }, 'measures handler returned a total that is not an integer');
      throw new InternalError();
    }
    clean[feature] = total;
  }
  return { status: 200, body: { resource_id: id, period_start: start.text, period_end: end.text, measures: clean } };
}
