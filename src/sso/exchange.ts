/**
 * Single sign-on's steps that need no framework and no session (sections 4.3 and 4.5): check the
 * query, exchange the single-use code once (never retried), read the resource at the connector
 * with the new token and require it to be the one requested, and work out where the user lands.
 * The Express handler (handler.ts) keeps the login in express-session; the core (src/core) in its
 * sealed cookie or the host's session hooks.
 */
import { ConnectorError, isMarketplaceError } from '../errors.js';
import type { Logger } from '../lib/logger.js';
import type { AccessToken, ConnectorClient, ConnectorResource } from '../connector/client.js';
import { ID_PATTERN } from '../domain/schemas.js';
import type { SsoFailure } from './failure.js';

/**
 * What a marketplace login keeps in the host app's session. Server-side only: express-session
 * stores the data in its store and sends the browser nothing but the signed session id.
 */
export interface MarketplaceSessionData {
  /** The one resource this session may open. */
  resourceId: string;
  /** The connector access token from the SSO exchange. Secret: never put it in a response. */
  accessToken: string;
  /** When the login ends (ms since the epoch): the token's expiry, at most 24 h after login. */
  expiresAt: number;
}

/** Section 8: the connector's SSO access tokens last 24 hours; a login never outlives that. */
export const MAX_SSO_SESSION_MS = 24 * 60 * 60 * 1000;

const CODE_PATTERN = /^[A-Za-z0-9._~+/=-]{1,512}$/;
// The provider routes' id pattern: `.` and `..` would reach the connector as another path.
const RESOURCE_ID_PATTERN = new RegExp(ID_PATTERN);

export const SSO_MESSAGES = {
  notConfigured: 'Single sign-on is not available: the provider has not configured sessions',
  badCode: 'Missing or malformed "code": open the dashboard from the marketplace again',
  badResource: 'Missing or malformed "resource_id": open the dashboard from the marketplace again',
  invalidGrant: 'This sign-in link is invalid, expired or already used: open the dashboard from the marketplace again',
  noAccess: 'You do not have access to this resource',
  connectorDown: 'The marketplace could not confirm your sign-in right now; try again in a moment',
  internal: 'Sign-in failed because of an error on our side; try again in a moment',
} as const;

/** What the sign-in steps need, options already checked. */
export interface SignInSettings {
  connector: Pick<ConnectorClient, 'exchangeCode' | 'getResource'>;
  /** Where a signed-in user goes. */
  dashboardUrl: (resourceId: string) => string;
  /** Longest a login lasts, in ms (at most {@link MAX_SSO_SESSION_MS}). */
  tokenTtlMs: number;
  now: () => number;
  logger: Logger;
}

/** A sign-in that passed every check (the session is still to be made), or why it failed. */
export type SignInResult =
  | { ok: true; login: MarketplaceSessionData; location: string }
  | { ok: false; failure: SsoFailure };

/** The default landing page: `/dashboard/<resource id, URL-encoded>`. */
export const defaultDashboardUrl = (id: string): string => `/dashboard/${encodeURIComponent(id)}`;

const fail = (status: number, reason: SsoFailure['reason'], message: string): SignInResult => ({ ok: false, failure: { status, reason, message } });

/**
 * The sign-in steps as one function of the query's `code` and `resource_id` (each a string when
 * sent once, anything else is refused as malformed).
 */
export function signInSteps(settings: SignInSettings): (code: unknown, resourceId: unknown) => Promise<SignInResult> {
  const { connector, logger } = settings;
  const exchangeCode = connector.exchangeCode.bind(connector);
  const getResource = connector.getResource.bind(connector);

  /** Maps a connector failure to the user's answer; the log line names the cause, never the code or token. */
  function connectorFailure(err: unknown, step: 'exchange' | 'resource check', resourceId: string): SignInResult {
    if (err instanceof ConnectorError) {
      const context = { resourceId, step, code: err.code, upstreamStatus: err.upstreamStatus };
      if (err.code === 'ERR_CONNECTOR_INVALID_GRANT') {
        logger.info(context, 'single sign-on refused: invalid, expired or reused code');
        return fail(401, 'invalid-code', SSO_MESSAGES.invalidGrant);
      }
      if (err.code === 'ERR_CONNECTOR_AUTH' && step === 'exchange') {
        logger.error(context, 'single sign-on failed: the connector refused the provider\'s client credentials; check connector.clientId and connector.clientSecret (CONNECTOR_CLIENT_ID, CONNECTOR_CLIENT_SECRET)');
      } else {
        logger.warn(context, `single sign-on failed at the ${step}: ${err.message}`);
      }
      // An exchange that failed is a sign-in that failed (401, as Manifold's acceptance tool expects);
      // a failed resource check after a good exchange is the connector's fault (502).
      return step === 'exchange' ? fail(401, 'connector', SSO_MESSAGES.connectorDown) : fail(502, 'connector', SSO_MESSAGES.connectorDown);
    }
    logger.error({ resourceId, step, err: safeErr(err) }, 'single sign-on failed: unexpected error from the connector client');
    return fail(500, 'internal', SSO_MESSAGES.internal);
  }

  return async (code, resourceId) => {
    if (typeof resourceId !== 'string' || !RESOURCE_ID_PATTERN.test(resourceId)) return fail(400, 'bad-request', SSO_MESSAGES.badResource);
    if (typeof code !== 'string' || !CODE_PATTERN.test(code)) return fail(400, 'bad-request', SSO_MESSAGES.badCode);

    let token: AccessToken;
    try {
      token = await exchangeCode(code);
    } catch (err) {
      return connectorFailure(err, 'exchange', resourceId);
    }

    let resource: ConnectorResource | undefined;
    try {
      resource = await getResource(resourceId, token.accessToken);
    } catch (err) {
      return connectorFailure(err, 'resource check', resourceId);
    }
    if (resource === undefined) {
      logger.warn({ resourceId }, 'single sign-on refused: the connector says the user has no access to this resource');
      return fail(403, 'no-access', SSO_MESSAGES.noAccess);
    }
    if (resource.id !== resourceId) {
      logger.warn({ resourceId, returnedId: resource.id }, 'single sign-on refused: the connector returned another resource than requested');
      return fail(403, 'no-access', SSO_MESSAGES.noAccess);
    }

    let location: string;
    try {
      location = settings.dashboardUrl(resourceId);
      if (typeof location !== 'string' || location.length === 0) throw new TypeError('dashboardUrl must return a non-empty string');
    } catch (err) {
      logger.error({ resourceId, err: safeErr(err) }, 'single sign-on failed: the dashboardUrl option threw or returned no URL');
      return fail(500, 'internal', SSO_MESSAGES.internal);
    }
    const login = { resourceId, accessToken: token.accessToken, expiresAt: Math.min(token.expiresAt, settings.now() + settings.tokenTtlMs) };
    return { ok: true, login, location };
  };
}

/** Error details for a log line without `cause` chains or extra properties that might carry secrets. */
export function safeErr(err: unknown): { type: string; message: string; code?: string } {
  if (isMarketplaceError(err)) return { type: err.name, message: err.message, code: err.code };
  if (err instanceof Error) return { type: err.name, message: err.message };
  return { type: typeof err, message: 'non-error thrown' };
}
