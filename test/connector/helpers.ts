import { pino, type Logger } from 'pino';

/**
 * A logger that keeps every line, at trace level and WITHOUT redaction: secret-leak tests use it so
 * that they prove the code never logs a secret, instead of relying on the redaction safety net.
 */
export function captureLogs(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (line: string) => { lines.push(line); } });
  return { logger, lines };
}

/** A settable test clock. */
export function testClock(start = Date.parse('2030-01-01T00:00:00Z')): { now: () => number; advance(ms: number): void; set(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => { t += ms; }, set: (ms) => { t = ms; } };
}

/** HTTP Basic credentials the way RFC 6749 §2.3.1 wants them (form-urlencoded first). */
export function basicAuth(id: string, secret: string): string {
  const enc = (v: string): string => new URLSearchParams({ v }).toString().slice(2);
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64')}`;
}
