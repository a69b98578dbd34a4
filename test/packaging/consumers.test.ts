import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NPM_ENV, packTarball } from '../helpers/pack.js';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { runAcceptance } from '../../src/testkit/acceptance/index.js';
import { explain, failedIds, freePort } from '../testkit/helpers/harness.js';

// The packed tarball as its users meet it: checked by @arethetypeswrong/cli and publint, then
// installed into throwaway apps on Express 4 and on Express 5, type-checked strictly (no
// skipLibCheck) as ESM (NodeNext) and as CommonJS (module commonjs, moduleResolution node10),
// required from CommonJS, and run through the acceptance suite.

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const CLIENT = { clientId: 'consumer-client', clientSecret: 'consumer-client-secret-42' };

let work: string;
let tarball: string;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'em-consumers-'));
  ({ tarball } = await packTarball(work));
});
after(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  it('has no type resolution problem for any entry point (@arethetypeswrong/cli)', async () => {
    const { stdout } = await run(bin('attw'), [tarball, '--format', 'json'], { cwd: work, timeout: 120_000, maxBuffer: 32 * 1024 * 1024 }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
    const result = JSON.parse(stdout) as { analysis: { problems: unknown[]; entrypoints: Record<string, unknown> } };
    assert.deepEqual(result.analysis.problems, []);
    assert.deepEqual(Object.keys(result.analysis.entrypoints).sort(), ['.', './errors', './package.json', './platform', './stores/postgres', './stores/sqlite', './testkit']);
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
import { marketplaceRouter, createVerifier } from 'embedded-marketplace';
import { BadRequestError } from 'embedded-marketplace/errors';
import { sqliteStore } from 'embedded-marketplace/stores/sqlite';
import { createSigner } from 'embedded-marketplace/testkit';
import { platformRouter } from 'embedded-marketplace/platform';
const app = express();
app.use(marketplaceRouter({ logger: false, handlers: { provision: () => undefined, changePlan: () => undefined, deprovision: () => undefined, provisionCredentials: () => ({ credentials: { A: 'b' } }), deprovisionCredentials: () => undefined } }));
export const used = [createVerifier, BadRequestError, sqliteStore, createSigner, platformRouter];
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
      const probe = "const m = require('embedded-marketplace'); const e = require('embedded-marketplace/errors'); require('embedded-marketplace/stores/sqlite'); require('embedded-marketplace/testkit'); require('embedded-marketplace/platform'); console.log(typeof m.marketplaceRouter, new e.BadRequestError('x') instanceof m.MarketplaceError)";
      const { stdout } = await run(process.execPath, ['-e', probe], { cwd: dir, timeout: 60_000 });
      assert.equal(stdout.trim(), 'function true');
    });

    it('passes the acceptance suite', async (t) => {
      if (!requireInstalled(t)) return;
      const master = generateKeyPair();
      const [port, connectorPort] = [await freePort(), await freePort()];
      const child: ChildProcess = spawn(process.execPath, ['build/app.js'], {
        cwd: dir,
        env: { ...process.env, PORT: String(port), MASTER_PUBLIC_KEY: master.publicKey, CONNECTOR_URL: `http://127.0.0.1:${connectorPort}`, CONNECTOR_CLIENT_ID: CLIENT.clientId, CONNECTOR_CLIENT_SECRET: CLIENT.clientSecret },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      try {
        const [first] = (await once(child.stdout!, 'data')) as [Buffer];
        assert.match(first.toString(), /listening/);
        const report = await runAcceptance({ url: `http://127.0.0.1:${port}`, masterPrivateKey: master.privateKey, product: 'bonnets', plan: 'small', newPlan: 'large', region: 'aws::us-east-1', ...CLIENT, connectorPort });
        assert.deepEqual(failedIds(report), [], explain(report));
        assert.equal(report.passed, true);
      } finally {
        child.kill('SIGTERM');
        if (child.exitCode === null) await once(child, 'exit');
      }
    });
  });
}
