/**
 * The store conformance suite: every rule of the Store contract (src/store/types.ts, explained in
 * docs/stores.md), checked against one adapter. An adapter written outside this package (MySQL,
 * DynamoDB, …) runs it from one test file:
 *
 * ```ts
 * import { describe, it } from 'node:test';
 * import { storeConformance } from 'embedded-marketplace/testkit';
 *
 * storeConformance({
 *   name: 'my store',
 *   describe,
 *   it,
 *   async makeStore() {
 *     const store = await openMyStore(); // empty
 *     return { store, cleanup: () => store.close() };
 *   },
 * });
 * ```
 *
 * `makeStore` is called once per case and must hand back an empty store. The optional diagnostics
 * (StoreDiagnostics) are checked only when the store has them.
 *
 * The cases live by concern beside this file: entities.ts (reads, tombstones, credentials, values),
 * operations.ts (claim, renew, release, pending, commit), claims.ts (snapshot, parent/child
 * exclusion, orphans), replays.ts, exactly-once.ts (the failure paths through the operation
 * engine), deliveries.ts (the outbox), usage.ts, diagnostics.ts (optional methods); fixtures.ts
 * holds the records and helpers they share.
 */
import { credentialCases, readCases, tombstoneCases, valueCases } from './entities.js';
import { operationCases } from './operations.js';
import { exclusionCases, snapshotCases } from './claims.js';
import { replayCases } from './replays.js';
import { exactlyOnceCases } from './exactly-once.js';
import { deliveryCases } from './deliveries.js';
import { usageCases } from './usage.js';
import { diagnosticsCases } from './diagnostics.js';
import { suiteTest, type Suite } from './fixtures.js';
import type { StoreConformanceOptions, StoreContractOptions, StoreUnderTest, TestFunctions } from './types.js';

export { heldBy } from './fixtures.js';
export type { StoreConformanceOptions, StoreContractOptions, StoreUnderTest, TestCaseContext, TestFunctions } from './types.js';

/** Runs the conformance suite against the store `makeStore` opens (a fresh, empty one per test). */
export function storeContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions): void {
  const suite: Suite = { describe: options.describe, test: suiteTest(makeStore, options) };
  options.describe(`store contract: ${name}`, () => {
    readCases(suite);
    operationCases(suite);
    tombstoneCases(suite);
    credentialCases(suite);
    deliveryCases(suite);
    usageCases(suite);
    valueCases(suite);
  });
}

/**
 * The rules the operation table relies on (issue #11): the claim's snapshot, replay records, the
 * parent/child exclusion and orphaned pending credential operations, and the optional diagnostics
 * when the store has them. Part of the conformance suite: {@link storeConformance} runs it after
 * {@link storeContract}.
 */
export function operationTableContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions & TestFunctions): void {
  const suite: Suite = { describe: options.describe, test: suiteTest(makeStore, options) };
  options.describe(`store contract, operation table: ${name}`, () => {
    snapshotCases(suite);
    replayCases(suite);
    exclusionCases(suite);
    exactlyOnceCases(suite);
    diagnosticsCases(suite);
  });
}

/**
 * Runs the whole conformance suite (the contract's rules, then the operation table's: claim
 * snapshot, replay records, parent/child exclusion, orphaned credential operations, diagnostics).
 */
export function storeConformance(options: StoreConformanceOptions): void {
  const { name, makeStore, ...rest } = options;
  storeContract(name, makeStore, rest);
  operationTableContract(name, makeStore, rest);
}
