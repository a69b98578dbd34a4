import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

// The README's own path, literally: its TypeScript blocks type-check against the package, and its
// shell block runs line by line in an empty directory, as a new user would paste it. The only
// stand-ins: `npx embedded-marketplace` runs this checkout's CLI (no registry), `npm run example`
// this checkout's example provider, and after a line that starts a server in the background the
// runner waits for its port, as a person would before typing the next line.

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const tsxLoader = join(root, 'node_modules', 'tsx', 'dist', 'loader.mjs');

function blocks(language: string): string[] {
  return [...readme.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!);
}

describe('README', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'em-readme-'));
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
        compilerOptions: { noEmit: true, noUnusedLocals: false, baseUrl: '.', paths: { 'embedded-marketplace': ['../../src/index.ts'], 'embedded-marketplace/fastify': ['../../src/adapters/fastify.ts'], 'embedded-marketplace/*': ['../../src/*'] } },
        files,
      }));
      await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')], { cwd: root, timeout: 180_000 })
        .catch((error: { stdout?: string }) => assert.fail(`README TypeScript does not compile:\n${error.stdout ?? String(error)}`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the keygen → example → test → curl → serve block runs as written', async () => {
    const block = blocks('sh').find((code) => code.includes('embedded-marketplace keygen'));
    assert.ok(block !== undefined, 'the README has the test-kit shell block');
    const shims = join(work, 'bin');
    mkdirSync(shims);
    writeFileSync(join(shims, 'npx'), `#!/bin/sh\n[ "$1" = embedded-marketplace ] || { echo "npx $1: not the package" >&2; exit 1; }\nshift\nexec "${process.execPath}" --import "${tsxLoader}" "${root}/src/testkit/cli.ts" "$@"\n`);
    chmodSync(join(shims, 'npx'), 0o755);
    writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'readme-user', private: true, scripts: { example: `"${process.execPath}" --import "${tsxLoader}" "${root}/examples/provider.ts"` } }));
    const waitPort = (port: number) => `"${process.execPath}" -e "const t=Date.now();(function p(){fetch('http://127.0.0.1:${port}/').then(()=>process.exit(0),()=>Date.now()-t>120000?process.exit(1):setTimeout(p,200))})()"`;
    // Job control: each background line gets its own process group, ended whole at exit (npm runs
    // the example as a grandchild).
    const script = ['set -e -m', 'trap \'for job in $(jobs -p); do kill -- -$job 2>/dev/null || true; done\' EXIT'];
    for (const line of block.split('\n').filter((l) => l.trim() !== '')) {
      const command = line.replace(/\s+#.*$/, '');
      if (command.endsWith('&')) {
        script.push(command, waitPort(4567));
      } else if (command.includes('embedded-marketplace curl')) {
        // curl prints a signed command; run what it printed, as the user would paste it.
        script.push(`PRINTED=$(${command})`, 'echo "PRINTED: $PRINTED"', 'echo "ANSWER: $(sh -c "$PRINTED -s -w \' %{http_code}\'")"');
      } else if (command.includes('embedded-marketplace serve')) {
        script.push(`${command} & SERVE=$!`, waitPort(4570), `"${process.execPath}" -e "fetch('http://127.0.0.1:4570/').then(async r=>console.log('PAGE:',r.status,(await r.text()).length))"`, 'kill -- -$SERVE');
      } else {
        script.push(command);
      }
    }
    writeFileSync(join(work, 'readme.sh'), `${script.join('\n')}\n`);
    const env = { ...process.env, PATH: `${shims}:${process.env.PATH ?? ''}`, LOG_LEVEL: 'error', STORE: 'memory' };
    let stdout: string;
    try {
      ({ stdout } = await run('bash', ['readme.sh'], { cwd: work, env, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }));
    } catch (error) {
      const failed = error as { stdout?: string; stderr?: string };
      assert.fail(`the README block failed:\n${failed.stdout ?? ''}\n${failed.stderr ?? String(error)}`);
    }
    assert.match(stdout, /passed/i, 'the acceptance run reports its result');
    assert.doesNotMatch(stdout, /\bfailed: [1-9]/i);
    assert.match(stdout, /ANSWER: HTTP\/1\.1 201[\s\S]*"message"/);
    assert.match(stdout, /PAGE: 200 \d+/);
  });
});
