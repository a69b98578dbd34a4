import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createProviderApp, type ProviderApp } from '../../examples/provider-app.js';
import { readMasterKey, toMasterKeyFile, writeMasterKey, type MasterKey } from '../../src/testkit/masterkey.js';
import type { AcceptanceReport } from '../../src/testkit/acceptance/index.js';
import { main } from '../../src/testkit/cli/main.js';
import pg from 'pg';
import { listen, type Running } from '../helpers/http.js';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';
import { waitFor } from '../helpers/processes.js';
import { FakeClock } from './helpers/clock.js';
import { freePort } from './helpers/harness.js';
import { createToyProvider } from './helpers/toy-provider.js';

const CLI = fileURLToPath(new URL('../../src/testkit/cli.ts', import.meta.url));
const TSX = import.meta.resolve('tsx');
const CLIENT = { id: 'cli-client', secret: 'cli-client-secret-8c1e' };

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command in this process through the bin's own entry (fast; same exit codes); `clock` is what `--wait` counts on. */
async function cli(args: string[], cwd: string, env: Record<string, string> = {}, clock?: FakeClock): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env, cwd, ...(clock === undefined ? {} : { clock }) };
  const code = await main(args, io);
  return { code, stdout, stderr };
}

/** A command running in this process, watched while it runs: `seen` resolves once its output matches. */
function cliLive(args: string[], cwd: string, env: Record<string, string> = {}, signal?: AbortSignal, clock?: FakeClock) {
  let stdout = '';
  let stderr = '';
  const watchers = new Set<{ pattern: RegExp; resolve: () => void }>();
  const check = () => {
    for (const w of watchers) {
      if (w.pattern.test(stdout)) {
        watchers.delete(w);
        w.resolve();
      }
    }
  };
  const io = {
    stdout: { write: (t: string) => ((stdout += t), check()) },
    stderr: { write: (t: string) => (stderr += t) },
    env,
    cwd,
    ...(clock === undefined ? {} : { clock }),
  };
  const done = main(args, io, signal).then((code): Outcome => ({ code, stdout, stderr }));
  return {
    done,
    output: () => stdout,
    /** Resolves when stdout matches; rejects if the command ends first. */
    seen(pattern: RegExp): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        watchers.add({ pattern, resolve });
        check();
        done.then((o) => reject(new Error(`the command ended (${o.code}) before printing ${pattern}:\n${o.stdout}${o.stderr}`)), reject);
      });
    },
  };
}

/** An app that listens on a port chosen beforehand, once told to. */
async function listenOn(app: Pick<ProviderApp['app'], 'listen'>, port: number): Promise<{ close(): Promise<void> }> {
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
  return {
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Runs the real bin through tsx, asynchronously: the providers it talks to live in this process. */
function spawnCli(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', TSX, CLI, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const TEST_FLAGS = ['--product', 'bonnets', '--plan', 'small', '--new-plan', 'large', '--region', 'aws::us-east-1', '--conflict-region', 'all::global', '--client-id', CLIENT.id, '--client-secret', CLIENT.secret];

describe('embedded-marketplace CLI', () => {
  let dir: string;
  let key: MasterKey;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'em-cli-'));
    key = writeMasterKey(join(dir, 'masterkey.json'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('keygen', () => {
    it('writes masterkey.json in the Go layout, private to its owner, and never replaces it without --force', async () => {
      const home = mkdtempSync(join(tmpdir(), 'em-keygen-'));
      try {
        const first = await spawnCli(['keygen'], home);
        assert.equal(first.code, 0, first.stderr);
        const file = join(home, 'masterkey.json');
        const json = JSON.parse(readFileSync(file, 'utf8')) as { public_key: string; private_key: string };
        assert.deepEqual(Object.keys(json).sort(), ['private_key', 'public_key']);
        assert.match(json.public_key, /^[A-Za-z0-9+/]{43}=$/, 'standard base64 of 32 bytes');
        assert.match(json.private_key, /^[A-Za-z0-9+/]{86}==$/, 'standard base64 of the 64-byte private key');
        assert.equal(statSync(file).mode & 0o077, 0, 'not readable by group or others');
        assert.ok(first.stdout.includes(json.public_key), 'prints the public key for MASTER_PUBLIC_KEY');
        assert.equal(first.stdout.includes(json.private_key), false, 'never prints the private key');

        const again = await cli(['keygen'], home);
        assert.equal(again.code, 1);
        assert.match(again.stderr, /already exists.*--force/);
        assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), json, 'the existing key is untouched');

        const forced = await cli(['keygen', '--force'], home);
        assert.equal(forced.code, 0, forced.stderr);
        assert.notEqual((JSON.parse(readFileSync(file, 'utf8')) as { public_key: string }).public_key, json.public_key);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    });
  });

  describe('curl', () => {
    let provider: ProviderApp;
    let target: Running;
    before(async () => {
      provider = await createProviderApp({ STORE: 'memory', MASTER_PUBLIC_KEY: key.publicKey, LOG_LEVEL: 'silent' });
      target = await listen(provider.app);
    });
    after(async () => {
      await target.close();
      await provider.close();
    });

    /** Lets sh parse the printed command (quoting included) and replays its arguments with fetch. */
    async function replay(command: string): Promise<{ status: number; body: string; argv: string[] }> {
      const parsed = await new Promise<string>((resolve, reject) => {
        const sh = spawn('sh', ['-c', `curl() { printf '%s\\0' "$@"; }\n${command}`], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        sh.stdout.on('data', (c: Buffer) => (out += c.toString()));
        sh.once('error', reject);
        sh.once('close', () => resolve(out));
      });
      const argv = parsed.split('\0').slice(0, -1);
      const headers: Record<string, string> = {};
      let method = 'GET';
      let body: string | undefined;
      let url = '';
      for (let i = 0; i < argv.length; i++) {
        const arg = argv[i] ?? '';
        if (arg === '-H') {
          const header = argv[++i] ?? '';
          headers[header.slice(0, header.indexOf(':'))] = header.slice(header.indexOf(':') + 1).trim();
        } else if (arg === '-X') method = argv[++i] ?? '';
        else if (arg === '--data-binary') body = argv[++i];
        else if (arg.startsWith('http')) url = arg;
      }
      const answer = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
      return { status: answer.status, body: await answer.text(), argv };
    }

    it('prints a ready-to-run curl command whose signature the provider accepts', async () => {
      const id = 'r0000000000000000000000000cli';
      const data = JSON.stringify({ id, product: 'bonnets', plan: 'small', region: 'all::global', features: { note: "it's" } });
      const out = await cli(['curl', 'PUT', `${target.url}/v1/resources/${id}`, '--data', data, '--header', 'X-Callback-ID: abc123'], dir);
      assert.equal(out.code, 0, out.stderr);
      const lines = out.stdout.trimEnd().split(' \\\n  ');
      assert.equal(lines[0], `curl -sS -i -X PUT ${target.url}/v1/resources/${id}`);
      assert.deepEqual(lines.slice(1, -1).map((l) => /^-H '?([a-z-]+):/.exec(l)?.[1]), ['host', 'date', 'content-type', 'x-callback-id', 'x-signed-headers', 'x-signature']);
      assert.match(lines.at(-1) ?? '', /^--data-binary '/);
      assert.match(out.stderr, /valid for 5 minutes/);

      const first = await replay(out.stdout);
      assert.equal(first.status, 201, first.body);
      assert.ok(first.argv.includes(data), 'the body survives shell quoting byte for byte');

      const del = await cli(['curl', 'DELETE', `${target.url}/v1/resources/${id}`], dir);
      assert.equal((await replay(del.stdout)).status, 204);
    });

    it('reads master keys in base64url (32-byte seed) as well as standard base64', async () => {
      const other = mkdtempSync(join(tmpdir(), 'em-key-'));
      try {
        writeFileSync(join(other, 'url.json'), JSON.stringify({ public_key: key.publicKey, private_key: key.privateKey }));
        writeFileSync(join(other, 'std.json'), JSON.stringify(toMasterKeyFile(key)));
        for (const file of ['url.json', 'std.json']) {
          const out = await cli(['curl', 'DELETE', `${target.url}/v1/resources/r0000000000000000000000000404`, '--master-key', file], other);
          assert.equal(out.code, 0, out.stderr);
          assert.equal((await replay(out.stdout)).status, 404, `${file}: signature accepted, resource unknown`);
        }
      } finally {
        rmSync(other, { recursive: true, force: true });
      }
    });

    it('refuses bad input with exit status 2', async () => {
      for (const args of [['curl', 'PUT'], ['curl', 'PUT', 'not-a-url'], ['curl', 'PUT', `${target.url}/v1/x`, '--data', '{oops'], ['curl', 'P T', `${target.url}/v1/x`]]) {
        const out = await cli(args, dir);
        assert.equal(out.code, 2, `${args.join(' ')}: ${out.stderr}`);
        assert.match(out.stderr, /embedded-marketplace curl: .+\nRun "embedded-marketplace curl --help"/);
      }
      const missing = await cli(['curl', 'GET', `${target.url}/v1/x`], tmpdir());
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /masterkey\.json not found: create one with `embedded-marketplace keygen`/);
    });
  });

  describe('test', () => {
    it('exits 0 against the example provider, with a pass line per case and a JSON report', async () => {
      const connectorPort = await freePort();
      const provider = await createProviderApp({ STORE: 'memory', MASTER_PUBLIC_KEY: toMasterKeyFile(key).public_key, CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`, CONNECTOR_CLIENT_ID: CLIENT.id, CONNECTOR_CLIENT_SECRET: CLIENT.secret, LOG_LEVEL: 'silent' });
      const target = await listen(provider.app);
      try {
        const out = await spawnCli(['test', ...TEST_FLAGS, '--connector-port', String(connectorPort), '--json', 'report.json', target.url], dir);
        assert.equal(out.code, 0, out.stdout + out.stderr);
        assert.match(out.stdout, /^Marketplace acceptance run\n {2}Provider {4}http:\/\/127\.0\.0\.1:\d+\n/);
        assert.equal((out.stdout.match(/^PASS {2}/gm) ?? []).length, 31);
        // One product in the example's catalog: the product conflict cannot be made, and says so.
        assert.match(out.stdout, /^NOT CHECKED {2}the same id with another product conflicts \(provision\.conflict-product\)$/m);
        assert.match(out.stdout, /32 cases: 31 passed, 0 failed, 0 skipped, 1 not checked in [\d.]+ s\nNo failure: .*\nNot checked \(see why above\): provision\.conflict-product\n$/);
        assert.equal(out.stdout.includes('\u001b['), false, 'no colors off a TTY');
        assert.equal(out.stdout.includes(CLIENT.secret), false, 'the client secret is never printed');
        const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as AcceptanceReport;
        assert.equal(report.passed, true);
        assert.equal(report.cases.length, 32);
        assert.deepEqual(Object.keys(report.cases[0] ?? {}).sort(), ['durationMs', 'expected', 'feature', 'id', 'name', 'passed', 'request', 'response', 'status']);
      } finally {
        await target.close();
        await provider.close();
      }
    });

    it('exits 1 against a provider that skips the signature check, saying what failed and why; --json - keeps stdout for the report', async () => {
      const connectorPort = await freePort();
      const app = createToyProvider({ masterKey: key.publicKey, connectorUrl: `http://127.0.0.1:${connectorPort}`, clientId: CLIENT.id, clientSecret: CLIENT.secret, bugs: { skipSignature: true } });
      const target = await listen(app);
      try {
        const flags = ['--product', 'widgets', '--plan', 'basic', '--new-plan', 'premium', '--region', 'aws::us-east-1', '--client-id', CLIENT.id, '--client-secret', CLIENT.secret, '--connector-port', String(connectorPort)];
        const out = await spawnCli(['test', ...flags, '--json', '-', target.url], dir);
        assert.equal(out.code, 1, out.stderr);
        const report = JSON.parse(out.stdout) as AcceptanceReport;
        assert.equal(report.passed, false);
        assert.deepEqual(report.cases.filter((c) => !c.passed).map((c) => c.id).sort(), ['signature.bad', 'signature.future-date', 'signature.missing', 'signature.stale-date', 'signature.tampered']);
        assert.match(out.stderr, /FAIL {2}an unsigned request is refused \(signature\.missing\)\n {6}request {3}PUT http:\/\/127\.0\.0\.1:\d+\/v1\/resources\/\w+ \{.*\n {6}headers {3}.*host: 127\.0\.0\.1.*\n {6}answer {4}201 \{"message":"Widget ready"\}\n {6}expected {2}401 with a JSON \{"message"\}.*\n {6}why {7}answered 201; expected 401/);
        assert.match(out.stderr, /Failed: signature\.missing, signature\.bad, signature\.stale-date, signature\.future-date, signature\.tampered/);
      } finally {
        await target.close();
      }
    });

    it('exits 2 for usage and setup errors', async () => {
      const cases: [string[], string, RegExp][] = [
        [['test', 'http://127.0.0.1:9'], dir, /--product and --plan are required/],
        [['test', ...TEST_FLAGS, '--exclude', 'billing'], dir, /--exclude billing: unknown feature; use one of provision, credentials/],
        [['test', ...TEST_FLAGS, '--connector-port', 'x'], dir, /--connector-port must be a port number/],
        [['test', '--product', 'p1', '--plan', 'p2', 'http://127.0.0.1:9'], dir, /newPlan" \(--new-plan\) is required/],
        [['test', ...TEST_FLAGS, '--bogus'], dir, /Unknown option '--bogus'/],
        [['test', ...TEST_FLAGS, '--wait', 'soon'], dir, /--wait takes a number of seconds \(more than 0, at most 86400\), got "soon"/],
        [['test', ...TEST_FLAGS, '--wait', '0'], dir, /--wait takes a number of seconds/],
        [['test', ...TEST_FLAGS, '--require', 'billing'], dir, /--require billing: only an optional feature can be required \(sso\)/],
        [['test', ...TEST_FLAGS, '--require', 'sso', '--exclude', 'sso'], dir, /--require sso and --exclude sso contradict each other/],
        [['test', '--product', 'bonnets', '--plan', 'small', '--new-plan', 'large', 'http://127.0.0.1:9'], dir, /"clientId" and "clientSecret" \(--client-id, --client-secret, or \$CONNECTOR_CLIENT_ID and \$CONNECTOR_CLIENT_SECRET for the CLI\) are required: .*single sign-on \(the sso feature: the code exchange\) and for the callbacks of long-running operations \(a 202 answer to provisioning, credentials, a plan change or deprovisioning.*--exclude sso/],
        [['serve', '--product', 'bonnets', '--plan', 'small'], dir, /--client-id and --client-secret \(or \$CONNECTOR_CLIENT_ID and \$CONNECTOR_CLIENT_SECRET\) are required: the provider's connector client; the fake connector checks it for single sign-on .* and for the callbacks of long-running operations/],
        [['test', ...TEST_FLAGS], tmpdir(), /masterkey\.json not found/],
        [['frobnicate'], dir, /unknown command "frobnicate"/],
      ];
      for (const [args, cwd, message] of cases) {
        const out = await cli(args, cwd);
        assert.equal(out.code, 2, `${args.join(' ')}\n${out.stdout}${out.stderr}`);
        assert.match(out.stderr, message);
      }
      const spawned = await spawnCli(['test', '--product', 'p1', 'http://127.0.0.1:9'], dir);
      assert.equal(spawned.code, 2, 'the bin exits 2 on a usage error');
      assert.match(spawned.stderr, /--product and --plan are required/);
      const help = await cli(['test', '--help'], dir);
      assert.equal(help.code, 0);
      assert.match(help.stdout, /--exclude FEATURE/);
    });
  });

  describe('serve', () => {
    it('serves the simulator page on loopback and stops cleanly on SIGTERM', async () => {
      const child = spawn(process.execPath, ['--import', TSX, CLI, 'serve', '--port', '0', '--connector-port', '0', '--product', 'bonnets', '--plan', 'small', '--new-plan', 'large', 'http://127.0.0.1:9'], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', CONNECTOR_CLIENT_ID: CLIENT.id, CONNECTOR_CLIENT_SECRET: CLIENT.secret },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          const match = /Marketplace simulator: (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
          if (match?.[1] !== undefined) resolve(match[1]);
        });
        child.once('close', (code) => reject(new Error(`serve exited early (${code})`)));
      });
      const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
      try {
        const page = await fetch(url);
        assert.equal(page.status, 200);
        assert.match(await page.text(), /<title>Marketplace simulator<\/title>/);
        assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'nonce-/);
        const state = (await (await fetch(`${url}/api/state`)).json()) as { provider: string; plans: string[]; resource: unknown };
        assert.deepEqual({ provider: state.provider, plans: state.plans, resource: state.resource }, { provider: 'http://127.0.0.1:9', plans: ['small', 'large'], resource: null });
        assert.match(stdout, /start the provider with CONNECTOR_URL=http:\/\/127\.0\.0\.1:\d+/);
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await closed, 0);
    });
  });

  describe('test, again and again, against one running provider', () => {
    it('is green three runs in a row against a provider that answers 202 and keeps its connector token, and leaves its outbox empty', async () => {
      const connectorPort = await freePort();
      const provider = await createProviderApp({
        STORE: 'memory', MASTER_PUBLIC_KEY: key.publicKey, CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`,
        CONNECTOR_CLIENT_ID: CLIENT.id, CONNECTOR_CLIENT_SECRET: CLIENT.secret, EXAMPLE_ASYNC: '1', EXAMPLE_ASYNC_DELAY_MS: '20', LOG_LEVEL: 'silent',
      });
      const target = await listen(provider.app);
      try {
        for (const attempt of [1, 2, 3]) {
          const out = await cli(['test', ...TEST_FLAGS, '--connector-port', String(connectorPort), '--callback-timeout', '30s', '--json', `rerun-${attempt}.json`, target.url], dir);
          assert.equal(out.code, 0, `run ${attempt}:\n${out.stdout}${out.stderr}`);
          assert.match(out.stdout, /32 cases: 31 passed, 0 failed, 0 skipped, 1 not checked/);
          assert.doesNotMatch(out.stdout, /callback was refused/, `run ${attempt}: no callback was refused`);
          const report = JSON.parse(readFileSync(join(dir, `rerun-${attempt}.json`), 'utf8')) as AcceptanceReport;
          assert.deepEqual(report.callbacks.unacknowledged, []);
          assert.ok(report.callbacks.expected >= 8);
          await waitFor('an empty outbox', async () => (await provider.marketplace.store.listDeliveries!()).length === 0);
        }
      } finally {
        await target.close();
        await provider.close();
      }
    });
  });

  describe('a provider without single sign-on', () => {
    it('exits 0 with the SSO cases skipped, and 1 with --require sso', async () => {
      const provider = await createProviderApp({ STORE: 'memory', MASTER_PUBLIC_KEY: key.publicKey, LOG_LEVEL: 'silent' });
      const target = await listen(provider.app);
      try {
        const out = await cli(['test', ...TEST_FLAGS, '--connector-port', '0', target.url], dir);
        assert.equal(out.code, 0, out.stdout + out.stderr);
        assert.match(out.stdout, /^SKIP {2}signs in through the connector \(sso\.sign-in\)\n {6}skipped: GET \/v1\/sso answered 404 "Single sign-on is not configured on this provider/m);
        assert.equal((out.stdout.match(/^SKIP {2}/gm) ?? []).length, 3);
        assert.match(out.stdout, /32 cases: 28 passed, 0 failed, 3 skipped, 1 not checked in [\d.]+ s\n/);
        assert.match(out.stdout, /\nSkipped: sso\.sign-in, sso\.tampered, sso\.reused-code\n$/);
        const required = await cli(['test', ...TEST_FLAGS, '--connector-port', '0', '--require', 'sso', target.url], dir);
        assert.equal(required.code, 1, required.stdout);
        assert.match(required.stdout, /^FAIL {2}signs in through the connector \(sso\.sign-in\)$/m);
        assert.match(required.stdout, /Failed: sso\.sign-in, sso\.tampered, sso\.reused-code/);
      } finally {
        await target.close();
        await provider.close();
      }
    });
  });

  describe('--wait', () => {
    it('test waits for a provider that starts listening after it started, then runs', async () => {
      const [port, connectorPort] = [await freePort(), await freePort()];
      const provider = await createProviderApp({ STORE: 'memory', MASTER_PUBLIC_KEY: key.publicKey, CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`, CONNECTOR_CLIENT_ID: CLIENT.id, CONNECTOR_CLIENT_SECRET: CLIENT.secret, LOG_LEVEL: 'silent' });
      const url = `http://127.0.0.1:${port}`;
      // The wait's time moves only when the test says: the next attempt comes once the provider listens.
      const clock = new FakeClock();
      const run = cliLive(['test', ...TEST_FLAGS, '--connector-port', String(connectorPort), '--wait', '120', url], dir, {}, undefined, clock);
      let server: { close(): Promise<void> } | undefined;
      try {
        // Printed after the first attempt was refused: the provider is not up yet, and nothing ran.
        await run.seen(/Waiting up to 120 s for the provider at http:\/\/127\.0\.0\.1:\d+ to answer \(connection refused\)…\n/);
        assert.doesNotMatch(run.output(), /Marketplace acceptance run/);
        server = await listenOn(provider.app, port);
        await clock.wake();
        const out = await run.done;
        assert.equal(out.code, 0, out.stdout + out.stderr);
        assert.match(out.stdout, /^Waiting up to 120 s for the provider at http:\/\/127\.0\.0\.1:\d+ to answer \(connection refused\)…\nMarketplace acceptance run\n/);
        assert.match(out.stdout, /32 cases: 31 passed, 0 failed/);
      } finally {
        await run.done.catch(() => undefined);
        await server?.close();
        await provider.close();
      }
    });

    it('test gives up after the deadline with exit status 2, naming the URL and the seconds', async () => {
      const url = `http://127.0.0.1:${await freePort()}`;
      // Time moves only through the pauses, so every attempt gets its refusal, the last one at 0.4 s too.
      const clock = new FakeClock({ auto: true });
      const out = await cli(['test', ...TEST_FLAGS, '--wait', '0.4', url], dir, {}, clock);
      assert.equal(out.code, 2, out.stdout + out.stderr);
      assert.deepEqual(clock.sleeps, [100, 200, 100], 'attempts at 0, 0.1, 0.3 and 0.4 s');
      assert.equal(out.stderr, `embedded-marketplace test: the provider at ${url} did not answer within 0.4 s (--wait 0.4); last attempt: connection refused. Is it running, and listening on that address?\n`);
      assert.doesNotMatch(out.stdout, /Marketplace acceptance run/, 'no case ran');
    });

    it('serve waits for the provider before it opens its page', async () => {
      const port = await freePort();
      const provider = await createProviderApp({ STORE: 'memory', MASTER_PUBLIC_KEY: key.publicKey, LOG_LEVEL: 'silent' });
      const stop = new AbortController();
      const url = `http://127.0.0.1:${port}`;
      const clock = new FakeClock();
      const serve = cliLive(['serve', '--port', '0', '--connector-port', '0', '--product', 'bonnets', '--plan', 'small', '--wait', '120', url], dir, { CONNECTOR_CLIENT_ID: CLIENT.id, CONNECTOR_CLIENT_SECRET: CLIENT.secret }, stop.signal, clock);
      let server: { close(): Promise<void> } | undefined;
      try {
        await serve.seen(/Waiting up to 120 s for the provider at http:\/\/127\.0\.0\.1:\d+ to answer \(connection refused\)…\n/);
        assert.doesNotMatch(serve.output(), /Marketplace simulator/);
        server = await listenOn(provider.app, port);
        await clock.wake();
        await serve.seen(/Marketplace simulator: http:\/\/127\.0\.0\.1:\d+\n/);
        const page = /Marketplace simulator: (http:\/\/127\.0\.0\.1:\d+)/.exec(serve.output())?.[1] ?? '';
        assert.equal((await fetch(page)).status, 200);
      } finally {
        stop.abort();
        assert.equal((await serve.done).code, 0);
        await server?.close();
        await provider.close();
      }
    });

    it('serve gives up after the deadline with exit status 2', async () => {
      const url = `http://127.0.0.1:${await freePort()}`;
      const clock = new FakeClock({ auto: true });
      const out = await cli(['serve', '--port', '0', '--connector-port', '0', '--product', 'bonnets', '--plan', 'small', '--wait', '0.3', url], dir, { CONNECTOR_CLIENT_ID: CLIENT.id, CONNECTOR_CLIENT_SECRET: CLIENT.secret }, clock);
      assert.equal(out.code, 2);
      assert.match(out.stderr, new RegExp(`^embedded-marketplace serve: the provider at ${url.replace(/\./g, '\\.')} did not answer within 0\\.3 s`));
      assert.doesNotMatch(out.stdout, /Marketplace simulator/);
    });
  });

  it('keeps masterkey.json readable by the library too', () => {
    assert.deepEqual(readMasterKey(join(dir, 'masterkey.json')), key);
  });
});

describe('cli migrate', () => {
  it('asks for a database URL', async () => {
    const out = await cli(['migrate'], tmpdir());
    assert.equal(out.code, 2);
    assert.match(out.stderr, /--database-url or set DATABASE_URL/);
  });

  it('says why it failed when the server cannot be reached, without the password', async () => {
    const out = await cli(['migrate', '--database-url', 'postgres://user:hunter2-secret@127.0.0.1:1/none'], tmpdir());
    assert.equal(out.code, 1);
    assert.match(out.stderr, /ECONNREFUSED/);
    assert.equal(out.stderr.includes('hunter2-secret'), false);
  });

  describe('against PostgreSQL', async () => {
    const skip = await postgresSkipReason();
    const schema = `cli_migrate_${process.pid}_${Date.now().toString(36)}`;
    after(async () => {
      if (skip !== false) return;
      const pool = new pg.Pool({ connectionString: DATABASE_URL });
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    });

    it('applies the migrations once, then reports the schema up to date', { skip }, async () => {
      const first = await cli(['migrate', '--schema', schema], tmpdir(), { DATABASE_URL: DATABASE_URL });
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, new RegExp(`Schema ${schema} at version \\d+: applied 1, 2`));
      const second = await cli(['migrate', '--schema', schema], tmpdir(), { DATABASE_URL: DATABASE_URL });
      assert.equal(second.code, 0);
      assert.match(second.stdout, /already up to date/);
    });
  });
});
