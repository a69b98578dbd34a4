/**
 * The storage contracts of the platform side, beside their adapters (./postgres.ts; the in-memory
 * ones live with their users in src/platform/): the deprecated OAuth flow's codes and tokens, and the
 * webhook receiver's seen deliveries. `embedded-marketplace/platform` re-exports these names.
 */

/** What the three kinds of secret are. */
export type OAuthRecordKind = 'code' | 'access' | 'refresh';

/** The signed-in platform user an authorization is for (also the UserInfo answer, section 2.9). */
export interface OAuthUser {
  sub: string;
  name: string;
  email: string;
}

/** One stored code or token. */
export interface OAuthRecord {
  /** Ties every code and token descending from one authorization together, so they can be revoked as one. */
  grantId: string;
  clientId: string;
  user: OAuthUser;
  /** Epoch milliseconds after which the record is worthless (and may be swept). */
  expiresAt: number;
  /** The granted scopes, space-separated. */
  scope: string;
  /** The redirect_uri of the authorization request (codes only): the token request must repeat it. */
  redirectUri?: string;
  /** PKCE (codes only): the `code_challenge` of the authorization request. */
  codeChallenge?: string;
  /** PKCE (codes only): `S256` or `plain`. */
  codeChallengeMethod?: 'S256' | 'plain';
  /**
   * Refresh tokens only: a random value from which the tokens issued in exchange are derived, so a
   * retried refresh (its answer lost) can be answered with the same tokens without storing them.
   */
  rotationSeed?: string;
}

/** What {@link OAuthStore.redeem} did. */
export type RedeemResult =
  /** This caller won: the record is now used. */
  | { outcome: 'redeemed'; record: OAuthRecord }
  /** It had been redeemed before, at `usedAt`: a replay (or, for a refresh token, perhaps a retry). */
  | { outcome: 'replayed'; record: OAuthRecord; usedAt: number }
  /** It belongs to another client: refused and left untouched, so its rightful client can still use it. */
  | { outcome: 'wrong-client' }
  /** Unknown, expired, or its grant was revoked. */
  | { outcome: 'invalid' };

/** Bounds on outstanding (unused, unexpired) codes, checked by {@link OAuthStore.saveCode}. */
export interface CodeLimits {
  perUser: number;
  total: number;
}

/**
 * The storage contract of `deprecatedOAuthRouter`; every method is one atomic step (one
 * statement in PostgreSQL). `hash` is the base64url SHA-256 digest of the secret; the plain value
 * never reaches the store. Times are passed in (the caller's clock), never read by the store.
 *
 * Nothing live is ever evicted to make room: what a user can create is bounded in `saveCode`.
 * Run the shared conformance cases (`test/platform/oauth-store-contract.ts`) against an implementation.
 */
export interface OAuthStore {
  /**
   * Saves a new code unless the user already holds `limits.perUser` outstanding codes (`user-limit`)
   * or the store holds `limits.total` (`total-limit`).
   */
  saveCode(hash: string, record: OAuthRecord, limits: CodeLimits, now: number): Promise<'saved' | 'user-limit' | 'total-limit'>;
  /**
   * Saves an access or refresh token unless its grant was revoked (`revoked`). Saving a hash that
   * exists already changes nothing and answers `saved` (a retried refresh saves the same tokens).
   */
  saveToken(kind: 'access' | 'refresh', hash: string, record: OAuthRecord, now: number): Promise<'saved' | 'revoked'>;
  /** An unused, unexpired record whose grant is not revoked, or `undefined`. */
  find(kind: OAuthRecordKind, hash: string, now: number): Promise<OAuthRecord | undefined>;
  /**
   * Marks a single-use record (code, refresh token) used, atomically: of any number of concurrent
   * calls, across instances, exactly one answers `redeemed`. A record of another client is left as it is.
   */
  redeem(kind: 'code' | 'refresh', hash: string, by: { clientId: string; now: number }): Promise<RedeemResult>;
  /**
   * Deletes every record of the grant and remembers the grant as revoked until `until`, so that a
   * token saved later (a redemption finishing after the revocation) is refused at save and at use.
   */
  revokeGrant(grantId: string, until: number): Promise<void>;
  /** Revokes (as {@link revokeGrant}) every grant of the user; answers how many. */
  revokeSubject(sub: string, until: number): Promise<number>;
  /** Deletes expired records and revocations; answers how many. */
  sweep(now: number): Promise<number>;
}

/** What {@link SeenEventStore.claim} found. */
export type SeenEventClaim =
  /** New (or its earlier claim lapsed, or its earlier handler failed): the caller runs the handler, then completes or releases. */
  | { outcome: 'claimed' }
  /** Handled successfully within the window: acknowledge without running the handler. */
  | { outcome: 'done' }
  /** Another caller (instance) holds a live claim: its handler is running now. */
  | { outcome: 'busy'; leaseExpiresAt: number };

/**
 * Remembers which deliveries were handled, shared by every instance that receives events. The
 * receiver calls {@link claim} (one atomic "record this delivery, tell me if it is new"), runs the
 * handler when it got the claim, then {@link complete}s it (handled: remembered until `expiresAt`)
 * or {@link release}s it (the handler failed: the marketplace's retry must reach a handler again).
 * A claim carries a lease: a claim whose instance died lapses at `leaseExpiresAt` and the next copy
 * claims it. Implementations: `MemorySeenEventStore` (one process) and
 * `postgresSeenEventStore` from `embedded-marketplace/stores/postgres` (several instances).
 */
export interface SeenEventStore {
  /**
   * Atomically: `done` when `key` completed and has not expired, `busy` when another `owner` holds a
   * live claim, otherwise records a claim for `owner` until `leaseExpiresAt` and answers `claimed`.
   */
  claim(key: string, claim: { owner: string; now: number; leaseExpiresAt: number }): Promise<SeenEventClaim>;
  /** Records `key` as handled until `expiresAt`, if `owner` still holds the claim (or nobody does). */
  complete(key: string, owner: string, expiresAt: number): Promise<void>;
  /** Drops `owner`'s claim on `key`, so that the next copy of the delivery runs the handler. */
  release(key: string, owner: string): Promise<void>;
}

