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

/** The rows of the markdown table whose header matches `header` (up to the first line that is not a table line). */
function tableRows(stdout: string, header = /^\| # /): string[][] {
  const lines = stdout.split('\n');
  const start = lines.findIndex((line) => header.test(line));
  if (start < 0) return [];
  const end = lines.findIndex((line, i) => i > start && !line.startsWith('|'));
  return lines
    .slice(start + 2, end < 0 ? undefined : end)
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
    // 6: three levels per SQL store, each after the first against the first; PostgreSQL measured or skipped.
    assert.equal(section('6').length, 6);
    for (const [offset, store] of [[0, 'sqliteStore'], [3, 'postgresStore']] as const) {
      const level = section('6').slice(offset, offset + 3);
      level.forEach((row, i) => {
        assert.match(row[1]!, new RegExp(`^time per request at [\\d,]+ stored resources \\(${store}\\)$`));
        assert.equal(row[5], i === 0 ? '' : 'flat (≤ 1.25)');
      });
      if (store === 'postgresStore' && level[0]![6] === 'skipped') {
        for (const row of level) assert.match(row[2]!, /^skipped: DATABASE_URL/);
        continue;
      }
      assert.equal(level[0]![3], 'reference');
      for (const row of level) {
        assert.match(row[2]!, /^[\d,]+ µs\/request \([\d,]+ req\/s at 32 connections\), p50 .+; server CPU [\d,]+ µs\/req/);
        assert.match(row[4]!, /^\d+\.\d\d$/);
      }
      for (const row of level.slice(1)) assert.match(row[3]!, /^[\d,]+ µs at [\d,]+/);
      if (store === 'postgresStore') for (const row of level) assert.match(row[2]!, /; PostgreSQL backends [\d,]+ µs\/req$/);
    }
    // 7: the replay records of each SQL store under a steady load, with the samples behind the verdict.
    assert.deepEqual(section('7').map((row) => row[1]!.replace(/\d[\d,]*/g, 'N')), [
      'replay records under N s of signed PATCHes offered at N req/s, TTL N s (sqliteStore)',
      'replay records under N s of signed PATCHes offered at N req/s, TTL N s (postgresStore)',
    ]);
    for (const row of section('7')) {
      if (row[6] === 'skipped') {
        assert.match(row[2]!, /^skipped: DATABASE_URL/);
        continue;
      }
      assert.match(row[2]!, /^[\d,]+ replay rows at the end, [\d,]+–[\d,]+ after warm-in \(\d+ s\), (never below|\*\*below\*\*) the floor; replay table at most .+ in the first half after warm-in, .+ in the second \([+−]\d+%\); database .+; [\d,]+ req\/s answered/);
      assert.match(row[3]!, /^bound: requests sent in the last TTL \+ 60 s/);
      assert.match(row[4]!, /^\d+\.\d\d$/);
      assert.equal(row[5], '≤ 1.00, rows ≥ floor; table flat (≤ +10%)');
      assert.match(row[6]!, /^(met|\*\*MISSED\*\* \(.+\))$/);
      const store = /\((\w+)\)$/.exec(row[1]!)![1]!;
      assert.match(run.stdout, new RegExp(`^Soak samples, ${store} \\(7;`, 'm'));
    }
    const samples = tableRows(run.stdout, /^\| t \(s\) +\| req\/s +\| replay rows +\| floor +\| bound +\| replay table +\| file \+ WAL +\|/);
    assert.ok(samples.length >= 4, `the SQLite soak's samples: ${samples.length}`);
    for (const sample of samples) assert.match(sample.slice(0, 5).join(' '), /^[\d.]+ [\d,]+ [\d,]+( ↓)? [\d,]+ [\d,]+$/);
    assert.match(run.stdout, /^- Scale runs: /m);
    assert.match(run.stdout, /^- Soak: /m);

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
    assert.deepEqual([section('2')[1]![5], section('2')[3]![5], section('2')[5]![5], section('3')[0]![5], section('3')[1]![5]], ['≥ 0.95', '≥ 0.9', '≥ 0.9', '≥ 0.85', '≥ 0.7']);
    // Server CPU per request, and on Linux the main thread's share of it (from /proc).
    const cpu = process.platform === 'linux' ? /server CPU [\d,]+ µs\/req \(main thread [\d,]+\)/ : /server CPU [\d,]+ µs\/req/;
    for (const row of section('2')) assert.match(row[2]!, cpu);
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

/** A short run of bench/inprocess.ts (one round of 60 requests over 4 connections) that must exit 0. */
function inprocess(configs: string, flag: string): { stdout: string } {
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/inprocess.ts', configs, '--rounds=1', '--requests=60', '--connections=4', flag], {
    cwd: root,
    encoding: 'utf8',
    timeout: 110_000,
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  assert.equal(run.status, 0, `bench/inprocess exited with ${String(run.status)}:\n${run.stderr}\n${run.stdout}`);
  return run;
}

describe('bench/inprocess --gc', () => {
  it('prints each configuration\'s CPU per request and its collector time, scavenges and full collections apart', { timeout: 120_000 }, () => {
    const run = inprocess('fastify-ceiling,fastify', '--gc');
    const lines = run.stdout.split('\n');
    for (const config of ['fastify-ceiling', 'fastify']) {
      const at = lines.findIndex((line) => new RegExp(`^${config} +\\d+ µs CPU per request`).test(line));
      assert.ok(at >= 0, `a CPU line for ${config}:\n${run.stdout}`);
      assert.match(lines[at + 1]!, /^ +collector on the main thread: \d+\.\d µs per request in scavenges, \d+\.\d µs in full collections/);
    }
  });
});

describe('bench/inprocess --promises and fastify-stub', () => {
  it('counts what each configuration creates per request, and serves the plugin on the stub store', { timeout: 120_000 }, () => {
    const run = inprocess('fastify-ceiling,fastify-stub', '--promises');
    const counted = (config: string): string => {
      const line = run.stdout.split('\n').find((text) => text.startsWith(`-- ${config}: created per request: `));
      assert.ok(line !== undefined, `a count line for ${config}:\n${run.stdout}`);
      return line;
    };
    // The ceiling answers from the crypto callback: one verification job, no promise of its own.
    assert.match(counted('fastify-ceiling'), /SIGNREQUEST 1\.0/);
    assert.doesNotMatch(counted('fastify-ceiling'), /PROMISE/);
    // The plugin goes through the engine (promises, its timers) even when the store keeps nothing.
    assert.match(counted('fastify-stub'), /PROMISE \d+\.\d.*Timeout [2-9]\.\d|Timeout [2-9]\.\d.*PROMISE \d+\.\d/);
    assert.match(run.stdout, /^fastify-stub +\d+ µs CPU per request/m);
  });
});

describe('bench/profile keep', () => {
  it('prints the store work of a provisioning three ways: plain Maps keeping nothing, keeping the records, and memoryStore', { timeout: 120_000 }, () => {
    // dist/ is built once before any test runs (scripts/run-tests.mjs), as bench/profile.ts needs.
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/profile.ts', 'keep', '--records=200', '--calls=300'], { cwd: root, encoding: 'utf8', timeout: 110_000 });
    assert.equal(run.status, 0, `bench/profile keep exited with ${String(run.status)}:\n${run.stderr}\n${run.stdout}`);
    assert.match(run.stdout, /tables already holding 200 provisionings/);
    const labels = run.stdout.split('\n').filter((line) => / µs per provisioning; rounds( \d+\.\d\d){5}$/.test(line)).map((line) => line.slice(0, 22).trim());
    assert.deepEqual(labels, ['Maps, keeping nothing', 'Maps, keeping', 'memoryStore']);
  });

  it('refuses an argument it does not take, with its usage', { timeout: 60_000 }, () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/profile.ts', 'keep', '--rounds=3'], { cwd: root, encoding: 'utf8', timeout: 50_000 });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /keep takes --records=N and --calls=N, not "--rounds=3"/);
  });
});
