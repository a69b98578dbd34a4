import { BadRequestError, InvalidOptionsError, UsagePeriodClosedError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import type { UsageLedgerStore } from '../store/types.js';

/** The first instant of the UTC month before the one holding `now` (section 8 retention). */
export function retentionStart(now: number): number {
  const date = new Date(now);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() - 1, 1);
}

const FEATURE = /^[A-Za-z0-9][A-Za-z0-9_\-.]{0,127}$/;
const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** Default of {@link UsageOptions.usageGraceMs}: one hour. */
export const DEFAULT_USAGE_GRACE_MS = 60 * 60 * 1000;
/** The longest grace accepted: a week, well inside the retention (the previous billing month is at least 28 days back). */
const MAX_USAGE_GRACE_MS = 7 * 24 * 60 * 60 * 1000;

/** The usage options of `marketplaceRouter` (docs/usage.md). */
export interface UsageOptions {
  /**
   * How long after a period ends its usage may still be recorded, in ms. The measures answer for
   * `[period_start, period_end)` is final once `period_end + usageGraceMs` has passed: from then on
   * `recordUsage` with an `at` before `period_end` is refused with `UsagePeriodClosedError` (or
   * booked at the time of the call with `{ late: 'current-period' }`). Default 3 600 000 (1 hour);
   * `0` closes a period as soon as it ends; at most 604 800 000 (7 days).
   *
   * @example
   * ```ts
   * marketplaceRouter({ handlers, store, usageGraceMs: 15 * 60_000 }); // meters report within 15 minutes
   * ```
   */
  usageGraceMs?: number;
}

/**
 * The fifth argument of `recordUsage`: what to do with usage whose `at` lies in a closed period.
 *
 * @example
 * ```ts
 * // A reading that arrived late: counted now rather than refused.
 * await router.recordUsage(resourceId, 'storage-gb', 12, readingTime, { late: 'current-period' });
 * ```
 */
export interface RecordUsageOptions {
  /**
   * `'refuse'` (default): throw `UsagePeriodClosedError`, nothing recorded. `'current-period'`:
   * record the usage at the time of the call instead (it counts in the periods still open). Usage
   * whose `at` is not in a closed period is recorded at `at` either way.
   */
  late?: 'refuse' | 'current-period';
}

/** Checks `usageGraceMs` (from the router's options) at start-up. */
export function usageGraceOption(factory: string, value: unknown): number {
  if (value === undefined) return DEFAULT_USAGE_GRACE_MS;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_USAGE_GRACE_MS) {
    throw new InvalidOptionsError(`${factory}: option "usageGraceMs" must be an integer number of milliseconds from 0 to ${MAX_USAGE_GRACE_MS} (7 days), e.g. 3600000 for one hour`);
  }
  return value;
}

/**
 * The usage ledger: providers record usage as it happens and the measures route answers totals
 * for any period from it. Only the current and previous UTC billing months are kept (section 8);
 * older entries are pruned at most once an hour, on the recording path, so no timer is needed.
 *
 * A period's answer never changes once its end plus the grace has passed: usage at an earlier time
 * is refused (or, when the caller asks, booked at the time of the call), and pruning removes only
 * entries before the retention start, which no period inside the retention reaches.
 */
export function createUsageLedger(deps: { store: UsageLedgerStore; now: () => number; logger: Logger; graceMs?: number }) {
  const graceMs = deps.graceMs ?? DEFAULT_USAGE_GRACE_MS;
  let lastPrune = 0;

  async function prune(): Promise<number> {
    const before = retentionStart(deps.now());
    // Optional in the contract: a store without it keeps everything.
    const removed = (await deps.store.pruneUsage?.(before)) ?? 0;
    lastPrune = deps.now();
    if (removed > 0) deps.logger.info({ removed, before: new Date(before).toISOString() }, 'pruned usage older than the previous billing month');
    return removed;
  }

  /** The first instant still open: every period that ends at or before it is closed. */
  function closedBefore(now: number): number {
    return now - graceMs;
  }

  async function recordUsage(resourceId: string, feature: string, quantity: number, at?: Date | number, options?: RecordUsageOptions): Promise<void> {
    if (typeof resourceId !== 'string' || resourceId.length === 0) throw new BadRequestError('recordUsage: resourceId is required');
    if (typeof feature !== 'string' || !FEATURE.test(feature)) throw new BadRequestError('recordUsage: feature must be a feature label');
    if (!Number.isSafeInteger(quantity)) throw new BadRequestError('recordUsage: quantity must be an integer');
    const late = lateOption(options);
    const now = deps.now();
    const given = at === undefined ? now : at instanceof Date ? at.getTime() : at;
    if (typeof given !== 'number' || !Number.isFinite(given)) throw new BadRequestError('recordUsage: at must be a valid time');
    let when = given;
    // A period [start, end) is closed once end + grace <= now; `at` lies in a closed period exactly
    // when [at, at + 1) is one, that is when at + 1 + grace <= now.
    const horizon = closedBefore(now);
    if (when < horizon) {
      if (late === 'refuse') throw new UsagePeriodClosedError(when, horizon);
      deps.logger.info({ resourceId, feature, at: new Date(when).toISOString(), bookedAt: new Date(now).toISOString() }, 'late usage booked to the current period');
      when = now;
    }
    await deps.store.recordUsage([{ resourceId, feature, quantity, at: when }]);
    if (deps.now() - lastPrune >= PRUNE_EVERY_MS) await prune();
  }

  return { recordUsage, prune, graceMs, closedBefore };
}

function lateOption(options: RecordUsageOptions | undefined): 'refuse' | 'current-period' {
  if (options === undefined) return 'refuse';
  if (typeof options !== 'object' || options === null) throw new BadRequestError("recordUsage: options must be an object such as { late: 'current-period' }");
  const unknown = Object.keys(options).filter((key) => key !== 'late');
  if (unknown.length > 0) throw new BadRequestError(`recordUsage: unknown option "${unknown[0]}" (the one option is late: 'refuse' | 'current-period')`);
  const late = options.late ?? 'refuse';
  if (late !== 'refuse' && late !== 'current-period') throw new BadRequestError("recordUsage: option late must be 'refuse' or 'current-period'");
  return late;
}
