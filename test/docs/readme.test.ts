import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NPM_ENV, packTarball } from '../helpers/pack.js';
import { packagePaths } from './blocks.js';

// The README's own path, literally, outside this repository: the package packed as `npm pack`
// makes it, installed into an empty project of a "user" as the Install section says, the README's
// app saved there as app.ts, and the "Test a provider" block pasted there at once and run line by
// line by bash. Nothing stands in for the package or its CLI: `npx embedded-marketplace` is the
// installed tarball's bin. The one thing taken from this checkout is tsx (the README installs it
// with -D from the registry; here it is linked, as no test reaches the registry). The README's
// TypeScript blocks also type-check against the package (strict).

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

function blocks(language: string): string[] {
  return [...readme.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!);
}

describe('README', () => {
  let work: string;
  let tarball: string;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'em-readme-'));
    ({ tarball } = await packTarball(work));
  });
  after(() => {
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  it('TypeScript blocks type-check against the package (strict; the packaging test adds skipLibCheck false)', async () => {
    const snippets = blocks('ts');
    assert.ok(snippets.length > 0);
    const dir = join(root, '.tmp', `readme-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    try {
      const files = snippets.map((code, index) => {
        const file = join(dir, `snippet${index}.ts`);
        writeFileSync(file, `${code}\nexport {};\n`);
        return file;
      });
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
        extends: '../../tsconfig.json',
        compilerOptions: { noEmit: true, noUnusedLocals: false, baseUrl: '.', paths: packagePaths() },
        files,
      }));
      await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')], { cwd: root, timeout: 180_000 })
        .catch((error: unknown) => assert.fail(`README TypeScript does not compile:\n${(error as { stdout?: string }).stdout ?? String(error)}`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('installs the tarball the Install section names: this version, built by npm pack', () => {
    const install = blocks('sh').find((code) => code.includes('npm pack'));
    assert.ok(install !== undefined, 'the README has the install-from-a-clone block');
    assert.ok(install.includes(`embedded-marketplace-${pkg.version}.tgz`), `the Install block names embedded-marketplace-${pkg.version}.tgz`);
    assert.ok(tarball.endsWith(`embedded-marketplace-${pkg.version}.tgz`), tarball);
    assert.match(readme, /npm install embedded-marketplace express express-session/, 'the registry line stays beside it');
  });

  it('the "Test a provider" block runs as pasted at once, from a project that installed the tarball', async () => {
    const block = blocks('sh').find((code) => code.includes('embedded-marketplace keygen'));
    assert.ok(block !== undefined, 'the README has the test-kit shell block');
    const app = blocks('ts').find((code) => code.includes('app.listen(4567'));
    assert.ok(app !== undefined, 'the README has the app the block tests');

    // The user's project: `npm init -y`, then the Install section's lines (the registry is not
    // reached: every dependency comes from npm's cache, which this repository's install filled).
    const project = join(work, 'my-provider');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-provider', version: '1.0.0', private: true, type: 'commonjs' }));
    const install = (mode: string) => run('npm', ['install', tarball, 'express-session', mode, '--no-audit', '--no-fund'], { cwd: project, env: NPM_ENV, timeout: 300_000 });
    await install('--offline').catch(() => install('--prefer-offline'));
    symlinkSync(join(root, 'node_modules', 'tsx'), join(project, 'node_modules', 'tsx'), 'dir');
    symlinkSync('../tsx/dist/cli.mjs', join(project, 'node_modules', '.bin', 'tsx'));
    writeFileSync(join(project, 'app.ts'), app);

    // Job control: each background line gets its own process group, ended whole at exit. No wait
    // is added after the line that starts the provider: `test --wait` is what waits for it.
    const waitPort = (port: number) => `"${process.execPath}" -e "const t=Date.now();(function p(){fetch('http://127.0.0.1:${port}/').then(()=>process.exit(0),()=>Date.now()-t>120000?process.exit(1):setTimeout(p,200))})()"`;
    const script = ['set -e -m', 'trap \'for job in $(jobs -p); do kill -- -$job 2>/dev/null || true; done\' EXIT'];
    for (const line of block.split('\n').filter((l) => l.trim() !== '')) {
      const command = line.replace(/\s+#.*$/, '');
      if (command.includes('embedded-marketplace curl')) {
        // curl prints a signed command; run what it printed, as the user would paste it.
        script.push(`PRINTED=$(${command})`, 'echo "PRINTED: $PRINTED"', 'echo "ANSWER: $(sh -c "$PRINTED -s -w \' %{http_code}\'")"');
      } else if (command.includes('embedded-marketplace serve')) {
        // serve runs until Ctrl-C: open its page once, as a person would, then end it.
        script.push(`${command} & SERVE=$!`, waitPort(4570), `"${process.execPath}" -e "fetch('http://127.0.0.1:4570/').then(async r=>console.log('PAGE:',r.status,(await r.text()).length))"`, 'kill -- -$SERVE');
      } else {
        script.push(command);
      }
    }
    writeFileSync(join(project, 'readme.sh'), `${script.join('\n')}\n`);
    const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
    for (const name of ['MASTER_PUBLIC_KEY', 'CONNECTOR_URL', 'CONNECTOR_CLIENT_ID', 'CONNECTOR_CLIENT_SECRET', 'PUBLIC_HOST', 'SESSION_SECRET', 'NODE_OPTIONS']) delete env[name];
    let stdout: string;
    try {
      ({ stdout } = await run('bash', ['readme.sh'], { cwd: project, env, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }));
    } catch (error) {
      const failed = error as { stdout?: string; stderr?: string };
      assert.fail(`the README block failed:\n${failed.stdout ?? ''}\n${failed.stderr ?? String(error)}`);
    }
    assert.match(stdout, /\d+ passed, 0 failed/, 'the acceptance run reports its result');
    assert.doesNotMatch(stdout, /^Failed: /m);
    assert.match(stdout, /ANSWER: HTTP\/1\.1 201[\s\S]*"message"/);
    assert.match(stdout, /PAGE: 200 \d+/);
  });
});
