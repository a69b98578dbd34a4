import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const helper = new URL('./postgres.ts', import.meta.url).pathname;
const PROBE = `const m = await import(${JSON.stringify(helper)}); console.log(JSON.stringify({ url: m.DATABASE_URL, first: await m.postgresSkipReason(), second: await m.postgresSkipReason() }));`;

async function probe(env: Record<string, string | undefined>): Promise<{ out: { url: string; first: string | false; second: string | false }; stderr: string }> {
  const { DATABASE_URL: _drop, ...rest } = process.env;
  const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PROBE], { env: { ...rest, ...env }, timeout: 60_000 });
  return { out: JSON.parse(stdout.trim().split('\n').pop()!) as { url: string; first: string | false; second: string | false }, stderr };
}

describe('test/helpers/postgres', () => {
  it('uses the conventional local server when DATABASE_URL is unset', async () => {
    const { out } = await probe({});
    assert.equal(out.url, 'postgres://postgres@127.0.0.1:5432/test');
    // Whether it answers depends on the machine; either way the answer is stable and explained.
    assert.equal(out.first, out.second);
    if (out.first !== false) assert.match(out.first, /DATABASE_URL is not set and no PostgreSQL answers at 127\.0\.0\.1:5432/);
  });

  it('says once why the tests are skipped when the server does not answer', async () => {
    const { out, stderr } = await probe({ DATABASE_URL: 'postgres://nobody:hunter2@127.0.0.1:1/none' });
    assert.match(String(out.first), /unreachable/);
    assert.doesNotMatch(String(out.first), /hunter2/);
    assert.equal(stderr.match(/PostgreSQL tests skipped/g)?.length, 1);
  });
});
