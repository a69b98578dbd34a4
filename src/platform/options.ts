import { InvalidOptionsError } from '../errors.js';
import { asOptionsObject, optionalLogger, rejectUnknownKeys } from '../lib/options.js';
import type { Logger } from '../lib/logger.js';
import { resolveInstrumentation, type Instrumentation, type MetricsOptions } from '../observability/index.js';

/**
 * Option checks the platform factories need on top of `src/lib/options.ts`. A wrong option must stop
 * the app at start-up with a hint, never surface as a 500 at the first request the marketplace sends.
 */

/** The options as a record, after rejecting a non-object and unknown (often misspelled) keys. */
export function checkOptionKeys(factory: string, options: unknown, known: readonly string[]): Record<string, unknown> {
  const record = asOptionsObject(factory, options);
  rejectUnknownKeys(factory, record, known);
  return record;
}

/** The `logger` option: a pino logger, `false`, or absent. */
export function loggerOption(factory: string, record: Record<string, unknown>): Logger | false | undefined {
  return optionalLogger<Logger>(factory, record, 'logger');
}

export function requireFunction<T>(factory: string, name: string, value: unknown): T {
  if (typeof value !== 'function') throw new InvalidOptionsError(`${factory}: option "${name}" is required and must be a function`);
  return value as T;
}

/** A path option: absolute, no query string, so that routes are registered where the docs say. */
export function pathOption(factory: string, name: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !value.startsWith('/') || /[?#\s]/.test(value)) {
    throw new InvalidOptionsError(`${factory}: option "${name}" must be a path starting with "/" (for example "${fallback}")`);
  }
  return value;
}

/** A string or a non-empty list of non-empty strings (a list lets a secret be rotated without downtime). */
export function stringList(factory: string, name: string, value: unknown): string[] {
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((item) => typeof item === 'string' && item.length > 0)) {
    throw new InvalidOptionsError(
      `${factory}: option "${name}" is required: a non-empty string, or a non-empty array of them to rotate without downtime`,
    );
  }
  return [...(list as string[])];
}

/**
 * The hooks a platform factory calls: from its public `metrics` option, or from `instrumentation`,
 * an internal option (not part of the documented options) that tests use to observe the calls.
 */
export function instrumentationOption(factory: string, record: Record<string, unknown>): Instrumentation {
  const given = record.instrumentation as Instrumentation | undefined;
  if (given !== undefined) return given;
  return resolveInstrumentation(factory, record.metrics as MetricsOptions | undefined);
}
