/**
 * The package's own login session for hosts without one (fetch hosts, node:http): a sealed cookie.
 * Sealed = AES-256-GCM (authenticated encryption) under a key derived from the `secret` option with
 * HKDF-SHA256, the cookie's name bound as associated data. It holds the resource and the expiry,
 * never the access token, so a leaked secret exposes no connector token. No server-side state:
 * a new sign-in replaces the cookie, and it lapses with the login.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { InvalidOptionsError } from '../errors.js';
import { decodeBase64Url, encodeBase64Url } from '../lib/base64.js';
import { asOptionsObject, rejectUnknownKeys } from '../lib/options.js';
import type { MarketplaceLogin, SealedSessionOptions } from './types.js';

/** The sealed cookie of one provider. */
export interface SealedSession {
  /** The Set-Cookie value that keeps `login` until it expires. */
  cookie(login: MarketplaceLogin, secure: boolean): string;
  /** The login a Cookie header carries, when one of our cookies in it opens and has not expired. */
  open(cookieHeader: string | null | undefined): MarketplaceLogin | undefined;
}

export const DEFAULT_COOKIE_NAME = 'marketplace_session';
const MIN_SECRET_LENGTH = 32;
const MAX_SECRETS = 8;
const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;
const COOKIE_PATH = /^\/[\x21-\x3a\x3c-\x7e]*$/;
// Longest cookie value we try to open: a login is about 100 bytes sealed.
const MAX_SEALED = 512;

/** Reads the `session: { secret, ... }` option; throws at construction with a hint. */
export function sealedSession(factory: string, value: SealedSessionOptions, now: () => number): SealedSession & { readonly secure: boolean | 'auto' } {
  const name = `${factory}: option "sso.session"`;
  const raw = asOptionsObject(name, value);
  rejectUnknownKeys(name, raw, ['secret', 'cookieName', 'path', 'secure']);
  const secrets: unknown[] = Array.isArray(raw.secret) ? raw.secret as unknown[] : [raw.secret];
  if (secrets.length === 0 || secrets.length > MAX_SECRETS || secrets.some((secret) => typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH)) {
    throw new InvalidOptionsError(`${name}: "secret" must be a string of at least ${MIN_SECRET_LENGTH} random characters (openssl rand -base64 32), or a list of 1 to ${MAX_SECRETS} of them to rotate (the first seals)`);
  }
  const cookieName = raw.cookieName ?? DEFAULT_COOKIE_NAME;
  if (typeof cookieName !== 'string' || !COOKIE_NAME.test(cookieName)) throw new InvalidOptionsError(`${name}: "cookieName" must be a cookie name (letters, digits and !#$%&'*+-.^_\`|~)`);
  const path = raw.path ?? '/';
  if (typeof path !== 'string' || !COOKIE_PATH.test(path)) throw new InvalidOptionsError(`${name}: "path" must be a URL path starting with "/", without ";"`);
  const secure = raw.secure ?? 'auto';
  if (secure !== true && secure !== false && secure !== 'auto') throw new InvalidOptionsError(`${name}: "secure" must be true, false or "auto"`);
  const keys = (secrets as string[]).map((secret) => Buffer.from(hkdfSync('sha256', secret, 'embedded-marketplace session', `${VERSION} ${cookieName}`, 32)));
  const aad = Buffer.from(cookieName, 'utf8');
  const prefix = `${cookieName}=`;

  function seal(login: MarketplaceLogin): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', keys[0]!, iv);
    cipher.setAAD(aad);
    const sealed = Buffer.concat([cipher.update(JSON.stringify({ r: login.resourceId, e: login.expiresAt }), 'utf8'), cipher.final()]);
    return `${VERSION}.${encodeBase64Url(Buffer.concat([iv, sealed, cipher.getAuthTag()]))}`;
  }

  function unseal(text: string): MarketplaceLogin | undefined {
    if (text.length > MAX_SEALED || !text.startsWith(`${VERSION}.`)) return undefined;
    const bytes = decodeBase64Url(text.slice(VERSION.length + 1));
    if (bytes === undefined || bytes.length <= IV_BYTES + TAG_BYTES) return undefined;
    const iv = bytes.subarray(0, IV_BYTES);
    const tag = bytes.subarray(bytes.length - TAG_BYTES);
    const sealed = bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES);
    for (const key of keys) {
      let plain: string;
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, iv);
        decipher.setAAD(aad);
        decipher.setAuthTag(tag);
        plain = Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
      } catch {
        continue;
      }
      const data = JSON.parse(plain) as { r?: unknown; e?: unknown };
      if (typeof data.r !== 'string' || typeof data.e !== 'number') return undefined;
      return { resourceId: data.r, expiresAt: data.e };
    }
    return undefined;
  }

  return {
    secure,
    cookie(login, secureRequest) {
      const maxAge = Math.max(0, Math.floor((login.expiresAt - now()) / 1000));
      return `${cookieName}=${seal(login)}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure === true || (secure === 'auto' && secureRequest) ? '; Secure' : ''}`;
    },
    open(header) {
      if (header === null || header === undefined || !header.includes(prefix)) return undefined;
      // Several cookies of this name (another path): the first that opens.
      for (const part of header.split(';')) {
        const pair = part.trim();
        if (!pair.startsWith(prefix)) continue;
        const login = unseal(pair.slice(prefix.length));
        if (login !== undefined && now() < login.expiresAt) return login;
      }
      return undefined;
    },
  };
}
