import { BadRequestError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import type { Store } from '../store/types.js';

/** The first instant of the UTC month before the one holding `now` (section 8 retention). */
export function retentionStart(now: number): number {
  const date = new Date(now);
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() - 1, 1);
}

const FEATURE = /^[A-Za-z0-9][A-Za-z0-9_\-.]{0,127}$/;
const PRUNE_EVERY_MS = 60 * 60 * 1000;

/**
 * The usage ledger: providers record usage as it happens and the measures route answers totals
 * for any period from it. Only the current and previous UTC billing months are kept (section 8);
 * older entries are pruned at most once an hour, on the recording path, so no timer is needed.
 */
export function createUsageLedger(deps: { store: Store; now: () => number; logger: Logger }) {
  let lastPrune = 0;

  async function prune(): Promise<number> {
    const before = retentionStart(deps.now());
    // Optional in the contract: a store without it keeps everything.
    const removed = (await deps.store.pruneUsage?.(before)) ?? 0;
    lastPrune = deps.now();
    if (removed > 0) deps.logger.info({ removed, before: new Date(before).toISOString() }, 'pruned usage older than the previous billing month');
    return removed;
  }

  async function recordUsage(resourceId: string, feature: string, quantity: number, at: Date | number = deps.now()): Promise<void> {
    if (typeof resourceId !== 'string' || resourceId.length === 0) throw new BadRequestError('recordUsage: resourceId is required');
    if (typeof feature !== 'string' || !FEATURE.test(feature)) throw new BadRequestError('recordUsage: feature must be a feature label');
    if (!Number.isSafeInteger(quantity)) throw new BadRequestError('recordUsage: quantity must be an integer');
    const when = at instanceof Date ? at.getTime() : at;
    if (!Number.isFinite(when)) throw new BadRequestError('recordUsage: at must be a valid time');
    await deps.store.recordUsage([{ resourceId, feature, quantity, at: when }]);
    if (deps.now() - lastPrune >= PRUNE_EVERY_MS) await prune();
  }

  return { recordUsage, prune };
}
