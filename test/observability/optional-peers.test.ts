import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TSX = import.meta.resolve('tsx');
const INDEX = fileURLToPath(new URL('../../src/observability/index.ts', import.meta.url));

/** Makes prom-client and every @opentelemetry package unresolvable, as in an app that installed neither. */
const HIDE = `
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'prom-client' || request.startsWith('@opentelemetry/')) {
    throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: 'MODULE_NOT_FOUND' });
  }
  return resolve.call(this, request, ...rest);
};
`;

const PROBE = `
import { noInstrumentation, resolveInstrumentation } from ${JSON.stringify(INDEX)};
const plain = resolveInstrumentation('marketplaceRouter', undefined);
let error;
try {
  resolveInstrumentation('platformRouter', { registry: {} });
} catch (err) {
  error = { name: err.name, message: err.message };
}
const ran = await plain.span('marketplace.operation', { kind: 'provision' }, async () => 'ran');
console.log(JSON.stringify({ isDefault: plain === noInstrumentation, error, ran }));
`;

describe('optional peers absent', () => {
  it('without prom-client and the OpenTelemetry API: the default hooks, and a clear error when metrics are asked for', () => {
    const dir = mkdtempSync(join(tmpdir(), 'em-obs-peers-'));
    try {
      writeFileSync(join(dir, 'hide.cjs'), HIDE);
      writeFileSync(join(dir, 'probe.mts'), PROBE);
      const child = spawnSync(process.execPath, ['--require', join(dir, 'hide.cjs'), '--import', TSX, join(dir, 'probe.mts')], { encoding: 'utf8', timeout: 60_000 });
      assert.equal(child.status, 0, child.stderr);
      const result = JSON.parse(child.stdout.trim().split('\n').at(-1)!) as { isDefault: boolean; error?: { name: string; message: string }; ran: string };
      assert.equal(result.isDefault, true, 'no API: the no-op hooks themselves, no wrapper');
      assert.equal(result.ran, 'ran');
      assert.equal(result.error?.name, 'InvalidOptionsError');
      assert.equal(result.error?.message, 'platformRouter: option "metrics" needs prom-client, an optional peer dependency: run "npm install prom-client"');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
