#!/usr/bin/env node
// Builds dist/cjs: every ESM file of dist/ converted to CommonJS one by one (no bundling), so that
// require('embedded-marketplace') and its subpaths work and keep one copy of each module (one
// MarketplaceError class) inside the CommonJS graph. Declarations are copied alongside: under
// dist/cjs/package.json's "type": "commonjs" TypeScript reads them as CommonJS types.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { transformSync } from 'esbuild';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
const out = join(dist, 'cjs');
rmSync(out, { recursive: true, force: true });

// import.meta.url has no CommonJS counterpart until asked for; each file that uses it gets one.
const META_URL = '__embeddedMarketplaceImportMetaUrl';
const banner = `const ${META_URL} = require('node:url').pathToFileURL(__filename).href;`;

function walk(dir) {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    if (full === out) continue;
    if (statSync(full).isDirectory()) {
      walk(full);
      continue;
    }
    const target = join(out, relative(dist, full));
    mkdirSync(dirname(target), { recursive: true });
    if (name.endsWith('.d.ts')) {
      copyFileSync(full, target);
    } else if (name.endsWith('.js')) {
      const source = readFileSync(full, 'utf8');
      const usesMeta = source.includes('import.meta.url');
      const { code } = transformSync(source, {
        format: 'cjs',
        platform: 'node',
        target: 'node20',
        ...(usesMeta ? { define: { 'import.meta.url': META_URL }, banner } : {}),
      });
      // The CLI entry keeps its shebang on the first line.
      writeFileSync(target, code);
    }
  }
}

walk(dist);
writeFileSync(join(out, 'package.json'), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);
