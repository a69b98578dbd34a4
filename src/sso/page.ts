import type { Request, Response } from 'express';
import { errorPage, type SsoFailure } from './failure.js';

export type { SsoFailure } from './failure.js';

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
