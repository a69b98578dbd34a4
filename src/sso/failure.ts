/**
 * A refused sign-in or dashboard visit, framework-free: the reason, and the default answer (a small
 * HTML page for browsers, JSON `{message}` for everything else). The Express shell is page.ts.
 */
import { safeMessage } from '../errors.js';

/** Why a sign-in or a dashboard visit was refused, for the failure hooks. */
export interface SsoFailure {
  /** The HTTP status the default answer uses. */
  status: number;
  /** A stable reason to switch on. */
  reason: 'bad-request' | 'invalid-code' | 'no-access' | 'no-login' | 'expired' | 'other-resource' | 'connector' | 'not-configured' | 'internal';
  /** A message safe to show the user (never a code, token or secret). */
  message: string;
}

/**
 * Whether an Accept header prefers `text/html` to `application/json`, as Express's
 * `req.accepts(['application/json', 'text/html'])` decides: the higher quality wins, the more
 * specific range sets a type's quality, and a tie (or no Accept at all) goes to JSON.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (accept === undefined || accept.length === 0) return false;
  const html = quality(accept, 'text', 'html');
  return html > 0 && html > quality(accept, 'application', 'json');
}

function quality(accept: string, type: string, subtype: string): number {
  let best = -1;
  let q = 0;
  for (const range of accept.split(',')) {
    const [media = '', ...params] = range.split(';');
    const [t = '', s = ''] = media.trim().toLowerCase().split('/');
    const specificity = t === type && s === subtype ? 2 : t === type && s === '*' ? 1 : t === '*' && s === '*' ? 0 : -1;
    if (specificity < best || specificity === -1) continue;
    let value = 1;
    for (const param of params) {
      const [name = '', raw = ''] = param.split('=');
      if (name.trim().toLowerCase() === 'q') value = Number(raw.trim());
    }
    if (!Number.isFinite(value)) value = 0;
    // The most specific range sets the quality; among equally specific ones, the first.
    if (specificity > best) {
      best = specificity;
      q = value;
    }
  }
  return q;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);
}

/** The HTML page a browser gets for a failure. */
export function errorPage(failure: SsoFailure): string {
  const message = escapeHtml(safeMessage(failure.message));
  const title = failure.status >= 500 ? 'Something went wrong' : 'Sign-in did not work';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${title}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}p{line-height:1.5}small{color:#666}</style>
</head><body><h1>${title}</h1><p>${message}</p><p><small>Error ${failure.status}</small></p></body></html>
`;
}
