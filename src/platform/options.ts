import { InvalidOptionsError } from '../errors.js';

/**
 * Checks shared by the platform factories. A wrong option must stop the app at start-up with a
 * hint, never surface as a 500 at the first request the marketplace sends.
 */

/** Returns the options as a record after rejecting non-objects and unknown (often misspelled) keys. */
export function checkOptionKeys(factory: string, options: unknown, known: readonly string[]): Record<string, unknown> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidOptionsError(`${factory}(options): options must be an object`);
  }
  const record = options as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (known.includes(key)) continue;
    const near = closest(key, known);
    throw new InvalidOptionsError(
      `${factory}(options): unknown option "${key}"${near === undefined ? '' : ` (did you mean "${near}"?)`}; known options: ${known.join(', ')}`,
    );
  }
  return record;
}

export function requireFunction<T>(factory: string, name: string, value: unknown): T {
  if (typeof value !== 'function') {
    throw new InvalidOptionsError(`${factory}(options): "${name}" is required and must be a function`);
  }
  return value as T;
}

export function optionalFunction<T>(factory: string, name: string, value: unknown): T | undefined {
  if (value === undefined) return undefined;
  return requireFunction<T>(factory, name, value);
}

export function requireNonEmptyString(factory: string, name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidOptionsError(`${factory}(options): "${name}" is required and must be a non-empty string`);
  }
  return value;
}

/** An integer option within [min, max], or its default when absent. */
export function integerOption(factory: string, name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionsError(`${factory}(options): "${name}" must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** A path option: absolute, no query string, so that routes are registered where the docs say. */
export function pathOption(factory: string, name: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !value.startsWith('/') || /[?#\s]/.test(value)) {
    throw new InvalidOptionsError(`${factory}(options): "${name}" must be a path starting with "/" (for example "${fallback}")`);
  }
  return value;
}

/** A string or a non-empty list of non-empty strings (lists let a secret be rotated without downtime). */
export function stringList(factory: string, name: string, value: unknown): string[] {
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((item) => typeof item === 'string' && item.length > 0)) {
    throw new InvalidOptionsError(
      `${factory}(options): "${name}" is required: a non-empty string, or a non-empty array of them to rotate without downtime`,
    );
  }
  return [...(list as string[])];
}

function closest(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
