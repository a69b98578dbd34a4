import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NPM_ENV, packTarball } from '../helpers/pack.js';
import type { TestContext } from 'node:test';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { runAcceptance } from '../../src/testkit/acceptance/index.js';
import { explain, failedIds, freePort } from '../testkit/helpers/harness.js';

// The package as users get it: `npm pack` (whose `prepack` builds dist/), the tarball installed in a
// scratch project as a user installs it (scripts allowed, npm's warnings shown), and a small ESM program there that imports every entry point and serves one
// signed provisioning request. The install is offline first: this machine's npm cache already holds
// every runtime dependency. The optional peers (better-sqlite3, pg) are deliberately not installed.

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
type ExportTarget = string | { [condition: string]: ExportTarget };
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string; files: string[]; exports: Record<string, ExportTarget>; bin: Record<string, string> };
const leaves = (target: ExportTarget): string[] => (typeof target === 'string' ? [target] : Object.values(target).flatMap(leaves));

let work: string;
let tarball: string;
let packed: string[];

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'em-pack-'));
  ({ tarball, files: packed } = await packTarball(work));
});
after(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships dist, the migrations and the docs, and nothing from the working tree', (t) => {
    t.diagnostic(`packaging: ${packed.length} files in ${tarball.slice(work.length + 1)}`);
    const intended = (path: string) =>
      path.startsWith('dist/') || path.startsWith('src/store/migrations/') || path.startsWith('docs/')
      || ['package.json', 'README.md', 'CHANGELOG.md', 'SECURITY.md', 'LICENSE'].includes(path);
    assert.deepEqual(packed.filter((path) => !intended(path)), [], 'files outside package.json "files"');
    for (const banned of [/^test\//, /^\.ci\//, /^bench\//, /^examples\//, /^scripts\//, /^\.tmp\//, /(^|\/)node_modules\//, /\.test\.[jt]s$/, /\.db(-wal|-shm)?$/, /masterkey\.json$/, /^\.env/]) {
      assert.deepEqual(packed.filter((path) => banned.test(path)), [], `${banned} must not be packed`);
    }
    // TypeScript sources ship only where "files" asks for them (the schema migrations).
    assert.deepEqual(packed.filter((path) => path.startsWith('src/') && !path.startsWith('src/store/migrations/')), []);
    assert.ok(packed.includes('SECURITY.md'), 'the threat model ships with the package');
  });

  it('holds a file for every exports target and the bin', () => {
    const targets = Object.values(pkg.exports).flatMap(leaves);
    for (const target of [...targets, ...Object.values(pkg.bin)]) {
      const path = target.replace(/^\.\//, '');
      if (path === 'package.json') continue;
      assert.ok(packed.includes(path), `${target} is missing from the tarball`);
    }
  });
});

describe('the packed tarball in a scratch project', () => {
  let scratch: string;
  let installOutput: string;
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'em-scratch-'));
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'em-scratch', version: '1.0.0', private: true, type: 'module' }));
    // As a user installs it: scripts allowed and npm's warnings shown (NPM_ENV keeps only errors).
    const install = (mode: string) => run('npm', ['install', tarball, mode, '--no-audit', '--no-fund', '--no-package-lock'], { cwd: scratch, env: { ...NPM_ENV, npm_config_loglevel: 'warn' }, timeout: 120_000 });
    let result: { stdout: string; stderr: string };
    try {
      result = await install('--offline');
    } catch {
      // A dependency missing from the cache: fetch it when the registry is reachable.
      result = await install('--prefer-offline');
    }
    installOutput = `${result.stdout}\n${result.stderr}`;
  });
  after(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('installs without any npm warning about install scripts: the tarball has none (its build is prepack)', async () => {
    assert.doesNotMatch(installOutput, /install.scripts|allowScripts|prepare/i, installOutput);
    const { stdout } = await run('tar', ['-xOzf', tarball, 'package/package.json'], { timeout: 30_000 });
    const scripts = (JSON.parse(stdout) as { scripts?: Record<string, string> }).scripts ?? {};
    // npm runs (or, since npm 11, warns about) these when the package is installed; `prepare` also
    // for a tarball or git dependency. The build belongs to whoever packs, not to every install.
    assert.deepEqual(Object.keys(scripts).filter((name) => /^(pre|post)?install$|^prepare$/.test(name)), []);
    assert.equal(scripts.prepack, 'npm run build', 'npm pack and npm publish build dist/');
  });

  it('installs without the optional peers and runs a signed provisioning against the package', async (t) => {
    writeFileSync(join(scratch, 'check.mjs'), SCRATCH_PROGRAM);
    const { stdout } = await run(process.execPath, ['check.mjs'], { cwd: scratch, timeout: 60_000 });
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;
    t.diagnostic(`packaging: scratch project answered ${JSON.stringify(result)}`);
    assert.deepEqual(result, {
      provisioned: 201,
      repeated: 201,
      tampered: 401,
      tamperedMessage: 'Request signature does not match the request',
      sameErrorClass: true,
      drivers: [],
      sqliteWithoutDriver: true,
      postgresWithoutDriver: true,
    });
  });

  it('loads the Fastify entry without Fastify, and serves a signed provisioning through marketplacePlugin once Fastify is installed', async () => {
    writeFileSync(join(scratch, 'fastify-absent.mjs'), FASTIFY_ABSENT);
    const absent = await run(process.execPath, ['fastify-absent.mjs'], { cwd: scratch, timeout: 60_000 });
    assert.deepEqual(JSON.parse(absent.stdout.trim().split('\n').pop()!), { plugin: 'function', fastifyInstalled: false });
    // Fastify 5 as this repository installed it, linked in (its dependencies resolve from its real path).
    symlinkSync(join(root, 'node_modules', 'fastify'), join(scratch, 'node_modules', 'fastify'), 'dir');
    writeFileSync(join(scratch, 'fastify.mjs'), FASTIFY_PROGRAM);
    const { stdout } = await run(process.execPath, ['fastify.mjs'], { cwd: scratch, timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()!), {
      provisioned: [201, 'Your small bonnet is ready'],
      routes: ['/v1/resources/:id'],
      pending: 'function',
      required: 'function',
    });
  });

  it('loads neither better-sqlite3 nor pg with the main entry, even when both are installed', async () => {
    // The drivers this repository installed, linked in (their dependencies resolve from their real path).
    for (const driver of ['better-sqlite3', 'pg']) symlinkSync(join(root, 'node_modules', driver), join(scratch, 'node_modules', driver), 'dir');
    writeFileSync(join(scratch, 'drivers.mjs'), DRIVER_PROBE);
    const { stdout } = await run(process.execPath, ['drivers.mjs'], { cwd: scratch, timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()!), { withEveryEntry: [], afterSqliteStore: ['better-sqlite3'] });
  });
});

/** The Fastify entry without Fastify installed: it loads (Fastify is an optional peer), Fastify does not. */
const FASTIFY_ABSENT = `
const { marketplacePlugin } = await import('embedded-marketplace/fastify');
const fastifyInstalled = await import('fastify').then(() => true, () => false);
console.log(JSON.stringify({ plugin: typeof marketplacePlugin, fastifyInstalled }));
`;

/** The Fastify entry with Fastify 5 linked in: a signed provisioning through marketplacePlugin, and require() of the entry. */
const FASTIFY_PROGRAM = `
import { createRequire } from 'node:module';
import Fastify from 'fastify';
import { marketplacePlugin } from 'embedded-marketplace/fastify';
import { memoryStore } from 'embedded-marketplace';
import { createSigner, generateKeyPair } from 'embedded-marketplace/testkit';

const master = generateKeyPair();
const signer = createSigner({ masterPrivateKey: master.privateKey });
const app = Fastify();
app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, _body, done) => done(null, { parsedBy: 'the app' }));
const routes = [];
app.addHook('onResponse', async (request) => { routes.push(request.routeOptions.url); });
await app.register(marketplacePlugin, {
  store: memoryStore(),
  masterKey: master.publicKey,
  logger: false,
  handlers: {
    provision: ({ plan }) => 'Your ' + plan + ' bonnet is ready',
    changePlan: () => undefined,
    deprovision: () => undefined,
    provisionCredentials: () => ({ credentials: { BONNETS_URL: 'https://example.invalid' } }),
    deprovisionCredentials: () => undefined,
  },
});
await app.listen({ port: 0, host: '127.0.0.1' });
const host = '127.0.0.1:' + app.server.address().port;
const id = '2packagedfastify0000000000001';
const body = JSON.stringify({ id, product: 'bonnets', plan: 'small', region: 'all::global' });
const headers = signer.sign({ method: 'PUT', url: '/v1/resources/' + id, host, headers: { 'content-type': 'application/json' }, body });
const answer = await fetch('http://' + host + '/v1/resources/' + id, { method: 'PUT', headers, body });
const provisioned = [answer.status, (await answer.json()).message];
const pending = typeof app.marketplace.complete;
await app.close();
const required = typeof createRequire(import.meta.url)('embedded-marketplace/fastify').marketplacePlugin;
console.log(JSON.stringify({ provisioned, routes, pending, required }));
`;

/** Imports every entry point, then creates a SQLite store: only that may load a driver. */
const DRIVER_PROBE = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const drivers = () => [...new Set(Object.keys(require.cache).map((p) => /node_modules\\/(better-sqlite3|pg)\\//.exec(p)?.[1]).filter(Boolean))];
await import('embedded-marketplace');
await import('embedded-marketplace/errors');
await import('embedded-marketplace/stores');
await import('embedded-marketplace/platform');
await import('embedded-marketplace/testkit');
await import('embedded-marketplace/fastify');
const { sqliteStore } = await import('embedded-marketplace/stores/sqlite');
await import('embedded-marketplace/stores/postgres');
const withEveryEntry = drivers();
const store = sqliteStore({ path: ':memory:', encryptionKey: Buffer.alloc(32, 7).toString('base64'), logger: false });
const afterSqliteStore = drivers();
await store.close();
console.log(JSON.stringify({ withEveryEntry, afterSqliteStore }));
`;

/** The scratch project's program: plain ESM against the installed package, as a user writes it. */
const SCRATCH_PROGRAM = `
import { once } from 'node:events';
import { createRequire } from 'node:module';
import express from 'express';
import { marketplaceRouter, memoryStore, MarketplaceError } from 'embedded-marketplace';
import { BadRequestError, MarketplaceError as ErrorsMarketplaceError } from 'embedded-marketplace/errors';
import { createSigner, generateKeyPair } from 'embedded-marketplace/testkit';
import { platformRouter } from 'embedded-marketplace/platform';
import { sqliteStore } from 'embedded-marketplace/stores/sqlite';
import { postgresStore } from 'embedded-marketplace/stores/postgres';
import { memoryStore as storesMemoryStore, MissingEncryptionKeyError } from 'embedded-marketplace/stores';
import { MissingEncryptionKeyError as SqliteMissingKey } from 'embedded-marketplace/stores/sqlite';

const require = createRequire(import.meta.url);
const drivers = Object.keys(require.cache).filter((p) => /node_modules\\/(better-sqlite3|pg)\\//.test(p));
if (typeof platformRouter !== 'function' || typeof BadRequestError !== 'function') throw new Error('missing exports');
if (storesMemoryStore !== memoryStore || MissingEncryptionKeyError !== SqliteMissingKey) throw new Error('embedded-marketplace/stores holds other copies');

const master = generateKeyPair();
const signer = createSigner({ masterPrivateKey: master.privateKey });
const router = marketplaceRouter({
  store: memoryStore(),
  masterKey: master.publicKey,
  logger: false,
  handlers: {
    provision: ({ plan }) => 'Your ' + plan + ' bonnet is ready',
    changePlan: () => undefined,
    deprovision: () => undefined,
    provisionCredentials: () => ({ credentials: { BONNETS_URL: 'https://example.invalid' } }),
    deprovisionCredentials: () => undefined,
  },
});
const app = express();
app.use(router);
const server = app.listen(0, '127.0.0.1');
await once(server, 'listening');
const host = '127.0.0.1:' + server.address().port;
const id = '2packagedresource000000000001';
const body = JSON.stringify({ id, product: 'bonnets', plan: 'small', region: 'all::global' });
const send = async (headers, payload) => (await fetch('http://' + host + '/v1/resources/' + id, { method: 'PUT', headers, body: payload }));
const headers = signer.sign({ method: 'PUT', url: '/v1/resources/' + id, host, headers: { 'content-type': 'application/json' }, body });
const provisioned = (await send(headers, body)).status;
const repeated = (await send(signer.sign({ method: 'PUT', url: '/v1/resources/' + id, host, headers: { 'content-type': 'application/json' }, body }), body)).status;
const tamperedAnswer = await send(headers, body.replace('small', 'large'));
const tamperedMessage = (await tamperedAnswer.json()).message;

const key = Buffer.alloc(32, 7).toString('base64');
const refusesWithoutDriver = (create, driver) => {
  try {
    create();
    return false;
  } catch (error) {
    return String(error.message).includes(driver);
  }
};
const sqliteWithoutDriver = refusesWithoutDriver(() => sqliteStore({ path: ':memory:', encryptionKey: key }), 'better-sqlite3');
const postgresWithoutDriver = refusesWithoutDriver(() => postgresStore({ connectionString: 'postgres://127.0.0.1:1/none', encryptionKey: key }), 'pg');

server.closeAllConnections();
server.close();
await router.close();
console.log(JSON.stringify({
  provisioned,
  repeated,
  tampered: tamperedAnswer.status,
  tamperedMessage,
  sameErrorClass: MarketplaceError === ErrorsMarketplaceError,
  drivers,
  sqliteWithoutDriver,
  postgresWithoutDriver,
}));
`;

// The tarball checked by @arethetypeswrong/cli and publint, then installed into throwaway apps on
// Express 4 and on Express 5, type-checked strictly (no skipLibCheck) as ESM (NodeNext) and as
// CommonJS (module commonjs, moduleResolution node10), required from CommonJS, and run through the
// acceptance suite. One `npm pack` for the whole file: two packs at once would rebuild dist/ under
// each other.
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const CONSUMER_CLIENT = { clientId: 'consumer-client', clientSecret: 'consumer-client-secret-42' };

describe('the packed tarball', () => {
  it('has no type resolution problem for any entry point (@arethetypeswrong/cli)', async () => {
    const { stdout } = await run(bin('attw'), [tarball, '--format', 'json'], { cwd: work, timeout: 120_000, maxBuffer: 32 * 1024 * 1024 }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
    const result = JSON.parse(stdout) as { analysis: { problems: unknown[]; entrypoints: Record<string, unknown> } };
    assert.deepEqual(result.analysis.problems, []);
    assert.deepEqual(Object.keys(result.analysis.entrypoints).sort(), ['.', './errors', './fastify', './package.json', './platform', './stores', './stores/postgres', './stores/sqlite', './testkit']);
  });

  it('passes publint with warnings treated as errors', async () => {
    const { stdout } = await run(bin('publint'), [tarball, '--strict'], { cwd: work, timeout: 120_000 });
    assert.doesNotMatch(stdout, /Warnings:|Errors:/);
  });
});

/** An app as the README writes it, with every setting from the environment. */
const APP = `
import express from 'express';
import session from 'express-session';
import { marketplaceRouter, memoryStore, requireMarketplaceSession, type ProvisionRequest } from 'embedded-marketplace';
import { MarketplaceError } from 'embedded-marketplace/errors';

const resources = new Map<string, string>();
const app = express();
app.use(session({ secret: 'consumer-session-secret', resave: false, saveUninitialized: false }));
const router = marketplaceRouter({
  store: memoryStore(),
  masterKey: process.env.MASTER_PUBLIC_KEY!,
  publicHost: '127.0.0.1:' + process.env.PORT!,
  logger: false,
  catalog: { bonnets: { plans: ['small', 'large'], regions: ['aws::us-east-1'] } },
  connector: { url: process.env.CONNECTOR_URL!, clientId: process.env.CONNECTOR_CLIENT_ID!, clientSecret: process.env.CONNECTOR_CLIENT_SECRET! },
  sso: { dashboardUrl: (id: string) => '/dashboard/' + id },
  handlers: {
    provision: ({ id, plan }: ProvisionRequest) => { resources.set(id, plan); return 'Your bonnet is ready'; },
    changePlan: ({ id, plan }) => { resources.set(id, plan); },
    deprovision: ({ id }) => { resources.delete(id); },
    provisionCredentials: ({ id, resourceId }) => ({ credentials: { BONNETS_URL: 'https://' + resourceId + ':' + id + '@bonnets.example' } }),
    deprovisionCredentials: () => undefined,
  },
});
app.use(router);
app.use(express.json());
app.get('/dashboard/:id', requireMarketplaceSession(), (_req, res) => { res.send('Your bonnet'); });
app.use((error: unknown, _req: express.Request, res: express.Response, next: express.NextFunction) => {
  if (error instanceof MarketplaceError) res.status(error.status).json({ message: error.message });
  else next(error);
});
const server = app.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening'));
process.on('SIGTERM', () => { server.close(); void router.close(); });
`;

/** CommonJS with TypeScript's classic resolution: every subpath must resolve and type-check. */
const CJS = `
import express = require('express');
import { marketplaceRouter, createVerifier, keepRawBody } from 'embedded-marketplace';
import { BadRequestError } from 'embedded-marketplace/errors';
import { sqliteStore } from 'embedded-marketplace/stores/sqlite';
import type { Store } from 'embedded-marketplace/stores';
import { createSigner } from 'embedded-marketplace/testkit';
import { platformRouter } from 'embedded-marketplace/platform';
const app = express();
app.use(express.json({ verify: keepRawBody })); // a global parser before the router, typed for Express 4 and 5
app.use(marketplaceRouter({ logger: false, handlers: { provision: () => undefined, changePlan: () => undefined, deprovision: () => undefined, provisionCredentials: () => ({ credentials: { A: 'b' } }), deprovisionCredentials: () => undefined } }));
export const used = [createVerifier, BadRequestError, sqliteStore, createSigner, platformRouter];
export type UsedTypes = Store;
`;

const STRICT = { strict: true, skipLibCheck: false, noEmit: true, target: 'ES2022', types: ['node'] };

function isOffline(error: unknown): boolean {
  const text = String((error as { stderr?: string }).stderr ?? error);
  return /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network|offline/i.test(text);
}

async function tscCheck(dir: string, config: string): Promise<void> {
  try {
    await run(process.execPath, [tsc, '-p', config], { cwd: dir, timeout: 180_000 });
  } catch (error) {
    assert.fail(`tsc -p ${config} failed:\n${(error as { stdout?: string }).stdout ?? String(error)}`);
  }
}

for (const major of [4, 5] as const) {
  describe(`a throwaway app on Express ${major}`, () => {
    let dir: string;
    let installed: true | string = 'not installed';

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), `em-express${major}-`));
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `em-express${major}`, version: '1.0.0', private: true, type: 'module' }));
      const deps = [tarball, `express@^${major === 4 ? '4.21.0' : '5.0.0'}`, `@types/express@^${major === 4 ? '4.17.21' : '5.0.0'}`, 'express-session@^1.18.0', '@types/express-session@^1.18.0', '@types/node@^20'];
      try {
        await run('npm', ['install', ...deps, '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline'], { cwd: dir, env: NPM_ENV, timeout: 300_000 });
        installed = true;
      } catch (error) {
        if (!isOffline(error)) throw error;
        installed = `the npm registry is unreachable and the cache lacks Express ${major}: ${String((error as Error).message).split('\n')[0]}`;
      }
    });
    after(() => {
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    function requireInstalled(t: TestContext): boolean {
      if (installed === true) return true;
      t.skip(installed);
      return false;
    }

    it('installs one copy of Express, the app\'s', (t) => {
      if (!requireInstalled(t)) return;
      const version = (JSON.parse(readFileSync(join(dir, 'node_modules', 'express', 'package.json'), 'utf8')) as { version: string }).version;
      assert.equal(version.split('.')[0], String(major));
      assert.throws(() => readFileSync(join(dir, 'node_modules', 'embedded-marketplace', 'node_modules', 'express', 'package.json')), 'no nested Express');
    });

    it('type-checks strictly as ESM (NodeNext) and as CommonJS (node10), and require() works', async (t) => {
      if (!requireInstalled(t)) return;
      writeFileSync(join(dir, 'app.ts'), APP);
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...STRICT, module: 'NodeNext', moduleResolution: 'NodeNext', noEmit: false, outDir: 'build' }, files: ['app.ts'] }));
      await tscCheck(dir, 'tsconfig.json');
      writeFileSync(join(dir, 'cjs.cts'), CJS);
      writeFileSync(join(dir, 'tsconfig.node10.json'), JSON.stringify({ compilerOptions: { ...STRICT, module: 'commonjs', moduleResolution: 'node10', esModuleInterop: true }, files: ['cjs.cts'] }));
      await tscCheck(dir, 'tsconfig.node10.json');
      writeFileSync(join(dir, 'tsconfig.cjs-nodenext.json'), JSON.stringify({ compilerOptions: { ...STRICT, module: 'NodeNext', moduleResolution: 'NodeNext', esModuleInterop: true }, files: ['cjs.cts'] }));
      await tscCheck(dir, 'tsconfig.cjs-nodenext.json');
      const probe = "const m = require('embedded-marketplace'); const e = require('embedded-marketplace/errors'); require('embedded-marketplace/stores/sqlite'); require('embedded-marketplace/stores'); require('embedded-marketplace/testkit'); require('embedded-marketplace/platform'); console.log(typeof m.marketplaceRouter, new e.BadRequestError('x') instanceof m.MarketplaceError)";
      const { stdout } = await run(process.execPath, ['-e', probe], { cwd: dir, timeout: 60_000 });
      assert.equal(stdout.trim(), 'function true');
    });

    it('passes the acceptance suite', async (t) => {
      if (!requireInstalled(t)) return;
      const master = generateKeyPair();
      const [port, connectorPort] = [await freePort(), await freePort()];
      const child: ChildProcess = spawn(process.execPath, ['build/app.js'], {
        cwd: dir,
        env: { ...process.env, PORT: String(port), MASTER_PUBLIC_KEY: master.publicKey, CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`, CONNECTOR_CLIENT_ID: CONSUMER_CLIENT.clientId, CONNECTOR_CLIENT_SECRET: CONSUMER_CLIENT.clientSecret },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      try {
        const [first] = (await once(child.stdout!, 'data')) as [Buffer];
        assert.match(first.toString(), /listening/);
        const report = await runAcceptance({ url: `http://127.0.0.1:${port}`, masterPrivateKey: master.privateKey, product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', ...CONSUMER_CLIENT, connectorPort });
        assert.deepEqual(failedIds(report), [], explain(report));
        assert.equal(report.passed, true);
      } finally {
        child.kill('SIGTERM');
        if (child.exitCode === null) await once(child, 'exit');
      }
    });
  });
}
