import { readFileSync, writeFileSync } from 'node:fs';
import { decodeBase64Any } from '../lib/base64.js';
import { generateKeyPair, publicKeyOf } from './keys.js';

/** The file `keygen` writes and `test`, `serve` and `curl` read, in the current directory by default. */
export const DEFAULT_MASTER_KEY_FILE = 'masterkey.json';

/**
 * A test master key pair, both halves as unpadded base64url: `publicKey` is the 32-byte Ed25519
 * public key (give it to the provider as MASTER_PUBLIC_KEY), `privateKey` the 32-byte seed (what
 * `createSigner({ masterPrivateKey })` takes).
 */
export interface MasterKey {
  publicKey: string;
  privateKey: string;
}

/**
 * The on-disk layout, as the marketplace's old Go tool wrote it: standard padded base64, with
 * `private_key` the 64-byte Ed25519 private key (seed followed by public key).
 */
export interface MasterKeyFile {
  public_key: string;
  private_key: string;
}

/** A master key file that is missing, unreadable or malformed; the message says what to do. */
export class MasterKeyError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MasterKeyError';
  }
}

/**
 * A fresh test master key pair.
 *
 * @example
 * ```ts
 * const key = generateMasterKey();
 * const provider = createProviderApp({ MASTER_PUBLIC_KEY: key.publicKey });
 * ```
 */
export function generateMasterKey(): MasterKey {
  return generateKeyPair();
}

/**
 * Reads a master key from the parsed JSON of a `masterkey.json`. Accepts standard base64 and
 * base64url, and a private key given as the 32-byte seed or as the 64-byte seed+public form; checks
 * that the two halves belong together.
 */
export function parseMasterKey(json: unknown, source = DEFAULT_MASTER_KEY_FILE): MasterKey {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new MasterKeyError(`${source}: expected a JSON object with "public_key" and "private_key"`);
  }
  const record = json as Record<string, unknown>;
  const fields = ['public_key', 'private_key'] as const;
  for (const field of fields) {
    if (typeof record[field] !== 'string') throw new MasterKeyError(`${source}: "${field}" is missing or not a string`);
  }
  const publicKey = decodeBase64Any((record.public_key as string).trim());
  if (publicKey?.length !== 32) throw new MasterKeyError(`${source}: "public_key" must be a 32-byte Ed25519 key in base64 or base64url`);
  const privateKey = decodeBase64Any((record.private_key as string).trim());
  if (privateKey === undefined || (privateKey.length !== 32 && privateKey.length !== 64)) {
    throw new MasterKeyError(`${source}: "private_key" must be a 32-byte seed or a 64-byte Ed25519 private key in base64 or base64url`);
  }
  const seed = privateKey.subarray(0, 32);
  const derived = Buffer.from(publicKeyOf(seed.toString('base64url')), 'base64url');
  const embedded = privateKey.length === 64 ? privateKey.subarray(32) : derived;
  if (!derived.equals(publicKey) || !embedded.equals(publicKey)) {
    throw new MasterKeyError(`${source}: "private_key" does not belong to "public_key"; generate a new pair with \`embedded-marketplace keygen --force\``);
  }
  return { publicKey: publicKey.toString('base64url'), privateKey: seed.toString('base64url') };
}

/** The file layout for a key (standard base64, 64-byte private key), readable by the old Go tool too. */
export function toMasterKeyFile(key: MasterKey): MasterKeyFile {
  const publicKey = Buffer.from(key.publicKey, 'base64url');
  const seed = Buffer.from(key.privateKey, 'base64url');
  return { public_key: publicKey.toString('base64'), private_key: Buffer.concat([seed, publicKey]).toString('base64') };
}

/**
 * Reads `masterkey.json` (or another path).
 *
 * @example
 * ```ts
 * const { privateKey } = readMasterKey('masterkey.json');
 * const signer = createSigner({ masterPrivateKey: privateKey });
 * ```
 */
export function readMasterKey(path = DEFAULT_MASTER_KEY_FILE): MasterKey {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new MasterKeyError(`${path} not found: create one with \`embedded-marketplace keygen\` or pass --master-key FILE`, { cause: err });
    }
    throw new MasterKeyError(`${path} could not be read: ${(err as Error).message}`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new MasterKeyError(`${path} is not valid JSON`, { cause: err });
  }
  return parseMasterKey(json, path);
}

/**
 * Writes a master key file (a fresh key unless `key` is given), readable only by its owner. Refuses
 * to replace an existing file unless `force`: it may be the key a provider already trusts.
 */
export function writeMasterKey(path = DEFAULT_MASTER_KEY_FILE, options: { key?: MasterKey; force?: boolean } = {}): MasterKey {
  const key = options.key ?? generateMasterKey();
  const text = `${JSON.stringify(toMasterKeyFile(key), null, 2)}\n`;
  try {
    writeFileSync(path, text, { mode: 0o600, flag: options.force === true ? 'w' : 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new MasterKeyError(`${path} already exists; it may be the key your provider trusts. Use --force to replace it`, { cause: err });
    }
    throw new MasterKeyError(`${path} could not be written: ${(err as Error).message}`, { cause: err });
  }
  return key;
}
