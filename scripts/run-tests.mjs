#!/usr/bin/env node
// Runs every test/**/*.test.ts with node's test runner through tsx. A script, not a shell glob,
// because npm runs scripts with sh, whose `**` is not recursive, and Node 20's --test takes no globs.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const filters = process.argv.slice(2);

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...collect(full));
    else if (name.endsWith('.test.ts')) out.push(relative(root, full));
  }
  return out;
}

let files = collect(join(root, 'test'));
if (filters.length > 0) files = files.filter((f) => filters.some((needle) => f.includes(needle)));
if (files.length === 0) {
  console.error('run-tests: no test file matched');
  process.exit(1);
}
// Build dist once, before any test runs: the packaging tests pack it (with --ignore-scripts), and
// two test files building it at once would each delete what the other is writing.
const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) {
  console.error('run-tests: npm run build failed');
  process.exit(build.status ?? 1);
}
const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, NODE_ENV: process.env.NODE_ENV ?? 'test' },
});
process.exit(result.status ?? 1);
