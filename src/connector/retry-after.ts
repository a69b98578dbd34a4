/**
 * Parses a Retry-After header (RFC 9110 §10.2.3): either delay-seconds or an HTTP-date. Returns
 * the delay in milliseconds from `nowMs` (never negative), or `undefined` when the header is absent
 * or unreadable, so the caller falls back to its own backoff.
 *
 * @example
 * ```ts
 * parseRetryAfter('120', Date.now());                           // 120000
 * parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', Date.now()); // 0 (in the past)
 * ```
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : undefined;
  }
  // Only the date forms HTTP allows; Date.parse alone would also take "1" or "tomorrow"-like oddities.
  if (!/^[A-Za-z]{3,9},? [0-9A-Za-z :-]+(?: GMT)?$/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
