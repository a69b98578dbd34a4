/**
 * What keeping a provisioning's records costs, without HTTP, the engine or signatures
 * (`npx tsx bench/profile.ts keep`; docs/performance.md, "Past midnight: what holds the plugin below 0.9").
 *
 * Three ways of doing a provisioning's store work, each with its tables already holding `records`
 * provisionings, timed over `calls` more:
 * - `Maps, keeping nothing`: the three lookups that miss (the replay, the operation, the
 *   resource), the operation put and removed, a resource and a replay record inserted and removed
 *   again right away.
 * - `Maps, keeping`: the same, the two records kept in tables that keep growing: the least any
 *   store keeping them in the process's heap does.
 * - `memoryStore`: its claim and commit (the synchronous forms the engine calls), as a request
 *   makes them: the claim rule, the copies, the same two records kept.
 *
 * The first two apart are what keeping records in growing tables costs (the tables' growth, and
 * the collector's work for every record that stays); the last against the second is what
 * `memoryStore` adds to that floor.
 */
import type * as Common from '../../src/store/common.js';
import type * as Memory from '../../src/store/memory.js';
import type * as StoreTypes from '../../src/store/types.js';
import type { Store } from '../../src/store/types.js';
import { storedProvisioning } from './requests.js';
import { dist } from './serving.js';

export interface KeepFloorResult {
  label: string;
  /** CPU per provisioning (this process, every thread), µs, median of the rounds. */
  micros: number;
  rounds: number[];
}

const ROUNDS = 5;

/** `operationKey` of the compiled package. */
type KeyOf = typeof StoreTypes.operationKey;

/** Distinct ids and signatures of the bench's sizes (29 and 86 characters), cheap to make. */
function names(at: number): { id: string; requestId: string } {
  const n = at.toString(36);
  return { id: `r${n.padStart(28, '0')}`, requestId: n.padStart(86, '-') };
}

/** Runs `one` for `records` provisionings, then `ROUNDS` rounds of `calls`, timing each round. */
function timed(label: string, records: number, calls: number, one: (at: number) => void): KeepFloorResult {
  let at = 0;
  for (; at < records; at++) one(at);
  const rounds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const before = process.cpuUsage();
    for (let k = 0; k < calls; k++) one(at++);
    const used = process.cpuUsage(before);
    rounds.push((used.user + used.system) / calls);
  }
  const sorted = [...rounds].sort((a, b) => a - b);
  return { label, micros: sorted[Math.floor(sorted.length / 2)]!, rounds };
}

/** A provisioning's claim and commit on `store`, through the forms the engine calls. */
function storeWork(store: Store, common: typeof Common, key: KeyOf): (at: number) => void {
  const claimNow = common.immediateOf(store.claimOperation);
  const commitNow = common.immediateOf(store.commitOperation);
  if (claimNow === undefined || commitNow === undefined) throw new Error('bench/keep: memoryStore without its synchronous claim and commit');
  return (at) => {
    const { id, requestId } = names(at);
    const { input, commit } = storedProvisioning(key('resource', id), id, Date.now(), requestId);
    const claim = claimNow.call(store, input);
    if (claim.outcome !== 'claimed') throw new Error(`bench/keep: a claim answered ${claim.outcome}`);
    const committed = commitNow.call(store, claim.operation.key, claim.operation.token, commit);
    if (committed.outcome !== 'committed') throw new Error(`bench/keep: a commit answered ${committed.outcome}`);
  };
}

/** The floor: the same table operations on plain Maps, keeping the two records or removing them again. */
function mapWork(keep: boolean, key: KeyOf): (at: number) => void {
  const resources = new Map<string, object>();
  const replays = new Map<string, object>();
  const operations = new Map<string, { token: string }>();
  return (at) => {
    const { id, requestId } = names(at);
    // The same records as the store is given, kept as they are (no copies, no claim rule).
    const { input, commit } = storedProvisioning(key('resource', id), id, Date.now(), requestId);
    if (replays.get(requestId) !== undefined || operations.get(input.key) !== undefined || resources.get(id) !== undefined) throw new Error('bench/keep: a name came twice');
    operations.set(input.key, { token: 't' });
    if (operations.get(input.key)?.token !== 't') throw new Error('bench/keep: the operation was lost');
    if (commit.mutation.type === 'putResource') resources.set(id, commit.mutation.resource);
    operations.delete(input.key);
    if (replays.get(requestId) === undefined) replays.set(requestId, commit.replay!);
    if (!keep) {
      resources.delete(id);
      replays.delete(requestId);
    }
  };
}

/**
 * The three measurements on the compiled package (dist/), the lightest first: each run's tables
 * are garbage once it ends, so none runs beside the records an earlier one still keeps.
 */
export async function keepFloor(records: number, calls: number): Promise<KeepFloorResult[]> {
  const [{ memoryStore }, common, { operationKey }] = await Promise.all([
    dist<typeof Memory>('store/memory.js'),
    dist<typeof Common>('store/common.js'),
    dist<typeof StoreTypes>('store/types.js'),
  ]);
  return [
    timed('Maps, keeping nothing', records, calls, mapWork(false, operationKey)),
    timed('Maps, keeping', records, calls, mapWork(true, operationKey)),
    timed('memoryStore', records, calls, storeWork(memoryStore(), common, operationKey)),
  ];
}
