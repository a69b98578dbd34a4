import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

/**
 * `npm run bench -- --quick` must keep working: it runs every measurement scaled down and prints
 * the results table. Only the shape is checked here, never a figure: timings are noise in CI.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));

function tableRows(stdout: string): string[][] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| # '))
    .map((line) => line.slice(2, -2).split(' | ').map((cell) => cell.trim()));
}

describe('bench --quick', () => {
  it('runs every measurement and prints the table with its baselines', { timeout: 120_000 }, () => {
    const svg = join(mkdtempSync(join(tmpdir(), 'em-bench-')), 'chart.svg');
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--quick', `--svg=${svg}`], { cwd: root, encoding: 'utf8', timeout: 110_000 });
    assert.equal(run.status, 0, `bench exited with ${String(run.status)}:\n${run.stderr}\n${run.stdout}`);

    assert.match(run.stdout, /^machine: \d+ × .+, Node v\d+/m);
    const rows = tableRows(run.stdout);
    const section = (n: string) => rows.filter((row) => row[0] === n);
    const names = (n: string) => section(n).map((row) => row[1]);

    assert.equal(section('1').length, 2);
    assert.ok(names('1').every((name) => /^verify\(\) vs raw crypto\.verify, \d+ in flight \((throughput|latency); median of \d+ paired slices\)$/.test(name!)));
    assert.deepEqual(names('2'), [
      'one-verify ceiling: bare Express + raw body + canonical form + 1 Ed25519 verify (thread pool) + JSON.parse',
      'signed PUT, marketplaceRouter + memoryStore',
      'one-verify ceiling, Fastify 5: raw-body parser + canonical form + 1 Ed25519 verify (thread pool) + JSON.parse',
      'signed PUT, marketplacePlugin (Fastify 5) + memoryStore',
      'one-verify ceiling, fetch: Request → Response on @hono/node-server + canonical form + 1 Ed25519 verify (thread pool) + JSON.parse',
      'signed PUT, provider.fetch (@hono/node-server) + memoryStore',
    ]);
    assert.deepEqual(names('3'), ['signed PUT, marketplaceRouter + sqliteStore (temp file)', 'signed PUT, marketplaceRouter + postgresStore (own schema)']);
    assert.equal(section('4').length, 2);
    assert.match(names('4')[0]!, /^memory: [\d,]+ resources provisioned/);
    assert.match(names('4')[1]!, /^memory: [\d,]+ verifications, [\d,]+ live keys rotating/);
    assert.equal(section('5').length, 3);
    assert.ok(names('5').every((name) => /^time per request at [\d,]+ stored resources/.test(name!)));

    for (const row of rows) {
      assert.equal(row.length, 7, `a row with 7 cells: ${row.join(' | ')}`);
      assert.doesNotMatch(row.join(' '), /FAILED/);
    }
    // Every ratio is a number taken against a baseline measured in the same run.
    for (const row of [...section('1'), ...section('2'), section('3')[0]!, ...section('5')]) assert.match(row[4]!, /^\d+\.\d\d$/);
    // The Express ceiling against bare Express, the Fastify and fetch ceilings against Express's;
    // every adapter against its own host's ceiling, with its target.
    assert.match(section('2')[0]![3]!, /^bare Express [\d,]+ req\/s/);
    for (const row of [1, 2, 4]) assert.match(section('2')[row]![3]!, /^Express ceiling [\d,]+ req\/s/);
    assert.match(section('2')[3]![3]!, /^Fastify ceiling [\d,]+ req\/s/);
    assert.match(section('2')[5]![3]!, /^fetch ceiling [\d,]+ req\/s/);
    assert.match(section('3')[0]![3]!, /^Express ceiling [\d,]+ req\/s/);
    assert.deepEqual([section('2')[1]![5], section('2')[3]![5], section('2')[5]![5], section('3')[0]![5], section('3')[1]![5]], ['≥ 0.95', '≥ 0.9', '≥ 0.9', '≥ 0.6', '≥ 0.5']);
    for (const row of section('2')) assert.match(row[2]!, /server CPU [\d,]+ µs\/req/);
    // The chart the docs show, written by the same run.
    const chart = readFileSync(svg, 'utf8');
    assert.match(chart, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    for (const label of ['Express ceiling', 'Express · memoryStore', 'Fastify ceiling', 'Fastify · memoryStore', 'fetch ceiling', 'fetch · memoryStore']) assert.match(chart, new RegExp(label));
    assert.match(section('4')[0]![2]!, /B\/resource/);
    assert.match(section('4')[1]![2]!, /endorsement cache max [\d,]+ \/ capacity [\d,]+/);
    // The postgres row is measured or says why not; either way it is there.
    assert.match(section('3')[1]![2]!, /req\/s|^skipped: DATABASE_URL/);
  });
});
