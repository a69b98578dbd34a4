import { InvalidOptionsError } from '../errors.js';

/**
 * Private helpers shared by the SQL adapters (sqlite.ts, postgres.ts). Not exported from the package;
 * the general option checks live in src/lib/options.ts.
 */

/** A non-negative integer option, or its default when absent. */
export function integerOption(factory: string, name: string, value: unknown, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new InvalidOptionsError(`${factory}: option "${name}" must be an integer >= ${min}`);
  }
  return value;
}

/** Copies `value` onto `target[key]` only when it is present, so absent fields stay absent (not `undefined`). */
export function setIfPresent<T extends object, K extends keyof T>(target: T, key: K, value: T[K] | null | undefined): void {
  if (value !== null && value !== undefined) target[key] = value;
}
