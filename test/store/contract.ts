/**
 * The store conformance suite now lives in src/testkit/conformance/ (exported from
 * `embedded-marketplace/testkit` as `storeConformance`); this module binds it to `node:test` for the
 * repository's own adapter tests.
 */
import { describe, it } from 'node:test';
import {
  operationTableContract as operationTableCases,
  storeContract as contractCases,
  type StoreContractOptions,
  type StoreUnderTest,
} from '../../src/testkit/conformance/index.js';

export { heldBy, type StoreContractOptions, type StoreUnderTest } from '../../src/testkit/conformance/index.js';

export function storeContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions = {}): void {
  contractCases(name, makeStore, { ...options, describe, it });
}

export function operationTableContract(name: string, makeStore: () => Promise<StoreUnderTest>, options: StoreContractOptions = {}): void {
  operationTableCases(name, makeStore, { ...options, describe, it });
}
