/** Command lines of the bench's own tools (bench/profile.ts, bench/inprocess.ts). */

/** Prints `<tool>: <message>` and the usage to stderr, then exits with status 2. */
export function usageError(tool: string, usage: string): (message: string) => never {
  return (message) => {
    console.error(`${tool}: ${message}\n${usage}`);
    process.exit(2);
  };
}

/**
 * `--<name>=N` among `args`, or `fallback` when absent: a positive number (a positive integer with
 * `integer`); anything else is refused through `fail`.
 */
export function positiveFlag(args: readonly string[], name: string, fallback: number, fail: (message: string) => never, integer = false): number {
  const given = args.find((arg) => arg.startsWith(`--${name}=`));
  if (given === undefined) return fallback;
  const value = Number(given.slice(name.length + 3));
  const valid = integer ? Number.isSafeInteger(value) && value > 0 : Number.isFinite(value) && value > 0;
  if (!valid) fail(`--${name} takes a positive ${integer ? 'integer' : 'number'}, got "${given}"`);
  return value;
}
