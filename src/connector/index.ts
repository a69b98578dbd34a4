/**
 * The marketplace connector as the provider sees it: tokens (both grants), the resource check that
 * single sign-on relies on, callbacks of long-running operations, and the callback URL policy.
 */
export {
  createConnectorClient,
  callbackPayloadProblem,
  DEFAULT_TOKEN_LIFETIME_S,
  type AccessToken,
  type CallbackPayload,
  type CallbackResult,
  type ConnectorClient,
  type ConnectorClientOptions,
  type ConnectorResource,
} from './client.js';
export {
  callbackUrlPolicy,
  MAX_CALLBACK_URL_LENGTH,
  type CallbackUrlPolicy,
  type CallbackUrlPolicyOptions,
  type CallbackUrlVerdict,
} from './callback-url.js';
export { parseRetryAfter } from './retry-after.js';
