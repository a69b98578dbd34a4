/**
 * embedded-marketplace: the provider side of an embedded marketplace as Express middleware.
 * The platform side lives at `embedded-marketplace/platform`, stores at
 * `embedded-marketplace/stores/*`, the test kit at `embedded-marketplace/testkit`.
 */
export { marketplaceRouter } from './provider/router.js';
export type { MarketplaceRouter, MarketplaceRouterOptions, ConnectorOptions, SsoOptions, CompletionTarget } from './provider/router.js';
export type { RecordUsageOptions, UsageOptions } from './core/usage.js';
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

export * from './errors.js';

export { memoryStore } from './store/memory.js';
export { decideClaim, decideRecord } from './idempotency/claim-rule.js';
export type { ClaimDecision, ClaimReads, ClaimWrite, SnapshotScope } from './idempotency/claim-rule.js';
export { generateEncryptionKey, DecryptionError } from './store/crypto.js';
export { operationKey } from './store/types.js';
export type * from './store/types.js';
export type { OutboxStats as StoreOutboxStats } from './store/types.js';

export * from './signature/index.js';
export * from './connector/index.js';
export * from './outbox/index.js';
export type { OutboxStats } from './outbox/index.js';
export * from './sso/index.js';
export { createRedactingLogger, REDACT_PATHS } from './lib/logger.js';

export { createHealthCheck, healthHandler } from './observability/health.js';
export type { HealthCheckOptions, HealthReport, HealthSource, HealthStatus, HealthStore, OutboxHealth } from './observability/health.js';
export { mountObservability } from './observability/mount.js';
export type { ObservabilityOptions, ObservabilityPaths } from './observability/mount.js';
export type { MetricsOptions } from './observability/index.js';

export { createProvider } from './core/provider.js';
export type { CommonProviderOptions, MarketplaceLogin, Provider, ProviderOptions, ProviderSsoOptions, SealedSessionOptions, SessionHeaders, SessionHooks } from './core/types.js';
