/**
 * The two parts of an HTTP Basic `Authorization` header, exactly as sent (RFC 6749 §2.3.1 says they
 * are form-encoded first, but many clients skip that, so each caller decides how to read them).
 * `undefined`: the header is absent or not Basic; `null`: it is Basic but malformed.
 */
export function decodeBasicAuth(header: string | undefined): { user: string; password: string } | null | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic +([A-Za-z0-9+/]+=*) *$/i.exec(header);
  if (match?.[1] === undefined) return /^Basic(\s|$)/i.test(header) ? null : undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
