import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { blocksOf, docPages, isShell, isTypeScript, root, packagePaths, type Block } from './blocks.js';

// The code of docs/*.md runs, as the README's does: every TypeScript block type-checks against the
// package (strict, the repository's tsconfig), every shell block passes `bash -n`, and every shell
// block not marked `<!-- not-run: reason -->` runs in a scratch directory, in page order, and
// exits 0. `npx embedded-marketplace` there is this checkout's built CLI (dist/, which the test
// runner builds); the README test runs the packed one.

const run = promisify(execFile);
const blocks = docPages().flatMap(blocksOf);
const typescript = blocks.filter(isTypeScript);
const shell = blocks.filter(isShell);

/** The user's own code that TypeScript blocks may import (see test/docs/blocks.ts). */
const FIXTURES: Record<string, string> = {
  'handlers.ts': `import type { ProviderHandlers } from 'embedded-marketplace';
/** Your handlers (docs import them from './handlers.js'). */
export const handlers: ProviderHandlers = {
  provision: () => 'Ready',
  changePlan: () => undefined,
  deprovision: () => undefined,
  provisionCredentials: () => ({ credentials: { BONNETS_URL: 'https://bonnets.example' } }),
  deprovisionCredentials: () => undefined,
};
`,
};

const where = (block: Block) => `${block.page}:${block.line}`;

describe('docs/*.md code blocks', () => {
  it('mark a block they do not check with a reason, and keep such blocks few', () => {
    const skipped = blocks.filter((block) => block.skip !== undefined);
    for (const block of skipped) {
      assert.ok(block.skip!.reason.length >= 10, `${where(block)}: say why the block is ${block.skip!.kind}`);
      assert.ok(block.skip!.kind === 'not-checked' ? isTypeScript(block) : isShell(block), `${where(block)}: not-checked is for ts blocks, not-run for sh blocks`);
    }
    const unchecked = skipped.filter((block) => block.skip!.kind === 'not-checked');
    assert.ok(unchecked.length * 8 <= typescript.length, `${unchecked.length} of ${typescript.length} TypeScript blocks are not checked: make them compile`);
  });

  it('TypeScript blocks type-check against the package', async (t) => {
    const checked = typescript.filter((block) => block.skip === undefined);
    t.diagnostic(`${checked.length} TypeScript blocks checked, ${typescript.length - checked.length} marked not-checked`);
    assert.ok(checked.length >= 40, `${checked.length} blocks`);
    const dir = join(root, '.tmp', `doc-blocks-${process.pid}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    try {
      for (const [name, text] of Object.entries(FIXTURES)) writeFileSync(join(dir, name), text);
      const files = new Map<string, Block>();
      checked.forEach((block, index) => {
        const name = `${block.page.replace(/^docs\/|\.md$/g, '')}-${block.line}-${index}.ts`;
        writeFileSync(join(dir, name), `${block.code}export {};\n`);
        files.set(name, block);
      });
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
        extends: relative(dir, join(root, 'tsconfig.json')),
        compilerOptions: { noEmit: true, rootDir: root, baseUrl: '.', paths: packagePaths() },
        files: [...Object.keys(FIXTURES), ...files.keys()],
      }));
      const result = await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json'), '--pretty', 'false'], { cwd: dir, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 })
        .then(() => '', (error: unknown) => (error as { stdout?: string }).stdout ?? String(error));
      // Each error at the page and line a reader sees.
      const errors = result.split('\n').filter((line) => line.trim() !== '').map((line) => {
        const match = /^(?:.*\/)?([^/(]+\.ts)\((\d+),(\d+)\): (.*)$/.exec(line);
        const block = match === null ? undefined : files.get(match[1]!);
        return block === undefined ? line : `${block.page}:${block.line + Number(match![2]) - 1}: ${match![4]}`;
      });
      assert.deepEqual(errors, []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('shell blocks are valid bash', async () => {
    assert.ok(shell.length >= 8, `${shell.length} blocks`);
    const problems: string[] = [];
    for (const block of shell) {
      await run('bash', ['-n', '-c', block.code], { timeout: 30_000 }).catch((error: unknown) => problems.push(`${where(block)}: ${(error as { stderr?: string }).stderr ?? String(error)}`));
    }
    assert.deepEqual(problems, []);
  });

  describe('shell blocks run', () => {
    let scratch: string;
    let env: NodeJS.ProcessEnv;
    before(() => {
      scratch = mkdtempSync(join(tmpdir(), 'em-doc-blocks-'));
      const bin = join(scratch, '.bin');
      mkdirSync(bin);
      // npx embedded-marketplace: this checkout's CLI as built; any other package would need the registry.
      writeFileSync(join(bin, 'npx'), `#!/bin/sh\n[ "$1" = embedded-marketplace ] || { echo "npx $1: not available in the docs test" >&2; exit 1; }\nshift\nexec "${process.execPath}" "${root}/dist/testkit/cli.js" "$@"\n`);
      chmodSync(join(bin, 'npx'), 0o755);
      writeFileSync(join(bin, 'embedded-marketplace'), `#!/bin/sh\nexec "${process.execPath}" "${root}/dist/testkit/cli.js" "$@"\n`);
      chmodSync(join(bin, 'embedded-marketplace'), 0o755);
      env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, NO_COLOR: '1' };
      for (const name of ['MASTER_PUBLIC_KEY', 'CONNECTOR_URL', 'CONNECTOR_CLIENT_ID', 'CONNECTOR_CLIENT_SECRET', 'NODE_OPTIONS']) delete env[name];
    });
    after(() => {
      if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
    });

    const runnable = shell.filter((block) => block.skip === undefined);
    for (const page of [...new Set(runnable.map((block) => block.page))]) {
      it(`${page}, in page order`, async () => {
        const dir = join(scratch, page.replace(/\W/g, '-'));
        mkdirSync(dir);
        for (const block of runnable.filter((b) => b.page === page)) {
          await run('bash', ['-e', '-o', 'pipefail', '-c', block.code], { cwd: dir, env, timeout: 60_000, maxBuffer: 4 * 1024 * 1024 })
            .catch((error: unknown) => {
              const { stdout, stderr } = error as { stdout?: string; stderr?: string };
              assert.fail(`${where(block)} failed:\n${stdout ?? ''}\n${stderr ?? String(error)}`);
            });
        }
      });
    }
  });
});
