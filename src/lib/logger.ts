import { pino, symbols, type Logger, type LoggerOptions } from 'pino';
import { compileRedaction } from './redact.js';

export type { Logger } from 'pino';

/**
 * Paths blanked out wherever they appear in a log object or a child logger's bindings (pino's
 * path syntax, so a host app can hand them to its own pino's `redact`). Secrets must never reach a log line;
 * redaction is the safety net, not the plan: code should not put secrets into log objects at all.
 */
export const REDACT_PATHS: readonly string[] = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'headers["x-signature"]',
  'req.headers["x-signature"]',
  'headers.cookie',
  'req.headers.cookie',
  'headers["set-cookie"]',
  'credentials',
  '*.credentials',
  'values',
  'token',
  'access_token',
  'refresh_token',
  'client_secret',
  'clientSecret',
  'sessionId',
  // SSO and OAuth authorization codes, by where they travel: query strings and form fields. A bare
  // `code` is the error code, which operators need, so it is never redacted.
  'query.code',
  'req.query.code',
  'form.code',
  'body.code',
  'req.body.code',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.client_secret',
  '*.clientSecret',
];

/**
 * The logger the library uses when the host app gives none: JSON lines at `info`, secrets redacted.
 * `false` from the host turns logging off entirely (a silent pino costs next to nothing).
 */
export function createLogger(option: Logger | false | undefined, bindings: Record<string, unknown> = {}): Logger {
  if (option === false) return pino({ level: 'silent' });
  if (option !== undefined) return Object.keys(bindings).length > 0 ? rebind(option, bindings) : option;
  return redacting({ level: process.env.LOG_LEVEL ?? 'info', base: { lib: 'embedded-marketplace', ...bindings } });
}

const CENSOR = '[redacted]';
const redact = compileRedaction(REDACT_PATHS, CENSOR);

/**
 * A pino logger that blanks out {@link REDACT_PATHS} with the package's compiled redaction
 * (lib/redact.ts) rather than pino's `redact` option, which costs about 10 µs and 16 KB of garbage
 * per line with these paths, on every request's line. The same places are covered: the object
 * of each line (`formatters.log`), the root's bindings (`formatters.bindings`), and the bindings
 * of every child: pino makes a child with `Object.create(parent)`, so the `child` set on the
 * root here is the one every descendant calls.
 */
function redacting(options: LoggerOptions, stream?: NodeJS.WritableStream | { write(line: string): void }): Logger {
  const logger = pino({ ...options, formatters: { log: redact, bindings: redact } }, stream as NodeJS.WritableStream);
  const child = logger.child;
  logger.child = function redactedChild(this: Logger, bindings, childOptions) {
    return child.call(this, redact(bindings), childOptions);
  } as Logger['child'];
  return logger;
}

/**
 * `logger.child(bindings)`, except that a key the parent already binds is replaced rather than
 * repeated: pino appends bindings, so "component" bound by the router and again by the signature
 * middleware it mounts would appear twice in every line. The inner (more specific) value stays.
 */
function rebind(parent: Logger, bindings: Record<string, unknown>): Logger {
  const bound = parent.bindings();
  const child = parent.child(bindings);
  const repeated = Object.keys(bindings).filter((key) => Object.hasOwn(bound, key));
  if (repeated.length === 0) return child;
  const holder = child as unknown as Record<symbol, unknown>;
  let text = holder[symbols.chindingsSym] as string;
  for (const key of repeated) {
    // The parent's occurrence comes first; drop it, keep the child's.
    const earlier = `,${JSON.stringify(key)}:${JSON.stringify(bound[key])}`;
    const at = text.indexOf(earlier);
    if (at !== -1) text = text.slice(0, at) + text.slice(at + earlier.length);
  }
  holder[symbols.chindingsSym] = text;
  return child;
}

/** A logger with the package's redaction rules that writes to `stream`: for host apps and tests. */
export function createRedactingLogger(stream: NodeJS.WritableStream | { write(line: string): void }, level = 'info'): Logger {
  return redacting({ level }, stream);
}

/** Longest attacker-controlled text (path ids, header values) written into a log field. */
export const MAX_LOGGED_TEXT = 80;

/**
 * Attacker-controlled text for a log field: cut to {@link MAX_LOGGED_TEXT} characters with the
 * original length noted, so an unsigned request cannot write kilobyte-long lines.
 *
 * @example
 * ```ts
 * logger.info({ id: truncateForLog(req.params.id) }, 'refused');
 * ```
 */
export function truncateForLog(value: unknown, max = MAX_LOGGED_TEXT): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = typeof value === 'string' ? value : Array.isArray(value) ? value.join(', ') : String(value);
  return text.length <= max ? text : `${text.slice(0, max)}…(${text.length} chars)`;
}
