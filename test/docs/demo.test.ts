import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;

describe('npm run demo', () => {
  it('runs the suite on every host (express, fastify, fetch), prints a report without JSON log lines, marks checks not made, and points at the code', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', join(root, 'examples', 'demo.ts')], { cwd: root, timeout: 300_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: '1' } });
    const jsonLines = stdout.split('\n').filter((line) => line.trimStart().startsWith('{"level"'));
    assert.deepEqual(jsonLines, []);
    assert.match(stdout, /provision\.conflict-product\): NOT CHECKED/);
    assert.doesNotMatch(stdout, /PASS {2}the same id with another product conflicts/);
    for (const adapter of ['express', 'fastify', 'fetch']) {
      for (const mode of ['sync', 'async']) assert.match(stdout, new RegExp(`^=== ${adapter} ${mode}: the example provider on ${adapter} `, 'm'));
    }
    assert.match(stdout, /^Demo: express: sync passed \(\d+ passed, 0 failed, \d+ skipped, \d+ not checked\), async passed \(\d+ passed, 0 failed, \d+ skipped, \d+ not checked\); fastify: sync passed \(\d+ passed, 0 failed, \d+ skipped, \d+ not checked\), async passed \(\d+ passed, 0 failed, \d+ skipped, \d+ not checked\); fetch: sync passed \(\d+ passed, 0 failed, \d+ skipped, \d+ not checked\), async passed \(\d+ passed, 0 failed, \d+ skipped, \d+ not checked\);/m);
    assert.match(stdout, /What ran:[\s\S]*examples\/provider-app\.ts[\s\S]*examples\/hosts\.ts[\s\S]*src\/core\/[\s\S]*src\/adapters\//);
  });
});
