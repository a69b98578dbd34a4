import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/testkit/cli/main.js';
import { outboxCommand } from '../../src/testkit/cli/outbox.js';
import { operationsCommand } from '../../src/testkit/cli/operations.js';
import { UsageError, type CliIo } from '../../src/testkit/cli/io.js';
import type { StoreSpec } from '../../src/testkit/cli/diagnostics.js';
import { fakeDiagnostics, type FakeDiagnostics } from './helpers.js';

const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);
const HOUR = 3_600_000;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function io(options: { stdin?: string; env?: Record<string, string>; cwd?: string } = {}) {
  const out = { stdout: '', stderr: '' };
  const value: CliIo = {
    stdout: { write: (t: string) => (out.stdout += t) },
    stderr: { write: (t: string) => (out.stderr += t) },
    env: options.env ?? {},
    cwd: options.cwd ?? '/srv/provider',
    ...(options.stdin === undefined ? {} : { stdin: Readable.from([options.stdin]) }),
  };
  return { io: value, out };
}

/** A store with a delivery in every state the outbox knows, and one operation waiting for completion. */
function populated(): FakeDiagnostics {
  const store = fakeDiagnostics({ now: () => NOW });
  store.addDelivery({ id: 'dlv-due', callbackId: 'cb1', createdAt: NOW - 125_000, nextAttemptAt: NOW - 1_000, url: 'https://alice:pa55word@connector.example/v1/callbacks/cb1?token=tkn-SECRET' });
  store.addDelivery({ id: 'dlv-waiting', callbackId: 'cb2', createdAt: NOW - 2 * HOUR, attempts: 4, nextAttemptAt: NOW + 5 * 60_000, lastError: 'connector answered 503 at https://u:hunter2@connector.example with Bearer abc.def' });
  store.addDelivery({ id: 'dlv-claimed', callbackId: 'cb3', createdAt: NOW - 30_000, attempts: 1, claimedBy: 'web-1:42:beef', claimExpiresAt: NOW + 20_000 });
  store.addDelivery({ id: 'dlv-failed', callbackId: 'cb4', state: 'failed', createdAt: NOW - 26 * HOUR, attempts: 12, lastError: 'past the 24 h deadline' });
  store.addOperation({ targetId: 'res-old', kind: 'provision', callbackId: 'cb9', createdAt: NOW - 23 * HOUR, deadlineAt: NOW + HOUR });
  store.addOperation({ targetId: 'cred-new', key: 'credential:cred-new', kind: 'provisionCredentials', createdAt: NOW - 90_000, callbackId: undefined, deadlineAt: NOW + 24 * HOUR - 90_000 });
  return store;
}

async function run(command: typeof outboxCommand, args: string[], store: FakeDiagnostics, options: Parameters<typeof io>[0] = {}): Promise<Run & { opened: StoreSpec[] }> {
  const { io: cliIo, out } = io(options);
  const opened: StoreSpec[] = [];
  const code = await command(args, cliIo, { open: async (spec) => (opened.push(spec), store), now: () => NOW });
  return { code, ...out, opened };
}

const NEVER_PRINTED = ['pa55word', 'tkn-SECRET', 'hunter2', 'abc.def', 'fencing-token-never-shown'];
function assertNoSecret(text: string): void {
  for (const secret of NEVER_PRINTED) assert.ok(!text.includes(secret), `output must not contain ${secret}:\n${text}`);
}

describe('embedded-marketplace outbox', () => {
  it('lists every delivery oldest first, as a table', async () => {
    const store = populated();
    const r = await run(outboxCommand, ['list', '--store', 'postgres://app@db.internal/provider'], store);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^ID\s+CALLBACK\s+STATE\s+ATTEMPTS\s+AGE\s+NEXT\s+DEADLINE IN\s+LAST ERROR$/);
    assert.deepEqual(lines.slice(1).map((l) => l.split(/\s+/)[0]), ['dlv-failed', 'dlv-waiting', 'dlv-due', 'dlv-claimed']);
    assert.match(r.stdout, /dlv-failed\s+cb4\s+failed\s+12\s+1d02h\s+never \(failed\)\s+-2h00m\s+past the 24 h deadline/);
    assert.match(r.stdout, /dlv-waiting\s+cb2\s+pending\s+4\s+2h00m\s+in 5m00s\s+22h00m\s+connector answered 503 at https:\/\/u:\*\*\*@connector\.example with Bearer \*\*\*/);
    assert.match(r.stdout, /dlv-due\s+cb1\s+pending\s+0\s+2m05s\s+due/);
    assertNoSecret(r.stdout + r.stderr);
    assert.deepEqual(r.opened, [{ kind: 'postgres', connectionString: 'postgres://app@db.internal/provider' }]);
    assert.ok(store.isClosed(), 'the store is closed after the command');
  });

  it('lists as JSON for scripts, filtered by state and limited', async () => {
    const store = populated();
    const r = await run(outboxCommand, ['list', '--store', 'memory', '--json', '--state', 'pending', '--limit', '2'], store);
    assert.equal(r.code, 0, r.stderr);
    const list = JSON.parse(r.stdout) as Record<string, unknown>[];
    assert.deepEqual(list.map((d) => d.id), ['dlv-waiting', 'dlv-due']);
    assert.deepEqual(list[1], {
      id: 'dlv-due',
      callbackId: 'cb1',
      url: 'https://connector.example/v1/callbacks/cb1?…',
      state: 'pending',
      attempts: 0,
      createdAt: new Date(NOW - 125_000).toISOString(),
      ageSeconds: 125,
      nextAttemptAt: new Date(NOW - 1_000).toISOString(),
      deadlineAt: new Date(NOW - 125_000 + 24 * HOUR).toISOString(),
    });
    assertNoSecret(r.stdout);
  });

  it('says so when the outbox is empty', async () => {
    const r = await run(outboxCommand, ['list', '--store', 'memory'], fakeDiagnostics());
    assert.equal(r.code, 0);
    assert.equal(r.stdout, 'No deliveries in the outbox.\n');
    const failed = await run(outboxCommand, ['list', '--store', 'memory', '--state', 'failed'], fakeDiagnostics());
    assert.equal(failed.stdout, 'No failed deliveries in the outbox.\n');
  });

  it('shows one delivery, with its claim, in text and JSON', async () => {
    const store = populated();
    const text = await run(outboxCommand, ['show', 'dlv-claimed', '--store', 'memory'], store);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^id:\s+dlv-claimed$/m);
    assert.match(text.stdout, /^claimed by:\s+web-1:42:beef until 2026-11-23T12:00:20\.000Z$/m);
    assert.match(text.stdout, /^created:\s+2026-11-23T11:59:30\.000Z \(30s ago\)$/m);
    const json = await run(outboxCommand, ['show', 'dlv-due', '--store', 'memory', '--json'], store);
    assert.equal((JSON.parse(json.stdout) as { url: string }).url, 'https://connector.example/v1/callbacks/cb1?…');
    assertNoSecret(text.stdout + json.stdout);
  });

  it('fails with exit code 1 for an unknown delivery', async () => {
    const r = await run(outboxCommand, ['show', 'nope', '--store', 'memory'], populated());
    assert.equal(r.code, 1);
    assert.equal(r.stderr, 'embedded-marketplace outbox show: no delivery "nope" in the outbox (see "outbox list")\n');
  });

  it('retry makes a failed or waiting delivery due now', async () => {
    const store = populated();
    const failed = await run(outboxCommand, ['retry', 'dlv-failed', '--store', 'memory'], store);
    assert.equal(failed.code, 0, failed.stderr);
    assert.match(failed.stdout, /Delivery dlv-failed \(callback cb4\) is due now/);
    assert.equal(store.delivery('dlv-failed')?.state, 'pending');
    assert.equal(store.delivery('dlv-failed')?.nextAttemptAt, NOW);
    const waiting = await run(outboxCommand, ['retry', 'dlv-waiting', '--store', 'memory', '--json'], store);
    assert.deepEqual(JSON.parse(waiting.stdout), { id: 'dlv-waiting', due: true, nextAttemptAt: new Date(NOW).toISOString(), previousState: 'pending' });
    assert.equal(store.delivery('dlv-waiting')?.nextAttemptAt, NOW);
  });

  it('drop asks first and drops only on yes', async () => {
    const store = populated();
    const no = await run(outboxCommand, ['drop', 'dlv-failed', '--store', 'memory'], store, { stdin: 'n\n' });
    assert.equal(no.code, 1);
    assert.match(no.stderr, /^Drop delivery dlv-failed \(callback cb4, failed, 12 attempts\)\? The marketplace will never receive this callback\. \[y\/N\] Not dropped\.\n$/);
    assert.ok(store.delivery('dlv-failed') !== undefined);
    const silent = await run(outboxCommand, ['drop', 'dlv-failed', '--store', 'memory'], store, { stdin: '' });
    assert.equal(silent.code, 1, 'end of input is a no');
    assert.ok(store.delivery('dlv-failed') !== undefined);

    const yes = await run(outboxCommand, ['drop', 'dlv-failed', '--store', 'memory'], store, { stdin: 'yes\n' });
    assert.equal(yes.code, 0, yes.stderr);
    assert.equal(yes.stdout, 'Dropped delivery dlv-failed (callback cb4).\n');
    assert.equal(store.delivery('dlv-failed'), undefined);
  });

  it('drop --yes does not ask; without --yes and without stdin it refuses', async () => {
    const store = populated();
    const r = await run(outboxCommand, ['drop', 'dlv-due', '--store', 'memory', '--yes', '--json'], store);
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.stdout), { id: 'dlv-due', dropped: true });
    assert.equal(r.stderr, '');
    assert.equal(store.delivery('dlv-due'), undefined);
    await assert.rejects(run(outboxCommand, ['drop', 'dlv-waiting', '--store', 'memory'], store), (err: unknown) => err instanceof UsageError && /pass --yes/.test(err.message));
    assert.ok(store.delivery('dlv-waiting') !== undefined);
    assert.ok(store.isClosed());
  });

  it('reports a store that cannot be reached on one line, without the password, and closes nothing it did not open', async () => {
    const { io: cliIo, out } = io();
    const cause = new Error('connect ECONNREFUSED 127.0.0.1:5432 for postgres://app:s3cr3t@127.0.0.1/provider');
    const code = await outboxCommand(['list', '--store', 'postgres://app:s3cr3t@127.0.0.1/provider'], cliIo, {
      open: async () => {
        throw new Error('Store unavailable', { cause });
      },
    });
    assert.equal(code, 1);
    assert.equal(out.stderr, 'embedded-marketplace outbox list: Store unavailable (connect ECONNREFUSED 127.0.0.1:5432 for postgres://app:***@127.0.0.1/provider)\n');
  });

  it('fails clearly against a store without the diagnostics methods, and still closes it', async () => {
    let closed = false;
    const { io: cliIo, out } = io();
    const code = await outboxCommand(['list', '--store', 'memory'], cliIo, { open: async () => ({ kind: 'custom', close: async () => void (closed = true) }) });
    assert.equal(code, 1);
    assert.match(out.stderr, /the custom store does not offer listDeliverySummaries\(\)/);
    assert.ok(closed);
  });

  it('reads --store as memory, sqlite:PATH (from the working directory) or a PostgreSQL URL, else DATABASE_URL', async () => {
    const specs = async (args: string[], env: Record<string, string> = {}) => (await run(outboxCommand, ['list', ...args], fakeDiagnostics(), { env, cwd: '/srv/provider' })).opened;
    assert.deepEqual(await specs(['--store', 'sqlite:data/provider.db']), [{ kind: 'sqlite', path: '/srv/provider/data/provider.db' }]);
    assert.deepEqual(await specs(['--store', 'postgresql://app@db/p', '--schema', 'tenant_a']), [{ kind: 'postgres', connectionString: 'postgresql://app@db/p', schema: 'tenant_a' }]);
    assert.deepEqual(await specs([], { DATABASE_URL: 'postgres://app@db/p' }), [{ kind: 'postgres', connectionString: 'postgres://app@db/p' }]);
    const refused = (args: string[], pattern: RegExp) => assert.rejects(run(outboxCommand, ['list', ...args], fakeDiagnostics()), (err: unknown) => err instanceof UsageError && pattern.test(err.message) && !err.message.includes('s3cr3t'));
    await refused([], /give --store/);
    await refused(['--store', 'mysql://root:s3cr3t@db/p'], /--store must be memory, sqlite:PATH or a postgres:\/\/ URL/);
    await refused(['--store', 'sqlite:'], /needs the path/);
    await refused(['--store', 'memory', '--schema', 'x'], /--schema applies to a PostgreSQL store only/);
    await refused(['--store', 'memory', '--limit', '0'], /--limit must be a whole number from 1 to 10000/);
    await refused(['--store', 'memory', '--state', 'done'], /--state must be pending or failed/);
  });

  it('refuses a wrong command line with a usage error', async () => {
    const refused = (args: string[], pattern: RegExp) => assert.rejects(run(outboxCommand, args, fakeDiagnostics()), (err: unknown) => err instanceof UsageError && pattern.test(err.message));
    await refused(['--store', 'memory'], /expected one of list, show, retry, drop/);
    await refused(['purge', '--store', 'memory'], /got "purge"/);
    await refused(['show', '--store', 'memory'], /needs a delivery id/);
    await refused(['list', 'x', '--store', 'memory'], /takes no delivery id/);
    await refused(['retry', 'x', '--store', 'memory', '--yes'], /--yes applies to outbox drop only/);
    await refused(['show', 'x', '--store', 'memory', '--limit', '3'], /apply to outbox list only/);
  });

  it('refuses a SQLite path that does not exist instead of creating an empty database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'em-obs-cli-'));
    try {
      const { io: cliIo, out } = io({ cwd: dir });
      const code = await main(['outbox', 'list', '--store', 'sqlite:missing.db'], cliIo);
      assert.equal(code, 2);
      assert.match(out.stderr, /no SQLite database at .*missing\.db/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('embedded-marketplace operations', () => {
  it('lists pending operations oldest first with age, callback id and time to the deadline', async () => {
    const r = await run(operationsCommand, ['list', '--store', 'memory'], populated());
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^KIND\s+ID\s+CALLBACK\s+AGE\s+DEADLINE IN$/);
    assert.match(lines[1]!, /^provision\s+res-old\s+cb9\s+23h00m\s+1h00m$/);
    assert.match(lines[2]!, /^provisionCredentials\s+cred-new\s+-\s+1m30s\s+23h58m$/);
    assertNoSecret(r.stdout);
  });

  it('answers JSON without fencing token or fingerprint', async () => {
    const r = await run(operationsCommand, ['list', '--store', 'memory', '--json', '--limit', '1'], populated());
    const list = JSON.parse(r.stdout) as Record<string, unknown>[];
    assert.deepEqual(list, [{
      kind: 'provision',
      id: 'res-old',
      callbackId: 'cb9',
      message: 'Knitting',
      createdAt: new Date(NOW - 23 * HOUR).toISOString(),
      ageSeconds: 23 * 3600,
      deadlineAt: new Date(NOW + HOUR).toISOString(),
      secondsToDeadline: 3600,
    }]);
    assertNoSecret(r.stdout);
  });

  it('says so when nothing waits, and refuses other subcommands', async () => {
    assert.equal((await run(operationsCommand, ['list', '--store', 'memory'], fakeDiagnostics())).stdout, 'No operation waits for completion.\n');
    await assert.rejects(run(operationsCommand, ['complete', '--store', 'memory'], fakeDiagnostics()), (err: unknown) => err instanceof UsageError && /expected list, got "complete"/.test(err.message));
  });
});

describe('embedded-marketplace help for the operator commands', () => {
  it('lists them and prints their usage', async () => {
    const { io: cliIo, out } = io();
    assert.equal(await main(['help'], cliIo), 0);
    assert.match(out.stdout, /^ {2}outbox {6}list, show, retry or drop callback deliveries of a store$/m);
    assert.match(out.stdout, /^ {2}operations {2}list the long-running \(202\) operations/m);
    const outbox = io();
    assert.equal(await main(['outbox', '--help'], outbox.io), 0);
    assert.match(outbox.out.stdout, /^Usage: embedded-marketplace outbox <list\|show\|retry\|drop>/);
    const wrong = io();
    assert.equal(await main(['operations', 'purge', '--store', 'memory'], wrong.io), 2);
    assert.match(wrong.out.stderr, /Run "embedded-marketplace operations --help" for usage/);
  });
});
