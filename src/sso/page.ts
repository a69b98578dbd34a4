import type { Request, Response } from 'express';
import { safeMessage } from '../errors.js';

/** Why a sign-in or a dashboard visit was refused, for {@link SsoFailureHook}s. */
export interface SsoFailure {
  /** The HTTP status the default answer uses. */
  status: number;
  /** A stable reason to switch on. */
  reason: 'bad-request' | 'invalid-code' | 'no-access' | 'no-login' | 'expired' | 'other-resource' | 'connector' | 'not-configured' | 'internal';
  /** A message safe to show the user (never a code, token or secret). */
  message: string;
}

/**
 * Answers a refused sign-in or dashboard visit yourself, passport's `failureRedirect` way, e.g.
 * `(req, res, failure) => res.redirect(303, '/login-failed?reason=' + failure.reason)`.
 * It must answer the request (or call nothing and let it hang; do not).
 */
export type SsoFailureHook = (req: Request, res: Response, failure: SsoFailure) => void;

/**
 * The default answer of a failure: a small HTML page when the client prefers `text/html` (a
 * browser following the marketplace's link), JSON `{message}` otherwise.
 */
export function answerFailure(req: Request, res: Response, failure: SsoFailure, hook: SsoFailureHook | undefined): void {
  if (hook !== undefined) {
    hook(req, res, failure);
    return;
  }
  res.status(failure.status);
  if (req.accepts(['application/json', 'text/html']) === 'text/html') {
    res.type('html').send(errorPage(failure));
    return;
  }
  res.json({ message: failure.message });
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);
}

function errorPage(failure: SsoFailure): string {
  const message = escapeHtml(safeMessage(failure.message));
  const title = failure.status >= 500 ? 'Something went wrong' : 'Sign-in did not work';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${title}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}p{line-height:1.5}small{color:#666}</style>
</head><body><h1>${title}</h1><p>${message}</p><p><small>Error ${failure.status}</small></p></body></html>
`;
}
