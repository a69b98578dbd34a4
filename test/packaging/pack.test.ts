import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NPM_ENV, packTarball } from '../helpers/pack.js';

// The package as users get it: `npm pack` (whose `prepare` builds dist/), the tarball installed in a
// scratch project, and a small ESM program there that imports every entry point and serves one
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
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'em-scratch-'));
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'em-scratch', version: '1.0.0', private: true, type: 'module' }));
    const install = (mode: string) => run('npm', ['install', tarball, mode, '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock'], { cwd: scratch, env: NPM_ENV, timeout: 120_000 });
    try {
      await install('--offline');
    } catch {
      // A dependency missing from the cache: fetch it when the registry is reachable.
      await install('--prefer-offline');
    }
  });
  after(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
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

  it('loads neither better-sqlite3 nor pg with the main entry, even when both are installed', async () => {
    // The drivers this repository installed, linked in (their dependencies resolve from their real path).
    for (const driver of ['better-sqlite3', 'pg']) symlinkSync(join(root, 'node_modules', driver), join(scratch, 'node_modules', driver), 'dir');
    writeFileSync(join(scratch, 'drivers.mjs'), DRIVER_PROBE);
    const { stdout } = await run(process.execPath, ['drivers.mjs'], { cwd: scratch, timeout: 60_000 });
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()!), { withEveryEntry: [], afterSqliteStore: ['better-sqlite3'] });
  });
});

/** Imports every entry point, then creates a SQLite store: only that may load a driver. */
const DRIVER_PROBE = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const drivers = () => [...new Set(Object.keys(require.cache).map((p) => /node_modules\\/(better-sqlite3|pg)\\//.exec(p)?.[1]).filter(Boolean))];
await import('embedded-marketplace');
await import('embedded-marketplace/errors');
await import('embedded-marketplace/platform');
await import('embedded-marketplace/testkit');
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

const require = createRequire(import.meta.url);
const drivers = Object.keys(require.cache).filter((p) => /node_modules\\/(better-sqlite3|pg)\\//.test(p));
if (typeof platformRouter !== 'function' || typeof BadRequestError !== 'function') throw new Error('missing exports');

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
