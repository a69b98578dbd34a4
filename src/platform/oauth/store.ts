/**
 * Storage of the deprecated authorization-code flow. Records are keyed by the SHA-256 digest of the
 * secret value (code, access token, refresh token): a leaked store, log or backup does not yield a
 * usable credential. The in-memory default serves one process; behind several instances use
 * `postgresOAuthStore` from `embedded-marketplace/stores/postgres`, or a code issued by one instance
 * cannot be redeemed at another.
 */
import { InvalidOptionsError } from '../../errors.js';
import { integerOption } from '../../lib/options.js';
import type { CodeLimits, OAuthRecord, OAuthRecordKind, OAuthStore, RedeemResult } from '../../store/platform/types.js';

export type { CodeLimits, OAuthRecord, OAuthRecordKind, OAuthStore, OAuthUser, RedeemResult } from '../../store/platform/types.js';

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
