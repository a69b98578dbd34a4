/**
 * "Stores report, the engine decides" (issue 19), read from the sources: no file under src/store
 * imports or raises an HTTP decision (409, 404, a lost lease…); they answer outcomes, and only the
 * engine maps them to errors and statuses. And the PL/pgSQL port of the claim rule says what the
 * TypeScript rule says.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { CONFLICT_PENDING_MESSAGE, CONFLICT_RUNNING_MESSAGE, PENDING_FALLBACK_MESSAGE } from '../../src/idempotency/claim-rule.js';
import { claimShape } from '../../src/idempotency/operations.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/migrations/postgres.js';
import type { OperationKind } from '../../src/store/types.js';

const STORE = resolve(import.meta.dirname, '../../src/store');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sources(full));
    else if (name.endsWith('.ts')) out.push(full);
  }
  return out;
}

/**
 * What a store may take from the error family: the option error thrown at construction, the one
 * infrastructure error (the database cannot be reached: 503, retry later, answered the same on
 * every method, so it stays an exception rather than an outcome of each), and the base class
 * (crypto.ts derives DecryptionError from it; connection.ts passes such errors through).
 */
const ALLOWED = new Set(['InvalidOptionsError', 'ServiceUnavailableError', 'MarketplaceError']);
const DECISIONS = ['ConflictError', 'NotFoundError', 'LeaseLostError', 'BadRequestError', 'UnauthorizedError', 'ForbiddenError', 'SignatureError', 'InternalError', 'OperationConflictError', 'OperationInProgressError'];

describe('stores report outcomes', () => {
  const files = sources(STORE);

  it('no file under src/store imports an HTTP error class but the allowed ones', () => {
    assert.ok(files.length >= 10, 'the store sources were found');
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']*errors\.js)'/g)) {
        const names = match[1]!.split(',').map((name) => name.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]!).filter((name) => name.length > 0);
        for (const name of names) assert.ok(ALLOWED.has(name), `${relative(STORE, file)} imports ${name} from ${match[2]}`);
      }
    }
  });

  it('no store file but the SQL migrations names an operation kind: the descriptors say what the claim needs', () => {
    for (const file of files.filter((path) => !path.includes('/migrations/'))) {
      const text = readFileSync(file, 'utf8');
      for (const kind of ['provision', 'changePlan', 'deprovision', 'provisionCredentials', 'deprovisionCredentials']) {
        assert.equal(text.includes(`'${kind}'`), false, `${relative(STORE, file)} names '${kind}'`);
      }
    }
  });

  it('no file under src/store raises or names an HTTP decision', () => {
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const name of [...DECISIONS, 'entityDeletedError']) {
        assert.equal(new RegExp(`\\b${name}\\b`).test(text), false, `${relative(STORE, file)} names ${name}`);
      }
    }
  });
});

describe('the PL/pgSQL port of the claim rule (migration 5)', () => {
  const migration = POSTGRES_MIGRATIONS.find((m) => m.version === 5);

  it('answers the rule\'s own messages', () => {
    assert.ok(migration !== undefined);
    for (const message of [CONFLICT_PENDING_MESSAGE, CONFLICT_RUNNING_MESSAGE, PENDING_FALLBACK_MESSAGE]) {
      assert.ok(migration.sql.includes(`'${message}'`), `migration 5 carries "${message}"`);
    }
  });

  it('names the kinds the descriptors name: deprovision alone keeps children out, credential keys are children', () => {
    assert.ok(migration !== undefined);
    const kinds: OperationKind[] = ['provision', 'changePlan', 'deprovision', 'provisionCredentials', 'deprovisionCredentials'];
    const excluding = kinds.filter((kind) => claimShape(kind).excludesChildren === true);
    assert.deepEqual(excluding, ['deprovision']);
    const named = new Set([...migration.sql.matchAll(/kind = '([A-Za-z]+)'/g)].map((m) => m[1]));
    assert.deepEqual([...named], ['deprovision'], 'the port names no other kind');
    for (const kind of kinds) {
      assert.equal(claimShape(kind).entity === 'credential', kind.endsWith('Credentials'), `${kind}: entity`);
    }
    assert.ok(migration.sql.includes("LIKE 'credential:%'"));
  });
});
