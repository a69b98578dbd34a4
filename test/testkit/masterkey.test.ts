import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { generateMasterKey, MasterKeyError, parseMasterKey, readMasterKey, toMasterKeyFile, writeMasterKey } from '../../src/testkit/masterkey.js';

describe('masterkey.json', () => {
  const key = generateMasterKey();
  const file = toMasterKeyFile(key);
  const seed = Buffer.from(key.privateKey, 'base64url');
  const pub = Buffer.from(key.publicKey, 'base64url');

  it('reads every encoding of the same key to the same base64url pair', () => {
    const forms = [
      file,
      { public_key: key.publicKey, private_key: key.privateKey },
      { public_key: pub.toString('base64'), private_key: seed.toString('base64') },
      { public_key: pub.toString('base64url'), private_key: Buffer.concat([seed, pub]).toString('base64url') },
      { public_key: ` ${file.public_key}\n`, private_key: file.private_key, comment: 'extra fields are ignored' },
    ];
    for (const form of forms) assert.deepEqual(parseMasterKey(form), key, JSON.stringify(form));
  });

  it('writes the Go tool\'s layout: standard base64, 64-byte private key', () => {
    assert.equal(Buffer.from(file.public_key, 'base64').length, 32);
    assert.deepEqual(Buffer.from(file.private_key, 'base64'), Buffer.concat([seed, pub]));
  });

  it('refuses malformed or mismatched keys with a message that names the field', () => {
    const other = generateKeyPair();
    const bad: [unknown, RegExp][] = [
      [null, /expected a JSON object/],
      [{ public_key: file.public_key }, /"private_key" is missing/],
      [{ public_key: 'short', private_key: file.private_key }, /"public_key" must be a 32-byte/],
      [{ public_key: file.public_key, private_key: 'not base64!' }, /"private_key" must be a 32-byte seed or a 64-byte/],
      [{ public_key: file.public_key, private_key: Buffer.alloc(48).toString('base64') }, /"private_key" must be/],
      [{ public_key: other.publicKey, private_key: key.privateKey }, /does not belong to "public_key".*keygen --force/],
      [{ public_key: file.public_key, private_key: Buffer.concat([seed, Buffer.from(other.publicKey, 'base64url')]).toString('base64') }, /does not belong/],
      [{ public_key: `${key.publicKey.slice(0, 10)}+/${key.publicKey.slice(12)}-`, private_key: key.privateKey }, /"public_key" must be/],
    ];
    for (const [json, message] of bad) assert.throws(() => parseMasterKey(json, 'k.json'), (err: unknown) => err instanceof MasterKeyError && message.test(err.message) && err.message.startsWith('k.json'));
    for (const [json] of bad) {
      try {
        parseMasterKey(json);
      } catch (err) {
        assert.equal((err as Error).message.includes(file.private_key), false, 'never echoes the private key');
      }
    }
  });

  it('writes only when absent unless forced, and reads back what it wrote', () => {
    const dir = mkdtempSync(join(tmpdir(), 'em-mk-'));
    try {
      const path = join(dir, 'masterkey.json');
      assert.throws(() => readMasterKey(path), /not found: create one with `embedded-marketplace keygen`/);
      const written = writeMasterKey(path, { key });
      assert.deepEqual(readMasterKey(path), written);
      assert.throws(() => writeMasterKey(path), /already exists.*--force/);
      assert.deepEqual(readMasterKey(path), key, 'unchanged after a refused write');
      const replaced = writeMasterKey(path, { force: true });
      assert.notDeepEqual(replaced, key);
      assert.deepEqual(readMasterKey(path), replaced);
      writeFileSync(path, '{ nope');
      assert.throws(() => readMasterKey(path), /is not valid JSON/);
      assert.match(readFileSync(path, 'utf8'), /nope/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
