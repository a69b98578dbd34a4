/**
 * Storage of the deprecated authorization-code flow. Records are keyed by the SHA-256 digest of the
 * secret value (code, access token, refresh token): a leaked store, log or backup does not yield a
 * usable credential. The in-memory default serves one process; behind several instances give a
 * shared implementation, or a code issued by one instance cannot be redeemed at another.
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
  /** Epoch milliseconds after which the record is worthless. */
  expiresAt: number;
  /** The redirect_uri of the authorization request (codes only): the token request must repeat it. */
  redirectUri?: string;
}

/** What {@link OAuthStore.consume} found. */
export interface ConsumedRecord {
  record: OAuthRecord;
  /** True when it had been consumed before: a replay, so the caller revokes the whole grant. */
  alreadyUsed: boolean;
}

/**
 * The storage contract of {@link deprecatedOAuthRouter}. Methods may return promises. `hash` is the
 * base64url SHA-256 digest of the secret; the plain value never reaches the store.
 */
export interface OAuthStore {
  /** Stores a new record. */
  save(kind: OAuthRecordKind, hash: string, record: OAuthRecord): void | Promise<void>;
  /** An unused record, or `undefined`. Expiry is checked by the caller with its own clock. */
  find(kind: OAuthRecordKind, hash: string): OAuthRecord | undefined | Promise<OAuthRecord | undefined>;
  /**
   * Marks a single-use record (code, refresh token) as used and returns it, atomically: of two
   * concurrent calls for one hash, exactly one sees `alreadyUsed: false`. Keep used records until they
   * expire so a replay is recognized.
   */
  consume(kind: OAuthRecordKind, hash: string): ConsumedRecord | undefined | Promise<ConsumedRecord | undefined>;
  /** Deletes every record of a grant (replayed code or refresh token). */
  revokeGrant(grantId: string): void | Promise<void>;
}

/** Options of {@link MemoryOAuthStore}. */
export interface MemoryOAuthStoreOptions {
  /** Most records kept (default 10 000); beyond it expired ones are swept, then the oldest dropped. */
  maxEntries?: number;
  /** Expired records are swept on the first write after this many milliseconds (default 60 000). */
  sweepIntervalMs?: number;
  /** Clock in epoch milliseconds, used for sweeping only. */
  now?: () => number;
}

interface Entry {
  record: OAuthRecord;
  used: boolean;
}

/** The default {@link OAuthStore}: bounded, in this process's memory. */
export class MemoryOAuthStore implements OAuthStore {
  private readonly entries = new Map<string, Entry>();
  private readonly grants = new Map<string, Set<string>>();
  private readonly maxEntries: number;
  private readonly sweepIntervalMs: number;
  private readonly now: () => number;
  private lastSweep: number;

  constructor(options: MemoryOAuthStoreOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.sweepIntervalMs = options.sweepIntervalMs ?? 60_000;
    this.now = options.now ?? Date.now;
    this.lastSweep = this.now();
  }

  /** How many records are held (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  save(kind: OAuthRecordKind, hash: string, record: OAuthRecord): void {
    const key = `${kind}:${hash}`;
    this.entries.set(key, { record, used: false });
    let keys = this.grants.get(record.grantId);
    if (keys === undefined) {
      keys = new Set();
      this.grants.set(record.grantId, keys);
    }
    keys.add(key);
    // Swept on writes rather than by a timer: nothing to close, and an idle store holds nothing new.
    const now = this.now();
    if (now - this.lastSweep >= this.sweepIntervalMs || this.entries.size > this.maxEntries) this.sweep(now);
  }

  find(kind: OAuthRecordKind, hash: string): OAuthRecord | undefined {
    const entry = this.entries.get(`${kind}:${hash}`);
    return entry === undefined || entry.used ? undefined : entry.record;
  }

  consume(kind: OAuthRecordKind, hash: string): ConsumedRecord | undefined {
    const entry = this.entries.get(`${kind}:${hash}`);
    if (entry === undefined) return undefined;
    const alreadyUsed = entry.used;
    entry.used = true;
    return { record: entry.record, alreadyUsed };
  }

  revokeGrant(grantId: string): void {
    for (const key of this.grants.get(grantId) ?? []) this.entries.delete(key);
    this.grants.delete(grantId);
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [key, entry] of this.entries) if (entry.record.expiresAt <= now) this.remove(key, entry);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.entries().next();
      if (oldest.done === true) break;
      this.remove(oldest.value[0], oldest.value[1]);
    }
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    const keys = this.grants.get(entry.record.grantId);
    keys?.delete(key);
    if (keys?.size === 0) this.grants.delete(entry.record.grantId);
  }
}
