/**
 * The platform side of the embedded marketplace (`embedded-marketplace/platform`): the endpoints the
 * marketplace calls on a platform, the webhook receiver, the deprecated authorization-code flow and
 * a client for the marketplace's GraphQL operations.
 */
export { platformRouter } from './router.js';
export type {
  AuthorizationDecision,
  AuthorizationQuery,
  PlatformHandlerContext,
  PlatformRouterLimits,
  PlatformRouterOptions,
  UsersQuery,
} from './router.js';

export { checkProfile, checkUsers, PROFILE_STANDINGS, PROFILE_STATES, VERBS } from './schemas.js';
export type { AuthorizationEntry, Checked, Profile, ProfileInput, ProfileStanding, ProfileState, UserEntry, Verb } from './schemas.js';

export { isCountryCode, ISO_3166_1_ALPHA_2 } from './countries.js';

export { EVENT_TYPES, eventSecretHeader, eventSecretPath, marketplaceEvents, MemorySeenEventStore } from './events.js';
export type {
  EventSecretHeaderOptions,
  EventSecretPathOptions,
  EventVerifier,
  MarketplaceEventContext,
  MarketplaceEventHandler,
  MarketplaceEventsOptions,
  MarketplaceEventType,
  MemorySeenEventStoreOptions,
  ResourceEventData,
  SeenEventClaim,
  SeenEventStore,
} from './events.js';

export { deprecatedOAuthRouter } from './oauth/router.js';
export type { DeprecatedOAuthOptions, DeprecatedOAuthRouter, OAuthClient } from './oauth/router.js';
export { MemoryOAuthStore } from './oauth/store.js';
export type { CodeLimits, MemoryOAuthStoreOptions, OAuthRecord, OAuthRecordKind, OAuthStore, OAuthUser, RedeemResult } from './oauth/store.js';

export { createMarketplaceGraphQLClient, MarketplaceGraphQLError } from './graphql.js';
export type {
  GraphQLErrorEntry,
  MarketplaceGraphQLClient,
  MarketplaceGraphQLClientOptions,
  MarketplaceProfile,
  ProfileIdentity,
  UpdateProfileSubjectInput,
} from './graphql.js';
