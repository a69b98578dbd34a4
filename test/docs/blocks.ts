import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The fenced code blocks of the docs, as the tests of test/docs run them: ```ts blocks are
 * type-checked against the package, ```sh blocks are syntax-checked and run.
 *
 * A block that cannot stand on its own says so, and why, in an HTML comment on the line before its
 * fence (invisible on GitHub and npm):
 *
 *   <!-- not-checked: a sketch of the interface, not its declaration -->   (ts: not type-checked)
 *   <!-- not-run: needs a PostgreSQL server -->                              (sh: `bash -n` only)
 *
 * A TypeScript block may import your own code from `./handlers.js` (a `handlers` object for
 * `marketplaceRouter`), which the type-check provides; anything else it uses, it declares.
 */
export interface Block {
  /** `docs/stores.md` */
  page: string;
  /** 1-based line of the first line of code (after the fence). */
  line: number;
  language: string;
  code: string;
  /** The reason of a `not-checked:` or `not-run:` comment before the fence. */
  skip: { kind: 'not-checked' | 'not-run'; reason: string } | undefined;
}

export const root = new URL('../..', import.meta.url).pathname;

export function docPages(): string[] {
  return readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).sort().map((name) => `docs/${name}`);
}

export function blocksOf(page: string): Block[] {
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```(\S*)/.exec(lines[i]!);
    if (open === null) continue;
    const indent = open[1]!.length;
    const language = open[2]!;
    const code: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^ *```\s*$/.test(lines[j]!)) {
      code.push(lines[j]!.slice(Math.min(indent, /^ */.exec(lines[j]!)![0].length)));
      j++;
    }
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === '') k--;
    const marker = k >= 0 ? /^\s*<!--\s*(not-checked|not-run):\s*(.*?)\s*-->\s*$/.exec(lines[k]!) : null;
    out.push({
      page,
      line: i + 2,
      language,
      code: `${code.join('\n')}\n`,
      skip: marker === null ? undefined : { kind: marker[1] as 'not-checked' | 'not-run', reason: marker[2]! },
    });
    i = j;
  }
  return out;
}

export const isTypeScript = (block: Block): boolean => block.language === 'ts' || block.language === 'typescript';
export const isShell = (block: Block): boolean => ['sh', 'bash', 'shell'].includes(block.language);

/**
 * The package's entry points mapped to their built declarations (dist/, which the test runner builds
 * first): a block compiles against the types a user of the package gets.
 */
export function packagePaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  const paths: Record<string, string[]> = {};
  for (const [entry, target] of Object.entries(pkg.exports)) {
    const types = (target as { import?: { types?: string } }).import?.types;
    if (types === undefined) continue;
    const file = join(root, types);
    if (!existsSync(file)) throw new Error(`${file} is missing: build first (node scripts/run-tests.mjs does)`);
    paths[entry === '.' ? 'embedded-marketplace' : `embedded-marketplace/${entry.slice(2)}`] = [file];
  }
  return paths;
}
