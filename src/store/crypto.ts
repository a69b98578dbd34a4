import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { InvalidOptionsError, MarketplaceError } from '../errors.js';
import { decodeBase64Any } from '../lib/base64.js';

/**
 * Encryption at rest for the secrets a durable store keeps: credential values and callback payloads
 * (which carry credentials when they complete a credential provisioning). AES-256-GCM, a fresh
 * random 96-bit IV per value, and the row it belongs to bound in as associated data, so a sealed
 * value copied onto another row fails to open just as a tampered one does.
 *
 * Sealed layout (version 1):
 *
 * ```
 * byte 0      format version (1)
 * byte 1      key id (0..255): which configured key sealed it
 * bytes 2-13  IV (12 random bytes)
 * bytes 14..  ciphertext of the JSON text
 * last 16     GCM authentication tag
 * ```
 *
 * The two header bytes are part of the associated data, so they cannot be altered either.
 */

const FORMAT_VERSION = 1;
const HEADER_BYTES = 2;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** The key id a plain (non-keyring) `encryptionKey` gets. */
export const DEFAULT_KEY_ID = 1;

/** How to make a key; quoted by every error about a missing or malformed one. */
export const ENCRYPTION_KEY_HINT =
  'generate one with: node -e "console.log(require(\'crypto\').randomBytes(32).toString(\'base64\'))" and keep it in a secret store (e.g. an environment variable), not in the database';

/** 32 raw bytes, or a string holding them as base64, base64url or hex. */
export type EncryptionKey = string | Uint8Array;

/**
 * Several keys at once, for rotation: new values are sealed with `current`; values sealed earlier
 * with a `previous` key still open. Key ids are 0..255 and are stored with every value.
 *
 * @example
 * ```ts
 * encryptionKey: {
 *   current: { id: 2, key: process.env.STORE_KEY_2! },
 *   previous: [{ id: 1, key: process.env.STORE_KEY_1! }],
 * }
 * ```
 */
export interface EncryptionKeyring {
  current: { id: number; key: EncryptionKey };
  previous?: readonly { id: number; key: EncryptionKey }[];
}

/** The `encryptionKey` option of the durable stores: one key (id 1) or a keyring. */
export type EncryptionKeyOption = EncryptionKey | EncryptionKeyring;

/** Seals and opens JSON values. `context` names the row (e.g. `credential:<id>`) and must match. */
export interface SecretCipher {
  /** The key id new values are sealed with. */
  readonly keyId: number;
  seal(value: unknown, context: string): Buffer;
  open<T = unknown>(sealed: Uint8Array, context: string): T;
}

/**
 * 500: a stored secret could not be opened: it was sealed with a key that is not configured, the
 * key is wrong, or the stored bytes were altered. The message never contains the secret.
 */
export class DecryptionError extends MarketplaceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(500, 'ERR_DECRYPTION_FAILED', message, options);
  }
}

function decodeKey(key: unknown, where: string): Buffer {
  if (key instanceof Uint8Array) {
    if (key.length !== KEY_BYTES) throw new InvalidOptionsError(`${where} must be ${KEY_BYTES} bytes, got ${key.length}; ${ENCRYPTION_KEY_HINT}`);
    return Buffer.from(key);
  }
  if (typeof key !== 'string') {
    throw new InvalidOptionsError(`${where} must be a string (base64 or hex of ${KEY_BYTES} bytes) or ${KEY_BYTES} bytes; ${ENCRYPTION_KEY_HINT}`);
  }
  const text = key.trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  // A strict decoder: Buffer.from(…, 'base64') skips characters it does not know, so a typo
  // could silently yield a different key.
  const bytes = decodeBase64Any(text);
  if (bytes?.length === KEY_BYTES) return bytes;
  // Never echo the value: it may be a real key with one character missing.
  throw new InvalidOptionsError(`${where} is not ${KEY_BYTES} bytes in base64, base64url or hex (got ${text.length} characters); ${ENCRYPTION_KEY_HINT}`);
}

function checkKeyId(id: unknown, where: string): number {
  if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 255) {
    throw new InvalidOptionsError(`${where} must be an integer from 0 to 255`);
  }
  return id;
}

/**
 * Reads an `encryptionKey` option into key id → key bytes, validating it. `optionName` is used in
 * error messages (e.g. `sqliteStore: encryptionKey`).
 */
export function resolveEncryptionKeys(option: unknown, optionName = 'encryptionKey'): { currentId: number; keys: Map<number, Buffer> } {
  if (option === undefined || option === null || option === '') {
    throw new InvalidOptionsError(`${optionName} is required: a durable store encrypts credential values at rest; ${ENCRYPTION_KEY_HINT}`);
  }
  const keys = new Map<number, Buffer>();
  if (typeof option === 'string' || option instanceof Uint8Array) {
    keys.set(DEFAULT_KEY_ID, decodeKey(option, optionName));
    return { currentId: DEFAULT_KEY_ID, keys };
  }
  if (typeof option !== 'object') throw new InvalidOptionsError(`${optionName} must be a key string, ${KEY_BYTES} bytes or { current, previous }; ${ENCRYPTION_KEY_HINT}`);
  const ring = option as Partial<EncryptionKeyring>;
  for (const name of Object.keys(ring)) {
    if (name !== 'current' && name !== 'previous') throw new InvalidOptionsError(`${optionName}: unknown field "${name}" (expected current, previous)`);
  }
  if (typeof ring.current !== 'object' || ring.current === null) {
    throw new InvalidOptionsError(`${optionName}.current is required: { id, key }`);
  }
  const currentId = checkKeyId(ring.current.id, `${optionName}.current.id`);
  keys.set(currentId, decodeKey(ring.current.key, `${optionName}.current.key`));
  if (ring.previous !== undefined) {
    if (!Array.isArray(ring.previous)) throw new InvalidOptionsError(`${optionName}.previous must be an array of { id, key }`);
    ring.previous.forEach((entry: unknown, index) => {
      const where = `${optionName}.previous[${index}]`;
      if (typeof entry !== 'object' || entry === null) throw new InvalidOptionsError(`${where} must be { id, key }`);
      const { id, key } = entry as { id?: unknown; key?: unknown };
      const checked = checkKeyId(id, `${where}.id`);
      if (keys.has(checked)) throw new InvalidOptionsError(`${where}.id ${checked} is used twice: every key needs its own id`);
      keys.set(checked, decodeKey(key, `${where}.key`));
    });
  }
  return { currentId, keys };
}

/**
 * Creates the AES-256-GCM cipher a durable store uses for secrets. Throws InvalidOptionsError for a
 * missing or malformed key.
 *
 * @example
 * ```ts
 * const cipher = createCipher(process.env.STORE_ENCRYPTION_KEY!);
 * const sealed = cipher.seal({ DB_URL: 'postgres://…' }, 'credential:abc');
 * cipher.open(sealed, 'credential:abc'); // { DB_URL: 'postgres://…' }
 * ```
 */
export function createCipher(key: EncryptionKeyOption, optionName = 'encryptionKey'): SecretCipher {
  const { currentId, keys } = resolveEncryptionKeys(key, optionName);
  const currentKey = keys.get(currentId)!;

  function aad(header: Uint8Array, context: string): Buffer {
    return Buffer.concat([header, Buffer.from(context, 'utf8')]);
  }

  return {
    keyId: currentId,

    seal(value, context) {
      const header = Buffer.from([FORMAT_VERSION, currentId]);
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', currentKey, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(aad(header, context));
      const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
      return Buffer.concat([header, iv, body, cipher.getAuthTag()]);
    },

    open<T>(sealed: Uint8Array, context: string): T {
      const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
      if (bytes.length < HEADER_BYTES + IV_BYTES + TAG_BYTES || bytes[0] !== FORMAT_VERSION) {
        throw new DecryptionError('A stored secret is not in a known sealed format (damaged data?)');
      }
      const keyId = bytes[1]!;
      const keyBytes = keys.get(keyId);
      if (keyBytes === undefined) {
        throw new DecryptionError(`A stored secret was sealed with encryption key id ${keyId}, which is not configured: add it to encryptionKey.previous`);
      }
      const header = bytes.subarray(0, HEADER_BYTES);
      const iv = bytes.subarray(HEADER_BYTES, HEADER_BYTES + IV_BYTES);
      const tag = bytes.subarray(bytes.length - TAG_BYTES);
      const body = bytes.subarray(HEADER_BYTES + IV_BYTES, bytes.length - TAG_BYTES);
      let text: string;
      try {
        const decipher = createDecipheriv('aes-256-gcm', keyBytes, iv, { authTagLength: TAG_BYTES });
        decipher.setAAD(aad(header, context));
        decipher.setAuthTag(tag);
        text = Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
      } catch (error) {
        throw new DecryptionError(`A stored secret failed authentication with encryption key id ${keyId}: wrong key, or the stored data was altered`, { cause: error });
      }
      return JSON.parse(text) as T;
    },
  };
}

/** A new random key as base64, suitable for `encryptionKey`. */
export function generateEncryptionKey(): string {
  return randomBytes(KEY_BYTES).toString('base64');
}

/**
 * The cipher of a store opened with `encryptionKey: false` (diagnostics only, e.g. an operator's
 * CLI): sealing or opening any secret throws, saying why, instead of writing or reading garbage.
 */
export function keylessCipher(factory: string): SecretCipher {
  const refuse = (): never => {
    throw new MissingEncryptionKeyError(
      `${factory} was opened without an encryption key (encryptionKey: false), for diagnostics only: it cannot read or write credentials, callback payloads or recorded answers`,
    );
  };
  return { keyId: 0, seal: refuse, open: refuse };
}

/**
 * 500 (`ERR_DECRYPTION_FAILED`, as any secret that cannot be opened): a store opened for
 * diagnostics only (`encryptionKey: false`) was asked to read or write a secret.
 */
export class MissingEncryptionKeyError extends DecryptionError {}

/** The `encryptionKey` option of a durable store: a key, a keyring, or `false` for a diagnostics-only store. */
export function storeCipher(factory: string, option: unknown): SecretCipher {
  return option === false ? keylessCipher(factory) : createCipher(option as EncryptionKeyOption, `${factory}: option "encryptionKey"`);
}
