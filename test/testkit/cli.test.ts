import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

/** Runs a command in this process through the bin's own entry (fast; same exit codes). */
async function cli(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (t: string) => (stdout += t) }, stderr: { write: (t: string) => (stderr += t) }, env, cwd };
  const code = await main(args, io);
  return { code, stdout, stderr };
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
        assert.equal((out.stdout.match(/^PASS {2}/gm) ?? []).length, 32);
        assert.match(out.stdout, /32 cases: 32 passed, 0 failed, 0 skipped in [\d.]+ s\nAll green/);
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
      const first = await cli(['migrate', '--schema', schema], tmpdir(), { DATABASE_URL: DATABASE_URL! });
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, new RegExp(`Schema ${schema} at version \\d+: applied 1, 2`));
      const second = await cli(['migrate', '--schema', schema], tmpdir(), { DATABASE_URL: DATABASE_URL! });
      assert.equal(second.code, 0);
      assert.match(second.stdout, /already up to date/);
    });
  });
});
