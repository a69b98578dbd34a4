import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;
const shippedDocs = [
  ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`),
  'README.md',
  'SECURITY.md',
];

describe('docs', () => {
  it('docs/errors.md lists every error code of the ErrorCode union', () => {
    // Comments may hold a `;`: drop them before looking for the end of the union.
    const source = readFileSync(join(root, 'src', 'errors.ts'), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const union = source.slice(source.indexOf('export type ErrorCode'), source.indexOf(';', source.indexOf('export type ErrorCode')));
    const codes = [...union.matchAll(/'(ERR_[A-Z_]+)'/g)].map((match) => match[1]!);
    assert.ok(codes.length > 30, `found ${codes.length} codes`);
    const errors = readFileSync(join(root, 'docs', 'errors.md'), 'utf8');
    assert.deepEqual(codes.filter((code) => !errors.includes(`| \`${code}\` |`)), []);
  });

  it('cite no spec file or section that is not shipped', () => {
    for (const path of shippedDocs) {
      const text = readFileSync(join(root, path), 'utf8');
      assert.doesNotMatch(text, /gaps\.md|interface\.md|\bsections? \d/, path);
      // Links: test/docs/links.test.ts checks each against the packed file list.
    }
  });

  it('use one name per setting', () => {
    for (const path of [...shippedDocs, 'examples/provider-app.ts', 'examples/provider.ts', 'examples/demo.ts']) {
      const text = readFileSync(join(root, path), 'utf8');
      assert.doesNotMatch(text, /(?<![A-Z_])(?:CLIENT_ID|CLIENT_SECRET|STORE_KEY)\b|MARKETPLACE_MASTER_KEY/, path);
    }
  });
});
