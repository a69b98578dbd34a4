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
import type { ClaimInput, CommitInput, Store } from '../../src/store/types.js';
import { dist } from './serving.js';

export interface KeepFloorResult {
  label: string;
  /** CPU per provisioning (this process, every thread), µs, median of the rounds. */
  micros: number;
  rounds: number[];
}

const ROUNDS = 5;
const MESSAGE = 'Your generator is ready';

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
function storeWork(store: Store, immediateOf: typeof Common.immediateOf): (at: number) => void {
  const claimNow = immediateOf(store.claimOperation);
  const commitNow = immediateOf(store.commitOperation);
  if (claimNow === undefined || commitNow === undefined) throw new Error('bench/keep: memoryStore without its synchronous claim and commit');
  return (at) => {
    const { id, requestId } = names(at);
    const now = Date.now();
    const request = { kind: 'provision', product: 'generator', plan: 'low', region: 'aws::us-east-1', features: Object.create(null) as Record<string, never> } as const;
    const input: ClaimInput = {
      key: `resource:${id}`, kind: 'provision', targetId: id, fingerprint: '["provision","generator","low","aws::us-east-1"]', request,
      owner: 'bench', now, leaseMs: 30_000, requestId, replayExpiresAt: now + 600_000,
    };
    const claim = claimNow.call(store, input);
    if (claim.outcome !== 'claimed') throw new Error(`bench/keep: a claim answered ${claim.outcome}`);
    const commit: CommitInput = {
      mutation: { type: 'putResource', resource: { id, product: request.product, plan: request.plan, region: request.region, features: request.features, message: MESSAGE, createdAt: now, updatedAt: now } },
      replay: { requestId, answer: { status: 201, body: { message: MESSAGE } }, expiresAt: now + 600_000 },
    };
    const committed = commitNow.call(store, claim.operation.key, claim.operation.token, commit);
    if (committed.outcome !== 'committed') throw new Error(`bench/keep: a commit answered ${committed.outcome}`);
  };
}

/** The floor: the same table operations on plain Maps, keeping the two records or removing them again. */
function mapWork(keep: boolean): (at: number) => void {
  const resources = new Map<string, object>();
  const replays = new Map<string, object>();
  const operations = new Map<string, { token: string }>();
  return (at) => {
    const { id, requestId } = names(at);
    const key = `resource:${id}`;
    const now = Date.now();
    if (replays.get(requestId) !== undefined || operations.get(key) !== undefined || resources.get(id) !== undefined) throw new Error('bench/keep: a name came twice');
    operations.set(key, { token: 't' });
    if (operations.get(key)?.token !== 't') throw new Error('bench/keep: the operation was lost');
    resources.set(id, { id, product: 'generator', plan: 'low', region: 'aws::us-east-1', features: {}, message: MESSAGE, createdAt: now, updatedAt: now });
    operations.delete(key);
    if (replays.get(requestId) === undefined) replays.set(requestId, { requestId, answer: { status: 201, body: { message: MESSAGE } }, expiresAt: now + 600_000 });
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
  const [{ memoryStore }, { immediateOf }] = await Promise.all([dist<typeof Memory>('store/memory.js'), dist<typeof Common>('store/common.js')]);
  return [
    timed('Maps, keeping nothing', records, calls, mapWork(false)),
    timed('Maps, keeping', records, calls, mapWork(true)),
    timed('memoryStore', records, calls, storeWork(memoryStore(), immediateOf)),
  ];
}
