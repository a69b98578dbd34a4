import { resolve } from 'node:path';
import { DEFAULT_MASTER_KEY_FILE, MasterKeyError, toMasterKeyFile, writeMasterKey } from '../masterkey.js';
import { EXIT, parse, UsageError, type CliIo } from './io.js';

export const KEYGEN_USAGE = `Usage: embedded-marketplace keygen [--force] [--master-key FILE]

Writes a test master key pair to ./masterkey.json (or FILE): {"public_key", "private_key"}, the
layout of the marketplace's old Go tool. Give the public key to your provider as MASTER_PUBLIC_KEY.

  --force            replace an existing file (the provider then needs the new public key)
  --master-key FILE  where to write (default ./masterkey.json)
`;

/** `keygen`: writes masterkey.json, never over an existing file without --force. */
export function keygenCommand(args: string[], io: CliIo): number {
  const { values, positionals } = parse(args, {
    force: { type: 'boolean' },
    'master-key': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) {
    io.stdout.write(KEYGEN_USAGE);
    return EXIT.ok;
  }
  if (positionals.length > 0) throw new UsageError(`keygen takes no arguments, got ${JSON.stringify(positionals[0])}`);
  const path = resolve(io.cwd, values['master-key'] ?? DEFAULT_MASTER_KEY_FILE);
  try {
    const key = writeMasterKey(path, { force: values.force === true });
    const publicKey = toMasterKeyFile(key).public_key;
    io.stdout.write(`Wrote ${path} (keep it private: it signs requests your provider will trust).\n`);
    io.stdout.write(`Public key, for your provider's MASTER_PUBLIC_KEY:\n  ${publicKey}\n`);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof MasterKeyError) {
      io.stderr.write(`embedded-marketplace keygen: ${err.message}\n`);
      return EXIT.failed;
    }
    throw err;
  }
}
