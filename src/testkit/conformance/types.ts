/** The public shapes of the store conformance suite (`embedded-marketplace/testkit`). */
import type { ListingStore } from '../../store/types.js';

export interface StoreUnderTest {
  store: ListingStore;
  cleanup(): Promise<void>;
}

/**
 * The test functions the suite registers its cases with: `node:test`'s `describe` and `it` (or any
 * runner's with the same shapes: `it(title, { skip }, fn)`).
 */
export interface TestFunctions {
  describe(name: string, fn: () => void): unknown;
  it(name: string, options: { skip?: string | boolean }, fn: () => Promise<void>): unknown;
}

export interface StoreContractOptions {
  /** A reason to skip the whole suite (e.g. the database server is absent), or false. */
  skip?: string | false;
}

/** What {@link storeConformance} runs. */
export interface StoreConformanceOptions extends StoreContractOptions, TestFunctions {
  /** Names the suite in the runner's report. */
  name: string;
  /** Called once per case: a new, empty store, and how to dispose of it. */
  makeStore(): Promise<StoreUnderTest>;
}
