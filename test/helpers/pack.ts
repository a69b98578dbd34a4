import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
export const NPM_ENV = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', npm_config_loglevel: 'error' };

/**
 * Packs the package into `destination` and answers the report of `npm pack --json`.
 *
 * Packs with `--ignore-scripts`: `npm test` (scripts/run-tests.mjs) builds dist once before any test
 * runs, because two test files packing at once would each run `prepack` and rebuild dist under
 * the other.
 */
export async function packTarball(destination: string): Promise<{ tarball: string; files: string[] }> {
  if (!existsSync(join(root, 'dist', 'index.js')) || !existsSync(join(root, 'dist', 'cjs', 'index.js'))) {
    throw new Error('dist is not built: run the tests with `npm test`, which builds it first, or `npm run build`');
  }
  const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', destination], { cwd: root, env: NPM_ENV, timeout: 120_000, maxBuffer: 32 * 1024 * 1024 });
  // Lifecycle output may precede the JSON (npm prints it to stdout on some versions).
  const report = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  return { tarball: join(destination, report[0]!.filename), files: report[0]!.files.map((f) => f.path) };
}
