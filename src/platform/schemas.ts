import { isCountryCode } from './countries.js';

/** Profile states of interface section 2.1. */
export const PROFILE_STATES = ['active', 'suspended', 'deleted'] as const;
/** Profile standings of interface section 2.1. */
export const PROFILE_STANDINGS = ['good', 'delinquent', 'abuse'] as const;
/** The verbs the marketplace asks `GET /v1/resources/authorized` about (interface section 4.1). */
export const VERBS = ['CREATE', 'READ', 'UPDATE', 'CHANGE_PLAN', 'SSO', 'DELETE', 'READ_CREDENTIALS', 'READ_INVOICE'] as const;

export type ProfileState = (typeof PROFILE_STATES)[number];
export type ProfileStanding = (typeof PROFILE_STANDINGS)[number];
export type Verb = (typeof VERBS)[number];

/** A profile as answered to the marketplace (section 2.1): the booleans are always present. */
export interface Profile {
  id: string;
  state: ProfileState;
  country?: string;
  is_email_verified: boolean;
  is_phone_verified: boolean;
  is_2fa_enabled: boolean;
  standing?: ProfileStanding;
  has_payment_method: boolean;
  has_first_payment: boolean;
  name?: string;
  email?: string;
}

/**
 * A profile as the platform's `getProfile` handler returns it: the booleans default to false and
 * optional fields may be left out or null. Any other field is dropped, so internal data cannot leak.
 */
export interface ProfileInput {
  id: string;
  state: ProfileState;
  country?: string | null;
  is_email_verified?: boolean | null;
  is_phone_verified?: boolean | null;
  is_2fa_enabled?: boolean | null;
  standing?: ProfileStanding | null;
  has_payment_method?: boolean | null;
  has_first_payment?: boolean | null;
  name?: string | null;
  email?: string | null;
}

/** One user with access to a resource (section 2.2). The interface does not list role values. */
export interface UserEntry {
  id: string;
  role: string;
  name?: string;
  email?: string;
}

/** One authorization result (section 2.3). */
export interface AuthorizationEntry {
  resource_id: string;
  authorized: boolean;
}

/** The outcome of checking a handler's output: the normalized value, or the first field at fault. */
export type Checked<T> = { ok: true; value: T } | { ok: false; field: string; problem: string };

const BOOLEAN_FIELDS = ['is_email_verified', 'is_phone_verified', 'is_2fa_enabled', 'has_payment_method', 'has_first_payment'] as const;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail<T>(field: string, problem: string): Checked<T> {
  return { ok: false, field, problem };
}

/** Normalizes a handler's profile to section 2.1, or names the first field that breaks it. */
export function checkProfile(value: unknown): Checked<Profile> {
  if (!isRecord(value)) return fail('(profile)', 'must be an object');
  if (typeof value.id !== 'string' || value.id.length === 0) return fail('id', 'must be a non-empty string');
  if (!(PROFILE_STATES as readonly unknown[]).includes(value.state)) return fail('state', `must be one of ${PROFILE_STATES.join(', ')}`);
  const profile: Profile = {
    id: value.id,
    state: value.state as ProfileState,
    is_email_verified: false,
    is_phone_verified: false,
    is_2fa_enabled: false,
    has_payment_method: false,
    has_first_payment: false,
  };
  for (const field of BOOLEAN_FIELDS) {
    const flag = value[field];
    if (flag === undefined || flag === null) continue;
    if (typeof flag !== 'boolean') return fail(field, 'must be a boolean');
    profile[field] = flag;
  }
  if (value.country !== undefined && value.country !== null) {
    if (!isCountryCode(value.country)) return fail('country', 'must be an assigned ISO 3166-1 alpha-2 code in upper case, such as "DE"');
    profile.country = value.country;
  }
  if (value.standing !== undefined && value.standing !== null) {
    if (!(PROFILE_STANDINGS as readonly unknown[]).includes(value.standing)) {
      return fail('standing', `must be one of ${PROFILE_STANDINGS.join(', ')}`);
    }
    profile.standing = value.standing as ProfileStanding;
  }
  for (const field of ['name', 'email'] as const) {
    const text = value[field];
    if (text === undefined || text === null) continue;
    if (typeof text !== 'string') return fail(field, 'must be a string');
    profile[field] = text;
  }
  return { ok: true, value: profile };
}

/** Normalizes a handler's list of users to section 2.2, or names the first entry and field at fault. */
export function checkUsers(value: unknown): Checked<UserEntry[]> {
  if (!Array.isArray(value)) return fail('(users)', 'must be an array');
  const users: UserEntry[] = [];
  for (const [index, entry] of value.entries()) {
    if (!isRecord(entry)) return fail(`users[${index}]`, 'must be an object');
    if (typeof entry.id !== 'string' || entry.id.length === 0) return fail(`users[${index}].id`, 'must be a non-empty string');
    if (typeof entry.role !== 'string' || entry.role.length === 0) return fail(`users[${index}].role`, 'must be a non-empty string');
    const user: UserEntry = { id: entry.id, role: entry.role };
    for (const field of ['name', 'email'] as const) {
      const text = entry[field];
      if (text === undefined || text === null) continue;
      if (typeof text !== 'string') return fail(`users[${index}].${field}`, 'must be a string');
      user[field] = text;
    }
    users.push(user);
  }
  return { ok: true, value: users };
}
