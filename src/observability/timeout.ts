/** Thrown by {@link within} when the promise did not settle in time. */
export class Timeout extends Error {
  constructor(ms: number) {
    super(`No answer within ${ms} ms`);
    this.name = 'Timeout';
  }
}

/**
 * Settles like `promise`, or rejects with {@link Timeout} after `ms`: a store that hangs must not
 * hang a health probe or a scrape with it. The timer is cleared as soon as the promise settles; it
 * is not unref'd, so a script awaiting a check is not ended half-way by an empty event loop.
 */
export function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Timeout(ms)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
