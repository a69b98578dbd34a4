/**
 * Storage of the deprecated authorization-code flow. Records are keyed by the SHA-256 digest of the
 * secret value (code, access token, refresh token): a leaked store, log or backup does not yield a
 * usable credential. The in-memory default serves one process; behind several instances use
 * `postgresOAuthStore` from `embedded-marketplace/stores/postgres`, or a code issued by one instance
 * cannot be redeemed at another.
 */
import { InvalidOptionsError } from '../../errors.js';
import { integerOption } from '../../lib/options.js';

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
 * The storage contract of {@link deprecatedOAuthRouter}; every method is one atomic step (one
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

/** Options of {@link MemoryOAuthStore}. */
export interface MemoryOAuthStoreOptions {
  /** Expired records are swept on the first write after this many milliseconds (default 60 000). */
  sweepIntervalMs?: number;
  /** Clock in epoch milliseconds, used for sweeping only. */
  now?: () => number;
}

interface Entry {
  kind: OAuthRecordKind;
  record: OAuthRecord;
  usedAt?: number;
}

/**
 * The default {@link OAuthStore}: this process's memory, with the same semantics as the PostgreSQL
 * store. Never evicts a live record; codes are bounded by the router's limits.
 */
export class MemoryOAuthStore implements OAuthStore {
  private readonly entries = new Map<string, Entry>();
  private readonly grants = new Map<string, Set<string>>();
  private readonly revoked = new Map<string, number>();
  /** Keys of the codes, so that counting outstanding codes does not walk every token. */
  private readonly codeKeys = new Set<string>();
  private readonly sweepIntervalMs: number;
  private readonly now: () => number;
  private lastSweep: number;

  constructor(options: MemoryOAuthStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new InvalidOptionsError('MemoryOAuthStore: options must be an object');
    this.sweepIntervalMs = integerOption('MemoryOAuthStore', 'sweepIntervalMs', options.sweepIntervalMs, 60_000, 0);
    this.now = options.now ?? Date.now;
    this.lastSweep = this.now();
  }

  /** How many records are held (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  saveCode(hash: string, record: OAuthRecord, limits: CodeLimits, now: number): Promise<'saved' | 'user-limit' | 'total-limit'> {
    this.maybeSweep(now);
    let total = 0;
    let mine = 0;
    for (const key of this.codeKeys) {
      const entry = this.entries.get(key);
      if (entry === undefined) {
        this.codeKeys.delete(key);
        continue;
      }
      if (entry.usedAt !== undefined || entry.record.expiresAt <= now) continue;
      total += 1;
      if (entry.record.user.sub === record.user.sub) mine += 1;
    }
    if (mine >= limits.perUser) return Promise.resolve('user-limit');
    if (total >= limits.total) return Promise.resolve('total-limit');
    this.put('code', hash, record);
    return Promise.resolve('saved');
  }

  saveToken(kind: 'access' | 'refresh', hash: string, record: OAuthRecord, now: number): Promise<'saved' | 'revoked'> {
    this.maybeSweep(now);
    if (this.isRevoked(record.grantId, now)) return Promise.resolve('revoked');
    if (!this.entries.has(`${kind}:${hash}`)) this.put(kind, hash, record);
    return Promise.resolve('saved');
  }

  find(kind: OAuthRecordKind, hash: string, now: number): Promise<OAuthRecord | undefined> {
    const entry = this.entries.get(`${kind}:${hash}`);
    const live = entry !== undefined && entry.usedAt === undefined && entry.record.expiresAt > now && !this.isRevoked(entry.record.grantId, now);
    return Promise.resolve(live ? entry.record : undefined);
  }

  redeem(kind: 'code' | 'refresh', hash: string, by: { clientId: string; now: number }): Promise<RedeemResult> {
    const entry = this.entries.get(`${kind}:${hash}`);
    if (entry === undefined || this.isRevoked(entry.record.grantId, by.now)) return Promise.resolve({ outcome: 'invalid' });
    if (entry.record.clientId !== by.clientId) return Promise.resolve({ outcome: 'wrong-client' });
    if (entry.usedAt !== undefined) return Promise.resolve({ outcome: 'replayed', record: entry.record, usedAt: entry.usedAt });
    if (entry.record.expiresAt <= by.now) return Promise.resolve({ outcome: 'invalid' });
    entry.usedAt = by.now;
    return Promise.resolve({ outcome: 'redeemed', record: entry.record });
  }

  revokeGrant(grantId: string, until: number): Promise<void> {
    this.revoke(grantId, until);
    return Promise.resolve();
  }

  revokeSubject(sub: string, until: number): Promise<number> {
    const grants = new Set<string>();
    for (const entry of this.entries.values()) if (entry.record.user.sub === sub) grants.add(entry.record.grantId);
    for (const grantId of grants) this.revoke(grantId, until);
    return Promise.resolve(grants.size);
  }

  sweep(now: number): Promise<number> {
    this.lastSweep = now;
    let swept = 0;
    for (const [key, entry] of this.entries) {
      if (entry.record.expiresAt > now) continue;
      this.remove(key, entry);
      swept += 1;
    }
    for (const [grantId, until] of this.revoked) {
      if (until > now) continue;
      this.revoked.delete(grantId);
      swept += 1;
    }
    return Promise.resolve(swept);
  }

  private revoke(grantId: string, until: number): void {
    this.revoked.set(grantId, Math.max(until, this.revoked.get(grantId) ?? 0));
    for (const key of this.grants.get(grantId) ?? []) this.entries.delete(key);
    this.grants.delete(grantId);
  }

  private isRevoked(grantId: string, now: number): boolean {
    return (this.revoked.get(grantId) ?? 0) > now;
  }

  private put(kind: OAuthRecordKind, hash: string, record: OAuthRecord): void {
    const key = `${kind}:${hash}`;
    this.entries.set(key, { kind, record });
    if (kind === 'code') this.codeKeys.add(key);
    let keys = this.grants.get(record.grantId);
    if (keys === undefined) {
      keys = new Set();
      this.grants.set(record.grantId, keys);
    }
    keys.add(key);
  }

  // Swept on writes rather than by a timer: nothing to close, and an idle store holds nothing new.
  private maybeSweep(now: number): void {
    if (now - this.lastSweep >= this.sweepIntervalMs) void this.sweep(now);
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.codeKeys.delete(key);
    const keys = this.grants.get(entry.record.grantId);
    keys?.delete(key);
    if (keys?.size === 0) this.grants.delete(entry.record.grantId);
  }
}
