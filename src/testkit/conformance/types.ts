/** The public shapes of the store conformance suite (`embedded-marketplace/testkit`). */
import type { Store } from '../../store/types.js';

/**
 * A store to run the suite against, and how to dispose of it. Only the required parts of the
 * contract are needed; the cases that check an optional method (StoreDiagnostics) the store lacks
 * are reported skipped, with the method named.
 *
 * @example
 * ```ts
 * const makeStore = async (): Promise<StoreUnderTest> => {
 *   const store = await openMyStore();
 *   return { store, cleanup: () => store.close() };
 * };
 * ```
 */
export interface StoreUnderTest {
  store: Store;
  cleanup(): Promise<void>;
}

/**
 * What a runner hands a test function: node:test's and vitest's test context have `skip(reason)`,
 * with which a case that needs an optional method the store lacks reports itself skipped.
 */
export interface TestCaseContext {
  skip?(message?: string): void;
}

/**
 * The test functions the suite registers its cases with: `node:test`'s `describe` and `it` (or any
 * runner's with the same shapes: `it(title, { skip }, fn)`, `fn` given a context with `skip`).
 *
 * @example
 * ```ts
 * import { describe, it } from 'node:test';
 * const functions: TestFunctions = { describe, it };
 * ```
 */
export interface TestFunctions {
  describe(name: string, fn: () => void): unknown;
  it(name: string, options: { skip?: string | boolean }, fn: (context: TestCaseContext) => Promise<void>): unknown;
}

/**
 * Options of the suite's parts.
 *
 * @example
 * ```ts
 * storeContract('my store', makeStore, { describe, it, skip: process.env.DB ? false : 'no database' });
 * ```
 */
export interface StoreContractOptions {
  /** A reason to skip the whole suite (e.g. the database server is absent), or false. */
  skip?: string | false;
}

/**
 * What {@link storeConformance} runs.
 *
 * @example
 * ```ts
 * storeConformance({ name: 'my store', describe, it, makeStore });
 * ```
 */
export interface StoreConformanceOptions extends StoreContractOptions, TestFunctions {
  /** Names the suite in the runner's report. */
  name: string;
  /** Called once per case: a new, empty store, and how to dispose of it. */
  makeStore(): Promise<StoreUnderTest>;
}
