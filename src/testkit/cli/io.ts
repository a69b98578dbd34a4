import { parseArgs, type ParseArgsConfig } from 'node:util';
import { resolve } from 'node:path';
import type { Clock as PackageClock } from '../../lib/clock.js';
import { DEFAULT_MASTER_KEY_FILE, MasterKeyError, readMasterKey, type MasterKey } from '../masterkey.js';

/** Where a command writes and what it reads from its surroundings (the real process in the bin). */
export interface CliIo {
  stdout: { write(text: string): unknown; isTTY?: boolean };
  stderr: { write(text: string): unknown; isTTY?: boolean };
  env: Record<string, string | undefined>;
  cwd: string;
  /** Where a command reads answers to its questions (`outbox drop`); absent means nobody can answer. */
  stdin?: NodeJS.ReadableStream;
  /** The time `--wait` counts on; absent means the system's. A seam for tests, which pass a fake one. */
  clock?: Clock;
}

/**
 * Time as `--wait` sees it (`waitForProvider` in wait.ts): the package's clock (what time it is, a
 * pause between two attempts), plus the time one attempt may take. The system's clock unless a
 * test passes its own.
 */
export interface Clock extends Pick<PackageClock, 'now' | 'sleep'> {
  /** A signal that aborts with a `TimeoutError` after `ms` (as `AbortSignal.timeout` does). */
  timeout(ms: number): AbortSignal;
}

/** A wrong command line: exit code 2 with the message and a usage hint. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Exit codes of the bin. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** `parseArgs` with its errors turned into {@link UsageError}. */
export function parse<T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: true; strict: true }>> {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message.replace(/\. To specify a positional argument.*$/s, '') : String(err));
  }
}

/** Reads the master key from `--master-key FILE` or ./masterkey.json; a missing file is a usage error. */
export function loadMasterKey(io: CliIo, file: string | undefined): MasterKey {
  const path = resolve(io.cwd, file ?? DEFAULT_MASTER_KEY_FILE);
  try {
    return readMasterKey(path);
  } catch (err) {
    if (err instanceof MasterKeyError) throw new UsageError(err.message);
    throw err;
  }
}

/** A TCP port from a flag. */
export function portOption(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new UsageError(`${flag} must be a port number (0-65535), got ${JSON.stringify(value)}`);
  return Number(value);
}

/** A duration: `90s`, `5m`, `1500ms`, or a number of seconds. */
export function durationOption(value: string | undefined, flag: string, fallbackMs: number): number {
  if (value === undefined) return fallbackMs;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  if (match === null) throw new UsageError(`${flag} must be a duration such as 90s, 5m or 1500ms, got ${JSON.stringify(value)}`);
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] ?? 's'] ?? 1000;
  const ms = Number(match[1]) * factor;
  if (ms <= 0 || ms > 24 * 3_600_000) throw new UsageError(`${flag} must be more than 0 and at most 24h (the callback deadline)`);
  return ms;
}
