/**
 * The differential property: random sequences of signed mutating requests (PUT/PATCH/DELETE of
 * resources, PUT/DELETE of credentials) with identical repeats, replays of earlier signatures,
 * handlers that refuse, fail, answer 202 or hang, completions, lease lapses of a crashed instance
 * and parent/child races, played through the real OperationEngine on each store under test and
 * through a plain model of the documented rule. Every store must give the model's answers, call
 * the handlers the model calls, and end in the model's state.
 *
 * ```ts
 * import { describe, it } from 'node:test';
 * import { storeDifferential } from 'embedded-marketplace/testkit';
 *
 * storeDifferential({
 *   name: 'my store',
 *   describe,
 *   it,
 *   async makeStore() {
 *     const store = await openMyStore();
 *     return { store, cleanup: () => store.close() };
 *   },
 * });
 * ```
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../store/types.js';
import { describeRequest, type SequenceShape } from './commands.js';
import { runOnStore, type StoreRun } from './driver.js';
import type * as Generators from './arbitrary.js';
import { knownDifferenceNotes, runModel } from './model.js';
import { answerLine, compile, runIds, stateLines, type RunIds, type Step } from './script.js';

export type { SequenceShape } from './commands.js';

/** One store the property compares with the model. */
export interface DifferentialTarget {
  /** Names it in the report. */
  name: string;
  /**
   * Opens the store, once per property: every run uses ids of its own, so the store is shared by
   * all runs and need not be empty. `cleanup` closes it (and drops what it made).
   */
  makeStore(): Promise<{ store: Store; cleanup(): Promise<void> }>;
  /** A reason to leave this store out (printed, and counted as NOT CHECKED), or false. */
  skip?: string | false;
}

/** What {@link checkDifferential} runs. */
export interface DifferentialOptions {
  targets: readonly DifferentialTarget[];
  /** Sequences to try. Default: the `DIFFERENTIAL_RUNS` environment variable, else 25. */
  numRuns?: number;
  /** fast-check seed. Default: the `DIFFERENTIAL_SEED` environment variable, else random (always printed). */
  seed?: number;
  /** fast-check's replay path of a failure (printed with it): replays that very counterexample. Default: `DIFFERENTIAL_PATH`. */
  path?: string;
  /** Ids in play and the longest sequence. Default 2 resources, 3 credentials, 24 commands. */
  shape?: Partial<SequenceShape>;
  /** Where the seed, the progress and a failure's report go. Default: standard error. */
  log?: (line: string) => void;
  /** A store call that takes longer fails the run. Default 30 000 ms. */
  callTimeoutMs?: number;
  /** Shrinking tries at most this many smaller sequences after a failure. Default 300. */
  maxShrinks?: number;
}

/** The outcome of {@link checkDifferential}. */
export interface DifferentialReport {
  ok: boolean;
  seed: number;
  numRuns: number;
  /** Targets compared (not skipped). */
  checked: string[];
  /** Targets left out, with why. */
  notChecked: { name: string; reason: string }[];
  /** The report of the (shrunk) failing sequence: steps, then what differs from the model, per store. */
  failure?: string;
  /** fast-check's path of the failure, for `path`. */
  path?: string;
  /** Wall time of the whole property, in ms. */
  elapsedMs: number;
}

const DEFAULT_SHAPE: SequenceShape = { resources: 2, credentials: 3, maxCommands: 24 };
const RUN_START = Date.UTC(2031, 0, 1);
const DAY = 86_400_000;

function envNumber(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new TypeError(`differential: ${name} must be an integer, got ${JSON.stringify(raw)}`);
  return value;
}

/**
 * Runs the differential property and answers what it found; never throws for a discrepancy (see
 * {@link assertDifferential}). The seed is printed first, so that any run can be replayed.
 *
 * @example
 * ```ts
 * const report = await checkDifferential({ targets: [{ name: 'memory', makeStore: async () => ({ store: memoryStore(), cleanup: async () => undefined }) }] });
 * if (!report.ok) console.error(report.failure);
 * ```
 */
export async function checkDifferential(options: DifferentialOptions): Promise<DifferentialReport> {
  const started = performance.now();
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const shape: SequenceShape = { ...DEFAULT_SHAPE, ...options.shape };
  if (shape.resources < 1 || shape.credentials < 1 || shape.maxCommands < 1) throw new TypeError('differential: shape needs at least one resource, one credential and one command');
  const numRuns = options.numRuns ?? envNumber('DIFFERENTIAL_RUNS') ?? 25;
  const seed = options.seed ?? envNumber('DIFFERENTIAL_SEED') ?? randomBytes(4).readInt32LE();
  const path = options.path ?? (process.env.DIFFERENTIAL_PATH === '' ? undefined : process.env.DIFFERENTIAL_PATH);
  const callTimeoutMs = options.callTimeoutMs ?? 30_000;
  const maxShrinks = options.maxShrinks ?? 300;

  const notChecked = options.targets.filter((t) => t.skip !== undefined && t.skip !== false).map((t) => ({ name: t.name, reason: String(t.skip) }));
  const active = options.targets.filter((t) => t.skip === undefined || t.skip === false);
  for (const skipped of notChecked) log(`differential: ${skipped.name} NOT CHECKED: ${skipped.reason}`);
  for (const note of knownDifferenceNotes()) log(`differential: NOTE ${note}`);
  log(`differential: seed ${seed}, ${numRuns} runs, stores ${active.map((t) => t.name).join(', ') || '(none)'} against the model (replay with DIFFERENTIAL_SEED=${seed})`);

  const { fc, sequenceArbitrary } = await loadGenerators();
  const opened: { target: DifferentialTarget; store: Store; cleanup(): Promise<void> }[] = [];
  try {
    for (const target of active) opened.push({ target, ...(await target.makeStore()) });
    const blind = new Set(opened.filter(({ store }) => typeof store.listDeliveries !== 'function').map(({ target }) => target.name));
    for (const name of blind) log(`differential: ${name}: callbacks enqueued NOT CHECKED (the store has no listDeliveries); answers, handler calls and the rest of the state are`);
    let run = 0;
    let failures = 0;
    let shrinks = 0;
    /** After the first failure only the stores that failed are run again while shrinking. */
    let suspects: Set<string> | undefined;
    let last: string | undefined;

    const property = fc.asyncProperty(sequenceArbitrary(shape), async (commands) => {
      if (failures > 0 && ++shrinks > maxShrinks) return; // shrinking budget spent: keep the smallest found
      const ids = runIds(`d${(run++).toString(36)}${randomBytes(3).toString('hex')}`);
      const steps = compile(commands, shape, ids);
      const model = runModel(steps, ids, shape);
      const expected = render(model, ids, steps);
      // A store that cannot list its deliveries is compared on everything else.
      const expectedBlind = render({ ...model, state: { ...model.state, deliveries: undefined } }, ids, steps);
      const differences: string[] = [];
      const failed = new Set<string>();
      const start = RUN_START + run * 30 * DAY;
      // The stores run side by side: each has its own engines, clock and turnstile, so one's database
      // round trips never reorder another's steps.
      const outcomes = await Promise.all(
        opened
          .filter(({ target }) => suspects === undefined || suspects.has(target.name))
          .map(async ({ target, store }) => {
            try {
              return { target, got: render(await runOnStore(store, steps, ids, shape, start, callTimeoutMs), ids, steps) };
            } catch (error) {
              return { target, error };
            }
          }),
      );
      for (const outcome of outcomes) {
        if ('error' in outcome) {
          differences.push(`${outcome.target.name}: the run failed: ${(outcome.error as Error).stack ?? String(outcome.error)}`);
          failed.add(outcome.target.name);
          continue;
        }
        const diff = difference(blind.has(outcome.target.name) ? expectedBlind : expected, outcome.got);
        if (diff.length > 0) {
          differences.push(`${outcome.target.name} differs from the model:\n${diff.join('\n')}`);
          failed.add(outcome.target.name);
        }
      }
      if (differences.length > 0) {
        failures += 1;
        suspects ??= failed;
        last = [`steps (ids without the run's prefix ${ids.prefix}):`, ...describeSteps(steps, ids), '', ...differences, '', 'the model:', ...expected.map((l) => `  ${l}`)].join('\n');
        throw new Error(last);
      }
    });
    const details = await fc.check(property, { seed, numRuns, ...(path === undefined ? {} : { path }) });
    const elapsedMs = Math.round(performance.now() - started);
    const checked = active.map((t) => t.name);
    if (!details.failed) {
      log(`differential: ${details.numRuns} runs passed on ${checked.join(', ') || 'no store'} in ${elapsedMs} ms (seed ${seed})`);
      return { ok: true, seed, numRuns: details.numRuns, checked, notChecked, elapsedMs };
    }
    const shrunk = details.counterexample?.[0];
    const failure = [
      `differential: FAILED after ${details.numRuns} run(s), ${details.numShrinks} shrink(s): seed ${seed}, path ${JSON.stringify(details.counterexamplePath)}`,
      `replay: DIFFERENTIAL_SEED=${seed} DIFFERENTIAL_PATH=${JSON.stringify(details.counterexamplePath ?? '')}`,
      `counterexample (commands): ${JSON.stringify(shrunk)}`,
      errorText(details.errorInstance) ?? last ?? '(no report)',
    ].join('\n');
    log(failure);
    return { ok: false, seed, numRuns: details.numRuns, checked, notChecked, failure, ...(details.counterexamplePath === null ? {} : { path: details.counterexamplePath }), elapsedMs };
  } finally {
    for (const { cleanup } of opened) await cleanup().catch((error: unknown) => log(`differential: cleanup failed: ${String(error)}`));
  }
}

/** fast-check, loaded only when the property runs: the rest of the testkit never needs it. */
async function loadGenerators(): Promise<typeof Generators> {
  try {
    return await import('./arbitrary.js');
  } catch (error) {
    throw new Error('the differential property needs fast-check (4.x), an optional peer dependency: npm install --save-dev fast-check', { cause: error });
  }
}

function errorText(error: unknown): string | undefined {
  return error instanceof Error ? error.message : undefined;
}

/**
 * {@link checkDifferential}, throwing an Error with the report (seed, replay path, shrunk
 * counterexample, what differs) when a store differs from the model.
 *
 * @example
 * ```ts
 * await assertDifferential({ targets: [{ name: 'sqlite', makeStore: openSqlite }], numRuns: 50 });
 * ```
 */
export async function assertDifferential(options: DifferentialOptions): Promise<DifferentialReport> {
  const report = await checkDifferential(options);
  if (!report.ok) throw new Error(report.failure);
  return report;
}

/** What {@link storeDifferential} registers. */
export interface StoreDifferentialOptions extends Omit<DifferentialOptions, 'targets'> {
  /** Names the test in the runner's report. */
  name: string;
  describe(name: string, fn: () => void): unknown;
  it(name: string, options: { skip?: string | boolean; timeout?: number }, fn: () => Promise<void>): unknown;
  /** Opens the adapter's store once for the whole property (runs use ids of their own). */
  makeStore(): Promise<{ store: Store; cleanup(): Promise<void> }>;
  /** A reason to skip (the database is absent), or false. */
  skip?: string | false;
  /** Other stores to compare in the same runs (the bundled ones, say). */
  alongside?: readonly DifferentialTarget[];
}

/**
 * Registers the differential property as one test of `node:test` (or any runner with the same
 * `describe`/`it` shapes): the adapter's answers, handler calls and end states must be the model's
 * on every generated sequence. The seed is printed; `DIFFERENTIAL_SEED` (and `DIFFERENTIAL_PATH`)
 * replay a failure, `DIFFERENTIAL_RUNS` sets how many sequences run.
 *
 * @example
 * ```ts
 * import { describe, it } from 'node:test';
 * import { storeDifferential } from 'embedded-marketplace/testkit';
 * storeDifferential({ name: 'my store', describe, it, makeStore: async () => ({ store: await openMyStore(), cleanup: async () => undefined }) });
 * ```
 */
export function storeDifferential(options: StoreDifferentialOptions): void {
  const { name, describe, it, makeStore, skip, alongside = [], ...rest } = options;
  describe(`differential property: ${name}`, () => {
    it('answers, calls handlers and ends like the model of the documented rule', { skip: skip ?? false }, async () => {
      await assertDifferential({ ...rest, targets: [{ name, makeStore }, ...alongside] });
    });
  });
}

/** A run as lines: answers (and which held handler each release opened), handler calls, end state. */
function render(run: StoreRun | ReturnType<typeof runModel>, ids: RunIds, steps: readonly Step[]): string[] {
  const lines: string[] = [];
  for (const step of steps) {
    if (step.type === 'release') lines.push(`#${step.index} opened ${run.releases.has(step.index) ? `the handler of #${run.releases.get(step.index)}` : 'nothing (no handler held)'}`);
    if (step.type !== 'request' && step.type !== 'complete') continue;
    const answered = run.answers.get(step.index);
    lines.push(answerLine(step.index, answered?.answer, answered?.at));
    for (const call of run.handlers.get(step.index) ?? []) lines.push(`#${step.index} handler ${call}`);
  }
  lines.push(...stateLines(run.state, ids));
  return lines;
}

/** Lines of `expected` missing from `got` (-) and lines of `got` the model does not have (+), in order. */
function difference(expected: readonly string[], got: readonly string[]): string[] {
  const have = new Set(got);
  const want = new Set(expected);
  return [...expected.filter((l) => !have.has(l)).map((l) => `  - model: ${l}`), ...got.filter((l) => !want.has(l)).map((l) => `  + store: ${l}`)];
}

function describeSteps(steps: readonly Step[], ids: RunIds): string[] {
  return steps.map((step) => {
    switch (step.type) {
      case 'request': {
        const r = step.spec;
        const how = step.replay ? ` (replay of #${step.copyOf}: same signature)` : step.copyOf !== undefined ? ` (repeat of #${step.copyOf}: new signature)` : '';
        const where = step.engine === 'zombie' ? ' to the instance that crashes' : '';
        return `  #${step.index} ${describeRequest(r, ids).replaceAll(ids.prefix, '')}${how}${where} [handler ${r.behaviour}${r.hold ? ', held' : ''}${step.callbackId === undefined ? '' : ', callback headers'}, priority ${r.priority}]`;
      }
      case 'release':
        return `  #${step.index} open held handler pick ${step.pick}`;
      case 'advance':
        return `  #${step.index} clock +${step.ms} ms`;
      case 'complete':
        return `  #${step.index} complete(${step.entity} ${ids.short(step.id)}, ${step.state})`;
      case 'capacity':
        return `  #${step.index} validate hook: ${step.full ? 'capacity full (refuses provisioning and changes to large)' : 'capacity available'}`;
      case 'skip':
        return `  #${step.index} (nothing: ${step.reason})`;
    }
  });
}
