/**
 * The shape of src/, as a specification: the domain leaf imports nothing of ours but errors, the
 * lower layers never import the edges above them, and no two files import each other in a circle.
 * Read from the import statements of the source files themselves.
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const SRC = resolve(import.meta.dirname, '../../src');

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (name.endsWith('.ts')) out.push(full);
  }
  return out;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** src-relative file → src-relative files it imports (type-only imports included: they are still a dependency of the design). */
function importGraph(): { graph: Map<string, string[]>; packages: Map<string, string[]> } {
  const graph = new Map<string, string[]>();
  const packages = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets: string[] = [];
    const bare: string[] = [];
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2];
      if (spec === undefined) continue;
      if (!spec.startsWith('.')) {
        bare.push(spec);
        continue;
      }
      targets.push(relative(SRC, resolve(dirname(file), spec.replace(/\.js$/, '.ts'))));
    }
    graph.set(relative(SRC, file), targets);
    packages.set(relative(SRC, file), bare);
  }
  return { graph, packages };
}

const { graph, packages } = importGraph();
const layer = (file: string): string => (file.includes('/') ? file.slice(0, file.indexOf('/')) : file);

describe('the layers of src/', () => {
  it('has a domain leaf that imports nothing of ours but errors', () => {
    const domain = [...graph.keys()].filter((file) => layer(file) === 'domain');
    assert.ok(domain.length >= 3, 'src/domain holds the records, the handler types and the schemas');
    for (const file of domain) {
      for (const target of graph.get(file) ?? []) {
        assert.ok(layer(target) === 'domain' || target === 'errors.ts', `${file} imports ${target}`);
      }
    }
  });

  it('never imports the provider or platform edge from the layers below it', () => {
    for (const [file, targets] of graph) {
      if (!['idempotency', 'sso', 'store', 'domain', 'signature', 'lib'].includes(layer(file))) continue;
      for (const target of targets) {
        assert.ok(!['provider', 'platform', 'adapters', 'core'].includes(layer(target)), `${file} imports ${target}, a layer above it`);
      }
    }
  });

  it('has a core that imports no web framework, directly or through anything it imports', () => {
    const core = [...graph.keys()].filter((file) => layer(file) === 'core');
    assert.ok(core.includes('core/provider.ts') && core.includes('core/types.ts'), 'src/core holds createProvider and its types');
    const frameworks = /^(?:express|express-session|fastify|@fastify\/|hono|next)(?:\/|$)/;
    // Every file the core reaches, type-only imports included (a Fastify user's type check reads them too).
    const reached = new Map<string, string>(core.map((file) => [file, file]));
    const queue = [...core];
    while (queue.length > 0) {
      const file = queue.shift()!;
      for (const target of graph.get(file) ?? []) {
        if (reached.has(target)) continue;
        reached.set(target, `${reached.get(file)!} → ${target}`);
        queue.push(target);
      }
    }
    assert.ok(reached.has('signature/check.ts') && reached.has('sso/exchange.ts'), 'the core reaches the signature check and the sign-in steps');
    for (const [file, path] of reached) {
      for (const spec of packages.get(file) ?? []) assert.ok(!frameworks.test(spec), `${path} imports '${spec}'`);
      assert.ok(!['adapters', 'provider', 'platform'].includes(layer(file)), `the core reaches ${path}, an edge above it`);
    }
  });

  it('has no circle of imports between files', () => {
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      stack.push(file);
      for (const target of graph.get(file) ?? []) {
        if (state.get(target) === 'open') assert.fail(`import circle: ${[...stack.slice(stack.indexOf(target)), target].join(' → ')}`);
        if (!state.has(target)) visit(target);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file);
  });
});
