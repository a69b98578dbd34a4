import type { Logger } from 'pino';
import { createRedactingLogger } from '../../src/lib/logger.js';

export { listen, type Running } from '../helpers/http.js';

/** A logger with the package's redaction whose JSON lines stay in memory. */
export function capturedLogger(level = 'debug'): { logger: Logger; lines: string[]; text(): string; entries(): Record<string, unknown>[] } {
  const lines: string[] = [];
  const logger = createRedactingLogger({ write: (line: string) => void lines.push(line) }, level);
  return {
    logger,
    lines,
    text: () => lines.join(''),
    entries: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

/** A clock tests move by hand. */
export function manualClock(start = Date.UTC(2024, 0, 15, 12, 0, 0)) {
  let current = start;
  return {
    now: () => current,
    advance(ms: number) {
      current += ms;
    },
  };
}
