/**
 * Single sign-on (sections 4.3 and 4.5): the `GET /v1/sso` handler and the guard for the provider's
 * dashboard routes, on top of the host app's express-session.
 */
export { ssoHandler, MAX_SSO_SESSION_MS, type SsoHandlerOptions } from './handler.js';
export { requireMarketplaceSession, type RequireMarketplaceSessionOptions } from './guard.js';
export type { SsoFailure, SsoFailureHook } from './page.js';
export {
  assertSessionMiddleware,
  getMarketplaceSession,
  type MarketplaceLocals,
  type MarketplaceSessionData,
} from './session.js';
