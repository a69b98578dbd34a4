import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { promisify } from 'node:util';
import { NPM_ENV } from '../helpers/pack.js';

// The docs travel in the npm package (README.md, SECURITY.md, CHANGELOG.md, docs/). A reader of
// node_modules/embedded-marketplace has only what was packed, so every relative link in them must
// name a packed file (and an existing heading, for a #fragment). Everything else is an absolute
// URL; one into this repository (…/blob/main/<path>) must name a file of the repository.

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { repository: { url: string } };
const REPOSITORY = pkg.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The text outside fenced code blocks (links in code samples are code, not links). */
function prose(markdown: string): string {
  return markdown.replace(/^ *```[\s\S]*?^ *```/gm, '');
}

function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, text] of prose(markdown).matchAll(/^#{1,6} +(.+)$/gm)) {
    const base = slug(text!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.add(count === 0 ? base : `${base}-${count}`);
  }
  return out;
}

/** Every `[text](target)` link target and `<a href>` of the prose. */
function links(markdown: string): string[] {
  const text = prose(markdown).replace(/`[^`\n]*`/g, (code) => (code.includes('](') ? '' : code));
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g), ...text.matchAll(/<a\s[^>]*href="([^"]+)"/g)].map((match) => match[1]!);
}

describe('links of the shipped docs', () => {
  let packed: Set<string>;
  before(async () => {
    const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, env: NPM_ENV, timeout: 120_000, maxBuffer: 32 * 1024 * 1024 });
    const report = JSON.parse(stdout.slice(stdout.indexOf('['))) as { files: { path: string }[] }[];
    packed = new Set(report[0]!.files.map((file) => file.path));
  });

  it('ship the README, the threat model, the changelog and every page of docs/', () => {
    for (const path of ['README.md', 'SECURITY.md', 'CHANGELOG.md']) assert.ok(packed.has(path), path);
    assert.ok([...packed].filter((path) => /^docs\/.+\.md$/.test(path)).length >= 10);
  });

  it('link only to packed files and existing headings, or to absolute URLs', () => {
    const problems: string[] = [];
    const markdown = [...packed].filter((path) => path.endsWith('.md'));
    for (const page of markdown) {
      const text = readFileSync(join(root, page), 'utf8');
      for (const target of links(text)) {
        if (/^mailto:/.test(target)) continue;
        if (/^https?:\/\//.test(target)) {
          const inRepository = new RegExp(`^${REPOSITORY.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/(?:blob|tree)/main/([^#?]+)`).exec(target);
          if (inRepository !== null && !existsSync(join(root, decodeURIComponent(inRepository[1]!)))) problems.push(`${page}: ${target} names no file of the repository`);
          continue;
        }
        const [path, fragment] = target.split('#') as [string, string | undefined];
        const file = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
        if (!packed.has(file)) {
          problems.push(`${page}: ${target} is not in the package (link it as ${REPOSITORY}/blob/main/${file}, or ship it)`);
          continue;
        }
        if (fragment !== undefined && file.endsWith('.md') && !anchors(readFileSync(join(root, file), 'utf8')).has(fragment)) {
          problems.push(`${page}: ${target}: ${file} has no heading #${fragment}`);
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  it('the anchor rule matches GitHub\'s for the headings these docs use', () => {
    assert.equal(slug('Diagnostics-only stores (`encryptionKey: false`)'), 'diagnostics-only-stores-encryptionkey-false');
    assert.equal(slug('The outbox and operations from the command line'), 'the-outbox-and-operations-from-the-command-line');
    assert.equal(slug('`embedded-marketplace/stores`'), 'embedded-marketplacestores');
    assert.deepEqual([...anchors('# A\n## B\n```\n# not a heading\n```\n## B\n')], ['a', 'b', 'b-1']);
    assert.deepEqual(links('[x](a.md#b) `[y](c.md)`\n```\n[z](d.md)\n```\n'), ['a.md#b']);
  });
});
