/**
 * Log redaction (src/lib/redact.ts): pino's path syntax compiled once; a value a path names is
 * blanked out in a copy, the caller's object is never changed, and an object no path names is
 * passed on as it is. Then the package's loggers (src/lib/logger.ts), which use it for every line
 * and every child's bindings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileRedaction } from '../../src/lib/redact.js';
import { createLogger, createRedactingLogger, REDACT_PATHS } from '../../src/lib/logger.js';

const X = '[x]';

describe('compileRedaction', () => {
  it('blanks out top-level, nested, quoted and wildcard paths', () => {
    const redact = compileRedaction(['token', 'headers.authorization', 'headers["x-signature"]', '*.secret', "a['b.c'].d"], X);
    const out = redact({
      token: 't', keep: 1,
      headers: { authorization: 'Bearer t', 'x-signature': 's', accept: 'json' },
      user: { secret: 's', name: 'n' }, list: [{ secret: 'no: two levels down' }],
      a: { 'b.c': { d: 'deep', e: 'kept' } },
    });
    assert.deepEqual(out, {
      token: X, keep: 1,
      headers: { authorization: X, 'x-signature': X, accept: 'json' },
      user: { secret: X, name: 'n' }, list: [{ secret: 'no: two levels down' }],
      a: { 'b.c': { d: X, e: 'kept' } },
    });
  });

  it('answers the very object when no path names any of its keys, and never changes the caller\'s', () => {
    const redact = compileRedaction(['token', '*.token'], X);
    const line = { method: 'PUT', route: '/v1/resources/:id', status: 201, nested: { id: 'r1' } };
    assert.equal(redact(line), line);
    const secret = { token: 't', nested: { token: 'u', id: 'r1' }, other: { id: 'o' } };
    const out = redact(secret);
    assert.notEqual(out, secret);
    assert.deepEqual(secret, { token: 't', nested: { token: 'u', id: 'r1' }, other: { id: 'o' } }, 'the original untouched');
    assert.equal(out.other, secret.other, 'branches without a secret are shared, not copied');
  });

  it('blanks a key only where it is: no key is added', () => {
    const redact = compileRedaction(['token', 'headers.cookie'], X);
    assert.deepEqual(redact({ headers: { accept: 'json' } }), { headers: { accept: 'json' } });
    assert.equal(redact(null), null);
    assert.equal(redact('token'), 'token');
  });

  it('walks arrays under a wildcard, and keeps an array an array', () => {
    const redact = compileRedaction(['*.token'], X);
    const out = redact<{ items: unknown[] }>({ items: [{ token: 'a' }, 'plain'] });
    assert.ok(Array.isArray(out.items));
    assert.deepEqual(out, { items: [{ token: 'a' }, 'plain'] }, 'index 0 is one level below "items": "*.token" means items.token');
    const top = compileRedaction(['*.token'], X)([{ token: 'a' }, { id: 1 }]);
    assert.deepEqual(top, [{ token: X }, { id: 1 }]);
  });

  it('keeps an error an error, with its message and stack, when it carries a secret property', () => {
    const redact = compileRedaction(['*.token'], X);
    const error = Object.assign(new Error('boom'), { token: 't' });
    const out = redact<{ err: Error & { token: string } }>({ err: error });
    assert.ok(out.err instanceof Error);
    assert.equal(out.err.message, 'boom');
    assert.equal(out.err.stack, error.stack);
    assert.equal(out.err.token, X);
    assert.equal(error.token, 't');
  });

  it('copies a frozen object to redact it, and replaces an object it cannot read', () => {
    const redact = compileRedaction(['*.token'], X);
    class Holder {
      constructor(readonly token: string) {}
    }
    const frozen = Object.freeze(new Holder('t'));
    const out = redact<{ holder: Holder }>({ holder: frozen });
    assert.ok(out.holder instanceof Holder);
    assert.equal(out.holder.token, X);
    const hostile = { id: 'VISIBLE-ID', get token(): string { throw new Error('getter failed'); } };
    const unreadable = redact({ hostile }) as Record<string, unknown>;
    assert.ok(!JSON.stringify(unreadable).includes('VISIBLE-ID'), 'nothing of the object is passed on');
    assert.match(String(unreadable.redaction), /failed/);
  });

  it('refuses paths it cannot read', () => {
    assert.throws(() => compileRedaction(['a..b'], X), /empty segment/);
    assert.throws(() => compileRedaction(['a["b'], X), /unclosed bracket/);
    assert.throws(() => compileRedaction(['a.*'], X), /ends with/);
    assert.throws(() => compileRedaction([''], X), /empty/);
  });
});

describe('the package loggers', () => {
  const capture = () => {
    const lines: string[] = [];
    return { lines, stream: { write: (line: string) => void lines.push(line) } };
  };

  it('blank out every one of REDACT_PATHS in a line', () => {
    const { lines, stream } = capture();
    const logger = createRedactingLogger(stream);
    for (const path of REDACT_PATHS) {
      // Builds { a: { b: 'SECRET-<path>' } } from a path, with `*` as some key.
      const parts = path.replace(/\["([^"]+)"\]/g, '.$1').split('.').map((part) => (part === '*' ? 'anything' : part));
      const secret = `SECRET-${path}`;
      const object = parts.reduceRight<unknown>((value, key) => ({ [key]: value }), secret) as Record<string, unknown>;
      logger.info(object, 'line');
      const line = lines.at(-1)!;
      assert.ok(!line.includes(secret), `${path} leaked: ${line}`);
      assert.ok(line.includes('[redacted]'), `${path} not blanked out: ${line}`);
    }
  });

  it('blank out secrets in the bindings of children and grandchildren', () => {
    const { lines, stream } = capture();
    const logger = createRedactingLogger(stream);
    logger.child({ token: 'SECRET1', component: 'c' }).child({ nested: { client_secret: 'SECRET2' } }).info({ id: 'r1' }, 'x');
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(line.token, '[redacted]');
    assert.deepEqual(line.nested, { client_secret: '[redacted]' });
    assert.equal(line.component, 'c');
    assert.equal(line.id, 'r1');
  });

  it('keep the error code and the request line as they are', () => {
    const { lines, stream } = capture();
    createRedactingLogger(stream).info({ method: 'PUT', route: '/v1/resources/:id', status: 409, code: 'ERR_OPERATION_CONFLICT' }, 'marketplace request');
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(line.code, 'ERR_OPERATION_CONFLICT');
    assert.equal(line.status, 409);
  });

  it('the default logger is silent with false and redacts otherwise', () => {
    assert.equal(createLogger(false).level, 'silent');
    const logger = createLogger(undefined, { component: 'test' });
    assert.equal(typeof logger.child, 'function');
    assert.equal(logger.child({ a: 1 }).bindings().component, 'test');
  });
});
