import { InvalidOptionsError } from '../errors.js';

/**
 * Option checks shared by every factory of the package. Private to
 * the package: a wrong option must fail at start-up with a hint, never as a 500 at the first request.
 */

/** Throws unless `value` is a plain object; returns it typed as a record for the other checks. */
export function asOptionsObject(factory: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionsError(`${factory}: expected one options object`);
  }
  return value as Record<string, unknown>;
}

/** Rejects unknown keys, naming the closest known one so a typo reads as a typo. */
export function rejectUnknownKeys(factory: string, options: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const hint = closest(key, known);
    throw new InvalidOptionsError(
      `${factory}: unknown option "${key}"${hint === undefined ? '' : ` (did you mean "${hint}"?)`}; known options: ${known.join(', ')}`,
    );
  }
}

/** A non-empty string option. Never echoes the value: some of these options are secrets. */
export function requireNonEmptyString(factory: string, options: Record<string, unknown>, key: string): string {
  const value = options[key];
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidOptionsError(`${factory}: option "${key}" is required and must be a non-empty string`);
  }
  return value;
}

/** An optional positive finite number (milliseconds, seconds, counts). */
export function optionalPositiveNumber(factory: string, options: Record<string, unknown>, key: string, opts: { allowZero?: boolean } = {}): number | undefined {
  const value = options[key];
  if (value === undefined) return undefined;
  const ok = typeof value === 'number' && Number.isFinite(value) && (opts.allowZero === true ? value >= 0 : value > 0);
  if (!ok) {
    throw new InvalidOptionsError(`${factory}: option "${key}" must be a ${opts.allowZero === true ? 'non-negative' : 'positive'} finite number`);
  }
  return value;
}

/** An optional function option. */
export function optionalFunction<T>(factory: string, options: Record<string, unknown>, key: string): T | undefined {
  const value = options[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw new InvalidOptionsError(`${factory}: option "${key}" must be a function`);
  return value as T;
}

/** An optional logger: a pino-like object with the level methods the library calls, or `false`. */
export function optionalLogger<T>(factory: string, options: Record<string, unknown>, key = 'logger'): T | false | undefined {
  const value = options[key];
  if (value === undefined || value === false) return value;
  const candidate = value as Record<string, unknown>;
  const ok = typeof value === 'object' && value !== null
    && ['info', 'warn', 'error', 'debug', 'child'].every((m) => typeof candidate[m] === 'function');
  if (!ok) throw new InvalidOptionsError(`${factory}: option "${key}" must be a pino logger (or false to turn logging off)`);
  return value as T;
}

function closest(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : undefined;
}

function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** An integer option within [min, max], or its default when absent. */
export function integerOption(factory: string, name: string, value: unknown, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new InvalidOptionsError(`${factory}: option "${name}" must be an integer ${range}`);
  }
  return value;
}
