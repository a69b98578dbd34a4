import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { blocksOf, docPages, isTypeScript, root } from './blocks.js';

// Every exported name is documented. The rule:
// 1. docs/api.md has a section `## \`<entry point>\`` for every entry point of package.json
//    "exports", and under it one entry per name that entry point exports: a list item that starts
//    with the name in backticks (`- \`name\``, `- \`name(args)\``), or a heading `### \`name\``.
// 2. Every entry there names something that entry point exports (no stale entries).
// 3. Every exported value (function, class, constant) is used in a TypeScript block of docs/*.md
//    that test/docs/blocks.test.ts type-checks: each has an example where it is used.
// The exports are read from the built declarations (dist/, which the test runner builds first),
// as a user's TypeScript sees them.

interface Entry {
  specifier: string;
  names: Map<string, 'value' | 'type'>;
}

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, { import?: { types?: string } } | string> };

function entryPoints(): Entry[] {
  const targets = Object.entries(pkg.exports)
    .filter(([, target]) => typeof target === 'object' && target.import?.types !== undefined)
    .map(([entry, target]) => ({ specifier: entry === '.' ? 'embedded-marketplace' : `embedded-marketplace/${entry.slice(2)}`, file: join(root, (target as { import: { types: string } }).import.types) }));
  for (const { file } of targets) assert.ok(existsSync(file), `${file} is missing: build first (node scripts/run-tests.mjs does)`);
  const program = ts.createProgram(targets.map((t) => t.file), { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  return targets.map(({ specifier, file }) => {
    const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
    const names = new Map<string, 'value' | 'type'>();
    for (const symbol of checker.getExportsOfModule(module)) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      names.set(symbol.name, target.flags & ts.SymbolFlags.Value ? 'value' : 'type');
    }
    return { specifier, names };
  });
}

/** Entry point → the names docs/api.md has an entry for under it. */
function documented(markdown: string): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let current: string[] | undefined;
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const section = /^## `([^`]+)`\s*$/.exec(line);
    if (section !== null) {
      current = [];
      sections.set(section[1]!, current);
      continue;
    }
    if (/^## /.test(line)) current = undefined;
    const entry = /^(?:- |#{3,4} )`([A-Za-z_$][\w$]*)/.exec(line);
    if (entry !== null && current !== undefined) current.push(entry[1]!);
  }
  return sections;
}

const entries = entryPoints();
const api = readFileSync(join(root, 'docs', 'api.md'), 'utf8');
const sections = documented(api);

describe('every exported name is documented (docs/api.md)', () => {
  it('reads the exports of every entry point', () => {
    assert.ok(entries.length >= 7, entries.map((e) => e.specifier).join(', '));
    assert.ok(entries.find((e) => e.specifier === 'embedded-marketplace')!.names.has('marketplaceRouter'));
  });

  it('has a section per entry point, with an entry for each name it exports', () => {
    const missing: string[] = [];
    for (const { specifier, names } of entries) {
      const listed = new Set(sections.get(specifier) ?? []);
      if (!sections.has(specifier)) missing.push(`no section "## \`${specifier}\`"`);
      const undocumented = [...names.keys()].filter((name) => !listed.has(name)).sort();
      if (undocumented.length > 0) missing.push(`under "## \`${specifier}\`" add an entry ("- \`name\`: what it is") for: ${undocumented.join(', ')}`);
    }
    assert.deepEqual(missing, []);
  });

  it('lists each name once per entry point, and only names the entry point exports', () => {
    const problems: string[] = [];
    for (const [specifier, listed] of sections) {
      const entry = entries.find((e) => e.specifier === specifier);
      if (entry === undefined) {
        problems.push(`"## \`${specifier}\`" is no entry point of package.json`);
        continue;
      }
      const stale = listed.filter((name) => !entry.names.has(name));
      if (stale.length > 0) problems.push(`${specifier} does not export ${stale.join(', ')}`);
      const twice = listed.filter((name, index) => listed.indexOf(name) !== index);
      if (twice.length > 0) problems.push(`${specifier} lists twice: ${twice.join(', ')}`);
    }
    assert.deepEqual(problems, []);
  });

  it('has an example that uses each exported value, in a type-checked block of docs/', () => {
    const code = docPages().flatMap(blocksOf).filter((block) => isTypeScript(block) && block.skip === undefined).map((block) => block.code).join('\n');
    const values = new Set(entries.flatMap(({ names }) => [...names].filter(([, kind]) => kind === 'value').map(([name]) => name)));
    assert.ok(values.size > 100, `${values.size} values`);
    assert.deepEqual([...values].filter((name) => !new RegExp(`\\b${name.replace(/\$/g, '\\$')}\\b`).test(code)).sort(), []);
  });

  it('recognises entries as written, and nothing in code samples', () => {
    const sample = '## `pkg`\n- `a(x)`: one\n- `B` (type): two\n### `c`\n```ts\n- `d`\n```\n## Other\n- `e`\n## `pkg/sub`\n- `f`: three\n';
    assert.deepEqual([...documented(sample)], [['pkg', ['a', 'B', 'c']], ['pkg/sub', ['f']]]);
  });
});
