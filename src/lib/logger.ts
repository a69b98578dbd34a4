import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino blanks out wherever they appear in a log object. Secrets must never reach a log line;
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
  'code',
  'sessionId',
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
  if (option !== undefined) return Object.keys(bindings).length > 0 ? option.child(bindings) : option;
  const options: LoggerOptions = {
    level: process.env.LOG_LEVEL ?? 'info',
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    base: { lib: 'embedded-marketplace', ...bindings },
  };
  return pino(options);
}

/** A logger with the package's redaction rules that writes to `stream`: for host apps and tests. */
export function createRedactingLogger(stream: NodeJS.WritableStream | { write(line: string): void }, level = 'info'): Logger {
  return pino({ level, redact: { paths: [...REDACT_PATHS], censor: '[redacted]' } }, stream as NodeJS.WritableStream);
}
