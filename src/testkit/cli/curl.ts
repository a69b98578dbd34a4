import { createSigner } from '../signer.js';
import { EXIT, loadMasterKey, parse, UsageError, type CliIo } from './io.js';

export const CURL_USAGE = `Usage: embedded-marketplace curl METHOD URL [--data JSON] [--header "Name: value"]... [--master-key FILE]

Prints a ready-to-run curl command for a request signed like the marketplace signs it, with the
key in ./masterkey.json (or FILE). The signature holds for 5 minutes (the Date tolerance).

  --data JSON        request body (sent and signed byte for byte; Content-Type: application/json)
  --header "N: v"    an extra header to send and sign, e.g. "X-Callback-ID: abc" (repeatable)
  --master-key FILE  the master key file (default ./masterkey.json)

Example:
  embedded-marketplace curl PUT http://127.0.0.1:4567/v1/resources/r1 \\
    --data '{"id":"r1","product":"bonnets","plan":"small","region":"all::global","features":{}}'
`;

const METHOD = /^[A-Za-z]+$/;

/** Quotes a word for POSIX shells. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_\-.,:/@=%+]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** `curl`: prints a curl command line with fresh signature headers. */
export function curlCommand(args: string[], io: CliIo): number {
  const { values, positionals } = parse(args, {
    data: { type: 'string', short: 'd' },
    header: { type: 'string', short: 'H', multiple: true },
    'master-key': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) {
    io.stdout.write(CURL_USAGE);
    return EXIT.ok;
  }
  const [rawMethod, rawUrl, ...rest] = positionals;
  if (rawMethod === undefined || rawUrl === undefined) throw new UsageError('curl needs METHOD and URL, e.g. curl DELETE http://127.0.0.1:4567/v1/resources/r1');
  if (rest.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(rest[0])}`);
  if (!METHOD.test(rawMethod)) throw new UsageError(`METHOD must be an HTTP method such as PUT, got ${JSON.stringify(rawMethod)}`);
  const method = rawMethod.toUpperCase();
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new UsageError(`URL must be absolute, e.g. http://127.0.0.1:4567/v1/resources/r1, got ${JSON.stringify(rawUrl)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('URL must be http or https');
  const data = values.data;
  if (data !== undefined) {
    try {
      JSON.parse(data);
    } catch {
      throw new UsageError('--data must be valid JSON (the marketplace only sends JSON bodies)');
    }
  }
  const extra: Record<string, string> = {};
  if (data !== undefined) extra['content-type'] = 'application/json';
  for (const header of values.header ?? []) {
    const colon = header.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header must look like "Name: value", got ${JSON.stringify(header)}`);
    extra[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
  }
  const key = loadMasterKey(io, values['master-key']);
  const signer = createSigner({ masterPrivateKey: key.privateKey });
  let headers: Record<string, string>;
  try {
    headers = signer.sign({ method, url: `${url.pathname}${url.search}`, host: url.host, headers: extra, ...(data === undefined ? {} : { body: data }) });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const words = ['curl', '-sS', '-i', '-X', method, shellQuote(url.href)];
  const lines = [words.join(' ')];
  for (const [name, value] of Object.entries(headers)) lines.push(`-H ${shellQuote(`${name}: ${value}`)}`);
  // --data-binary sends the bytes exactly as signed (--data would strip newlines).
  if (data !== undefined) lines.push(`--data-binary ${shellQuote(data)}`);
  io.stdout.write(`${lines.join(' \\\n  ')}\n`);
  io.stderr.write('# signed now; valid for 5 minutes (the provider\'s Date tolerance)\n');
  return EXIT.ok;
}
