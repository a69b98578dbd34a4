/**
 * embedded-marketplace: the provider side of an embedded marketplace as Express middleware.
 * The platform side lives at `embedded-marketplace/platform`, the store contract at
 * `embedded-marketplace/stores` (adapters at `embedded-marketplace/stores/*`), the test kit at
 * `embedded-marketplace/testkit`.
 *
 * Every public name is listed here by hand, grouped by concern: what is public is a decision, not
 * an accident of a `export *`. Each one has an entry in docs/api.md (test/docs/exports.test.ts).
 */

// ---- The provider router (Express) -------------------------------------------------------------
export { marketplaceRouter } from './provider/router.js';
export type { MarketplaceRouter, CompletionTarget } from './provider/router.js';
export type { MarketplaceRouterOptions, ConnectorOptions, SsoOptions } from './provider/router.js';
export type { RecordUsageOptions, UsageOptions } from './core/usage.js';

// ---- Your handlers: what they receive and answer -------------------------------------------------
export { accepted, isAccepted } from './domain/handlers.js';
export type {
  Accepted,
  Catalog,
  ChangePlanRequest,
  Completion,
  CredentialsResult,
  DeprovisionCredentialsRequest,
  DeprovisionRequest,
  HandlerContext,
  MeasuresRequest,
  MessageResult,
  ProviderHandlers,
  ProvisionCredentialsRequest,
  ProvisionRequest,
  ValidateHook,
} from './domain/handlers.js';

// ---- Errors (also at `embedded-marketplace/errors`) -----------------------------------------------
export {
  BadRequestError,
  ConflictError,
  ConnectorError,
  ForbiddenError,
  InternalError,
  InvalidOptionsError,
  isMarketplaceError,
  LeaseLostError,
  MarketplaceError,
  NotFoundError,
  PayloadTooLargeError,
  RequestTimeoutError,
  safeMessage,
  ServiceUnavailableError,
  SignatureError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
  UsagePeriodClosedError,
} from './errors.js';
export type { ErrorCode, MarketplaceErrorOptions } from './errors.js';

// ---- Signed requests: verifier, middleware, raw body ---------------------------------------------
export { canonicalRequest } from './signature/canonicalize.js';
export type { CanonicalRequestInput, HeaderValue, RequestHeaders } from './signature/canonicalize.js';
export { parseDate, parseSignature, parseSignedHeaders } from './signature/parse.js';
export type { ParsedSignature } from './signature/parse.js';
export { createVerifier, DEFAULT_ENDORSEMENT_CACHE_SIZE, DEFAULT_TOLERANCE_MS, PRODUCTION_MASTER_PUBLIC_KEY } from './signature/verifier.js';
export type { HeaderCheck, SignedRequest, VerifiedRequest, Verifier, VerifierOptions } from './signature/verifier.js';
export { errorResponder, verifySignature } from './signature/middleware.js';
export type { VerifySignatureOptions } from './signature/middleware.js';
export { DEFAULT_BODY_LIMIT } from './signature/raw-body.js';
export { keepRawBody } from './signature/keep-raw-body.js';

// ---- Stores: the reference adapter and the contract (also at `embedded-marketplace/stores`) -------
export { memoryStore } from './store/memory.js';
export { generateEncryptionKey, DecryptionError } from './store/crypto.js';
export { operationKey } from './store/types.js';
export type {
  CallbackPayload,
  ClaimInput,
  ClaimResult,
  CommitInput,
  CredentialRecord,
  CredentialValues,
  DeliveryClaimInput,
  DeliveryRecord,
  DeliveryRetryInput,
  DeliveryStore,
  DeliverySummary,
  DiagnosableStore,
  EntityKind,
  EntityReads,
  EntitySnapshot,
  Features,
  HealthProbeStore,
  ListingStore,
  MeasuresStore,
  Mutation,
  NewDelivery,
  OperationKind,
  OperationRecord,
  OperationRequest,
  OperationStore,
  PendingInput,
  RecordedAnswer,
  ReplayRecord,
  ResourceRecord,
  Scalar,
  Store,
  StoreDiagnostics,
  UsageEntry,
  UsageLedgerStore,
  UsageStore,
} from './store/types.js';
export type { OutboxStats as StoreOutboxStats } from './store/types.js';

// ---- The connector client (tokens, the SSO resource check, callbacks) -----------------------------
export { callbackPayloadProblem, createConnectorClient, DEFAULT_TOKEN_LIFETIME_S } from './connector/client.js';
export type { AccessToken, CallbackResult, ConnectorClient, ConnectorClientOptions, ConnectorResource } from './connector/client.js';
export { callbackUrlPolicy, MAX_CALLBACK_URL_LENGTH } from './connector/callback-url.js';
export type { CallbackUrlPolicy, CallbackUrlPolicyOptions, CallbackUrlVerdict } from './connector/callback-url.js';
export { parseRetryAfter } from './connector/retry-after.js';

// ---- The callback outbox ----------------------------------------------------------------------
export { createOutbox } from './outbox/outbox.js';
export type { BackoffOptions, Outbox, OutboxOptions, OutboxStats, SendCallback, SendContext, SendResult } from './outbox/types.js';

// ---- Single sign-on (express-session) ------------------------------------------------------------
export { ssoHandler, MAX_SSO_SESSION_MS } from './sso/handler.js';
export type { SsoHandlerOptions } from './sso/handler.js';
export { requireMarketplaceSession } from './sso/guard.js';
export type { RequireMarketplaceSessionOptions } from './sso/guard.js';
export type { SsoFailure, SsoFailureHook } from './sso/page.js';
export { assertSessionMiddleware, getMarketplaceSession } from './sso/session.js';
export type { MarketplaceLocals, MarketplaceSessionData } from './sso/session.js';

// ---- Logs, metrics and health ---------------------------------------------------------------------
export { createRedactingLogger, REDACT_PATHS } from './lib/logger.js';
export { createHealthCheck, healthHandler } from './observability/health.js';
export type { HealthCheckOptions, HealthReport, HealthSource, HealthStatus, HealthStore, OutboxHealth } from './observability/health.js';
export { mountObservability } from './observability/mount.js';
export type { ObservabilityOptions, ObservabilityPaths } from './observability/mount.js';
export type { MetricsOptions } from './observability/index.js';

// ---- The framework-free core: createProvider for fetch and node:http hosts (docs/core.md) ----------
export { createProvider } from './core/provider.js';
export type { CommonProviderOptions, MarketplaceLogin, Provider, ProviderOptions, ProviderSsoOptions, SealedSessionOptions, SessionHeaders, SessionHooks } from './core/types.js';
