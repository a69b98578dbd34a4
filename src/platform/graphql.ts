import { ConnectorError, InvalidOptionsError, type MarketplaceErrorOptions } from '../errors.js';
import { integerOption, optionalFunction, requireNonEmptyString } from '../lib/options.js';
import { checkOptionKeys } from './options.js';

/**
 * A profile as the marketplace's GraphQL interface knows it: either the marketplace's own profile id
 * or the platform's subject (its own user or team id).
 */
export type ProfileIdentity = string;

/** One entry of a GraphQL `errors` array. */
export interface GraphQLErrorEntry {
  message: string;
  path?: readonly (string | number)[];
  extensions?: Record<string, unknown>;
}

/** The marketplace answered with a GraphQL `errors` array; the entries are kept in {@link errors}. */
export class MarketplaceGraphQLError extends ConnectorError {
  readonly errors: readonly GraphQLErrorEntry[];
  constructor(errors: readonly GraphQLErrorEntry[], upstreamStatus: number, options?: MarketplaceErrorOptions) {
    const first = errors[0]?.message ?? 'unknown error';
    super('ERR_GRAPHQL', `The marketplace GraphQL interface answered with an error: ${first}`, upstreamStatus, options);
    this.errors = errors;
  }
}

/** Options of {@link createMarketplaceGraphQLClient}. */
export interface MarketplaceGraphQLClientOptions {
  /** The marketplace's GraphQL address (no public default exists). https, or http on loopback only. */
  endpoint: string;
  /** The platform API token, sent as `Authorization: Bearer`. Never logged or put in an error. */
  apiToken: string;
  /** Abort a call after this many milliseconds (default 10 000). */
  timeoutMs?: number;
  /** A fetch implementation (default: the runtime's `fetch`). */
  fetch?: typeof fetch;
}

/** Arguments of {@link MarketplaceGraphQLClient.updateProfileSubject}. */
export interface UpdateProfileSubjectInput {
  /** The profile to change (marketplace profile id or current subject). */
  id: ProfileIdentity;
  /** The new subject: the platform's identifier from now on. */
  subject: string;
  /**
   * Must be `true`: the marketplace changes the subject permanently and irrevocably, and the old
   * subject stops resolving to the profile. Spelled out so the call cannot be made by accident.
   */
  irreversible: true;
}

/** A profile as `updateProfileSubject` returns it. */
export interface MarketplaceProfile {
  id: string;
  subject: string;
}

/** The marketplace GraphQL operations a platform calls (interface section 1). */
export interface MarketplaceGraphQLClient {
  /** Creates a marketplace authentication token for one actor; hand it to that actor's browser only. */
  createProfileAuthToken(profileId: ProfileIdentity): Promise<{ token: string }>;
  /** Permanently and irrevocably changes a profile's subject. Requires `irreversible: true`. */
  updateProfileSubject(input: UpdateProfileSubjectInput): Promise<MarketplaceProfile>;
}

const FACTORY = 'createMarketplaceGraphQLClient';
const OPTION_KEYS = ['endpoint', 'apiToken', 'timeoutMs', 'fetch'] as const;
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

const CREATE_PROFILE_AUTH_TOKEN = `mutation CreateProfileAuthToken($input: CreateProfileAuthTokenInput!) {
  createProfileAuthToken(input: $input) { data { token } }
}`;

const UPDATE_PROFILE_SUBJECT = `mutation UpdateProfileSubject($input: UpdateProfileSubjectInput!) {
  updateProfileSubject(input: $input) { data { id subject } }
}`;

/**
 * A client for the marketplace's GraphQL operations `createProfileAuthToken` and
 * `updateProfileSubject`. Failures throw {@link ConnectorError}s: `ERR_TIMEOUT`,
 * `ERR_CONNECTOR_UNREACHABLE`, `ERR_CONNECTOR_AUTH` (401/403), `ERR_CONNECTOR_RESPONSE` (another
 * status or an unexpected body), or a {@link MarketplaceGraphQLError} (`ERR_GRAPHQL`) carrying the
 * answer's `errors` array.
 *
 * @example
 * ```ts
 * const marketplace = createMarketplaceGraphQLClient({ endpoint: env.MARKETPLACE_GRAPHQL_URL, apiToken: env.PLATFORM_API_TOKEN });
 * const { token } = await marketplace.createProfileAuthToken('u-alice');
 * await marketplace.updateProfileSubject({ id: 'u-alice', subject: 'user-42', irreversible: true });
 * ```
 */
export function createMarketplaceGraphQLClient(options: MarketplaceGraphQLClientOptions): MarketplaceGraphQLClient {
  const record = checkOptionKeys(FACTORY, options, OPTION_KEYS);
  const endpoint = checkEndpoint(requireNonEmptyString(FACTORY, record, 'endpoint'));
  const apiToken = requireNonEmptyString(FACTORY, record, 'apiToken');
  if (/[\s]/.test(apiToken)) throw new InvalidOptionsError(`${FACTORY}: option "apiToken" must not contain whitespace`);
  const timeoutMs = integerOption(FACTORY, 'timeoutMs', record.timeoutMs, 10_000, 1, 300_000);
  const fetchImpl = optionalFunction<typeof fetch>(FACTORY, record, 'fetch') ?? globalThis.fetch;

  async function call(query: string, variables: Record<string, unknown>, field: string): Promise<unknown> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    let status: number;
    let text: string;
    try {
      let response: Response;
      try {
        response = await fetchImpl(endpoint, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json', Authorization: `Bearer ${apiToken}` },
          body: JSON.stringify({ query, variables }),
          signal: controller.signal,
          // Never follow: a redirect would carry the API token to an address nobody configured.
          redirect: 'manual',
        });
      } catch (error) {
        if (controller.signal.aborted) throw timedOut(timeoutMs, error);
        throw new ConnectorError('ERR_CONNECTOR_UNREACHABLE', 'Could not reach the marketplace GraphQL endpoint', undefined, { cause: error });
      }
      status = response.status;
      try {
        text = await response.text();
      } catch (error) {
        if (controller.signal.aborted) throw timedOut(timeoutMs, error);
        throw new ConnectorError('ERR_CONNECTOR_RESPONSE', 'The marketplace GraphQL answer could not be read', status, { cause: error });
      }
    } finally {
      clearTimeout(timer);
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const errors = graphQLErrors(body);
    if (errors !== undefined) throw new MarketplaceGraphQLError(errors, status);
    if (status === 401 || status === 403) {
      throw new ConnectorError('ERR_CONNECTOR_AUTH', 'The marketplace refused the platform API token', status);
    }
    if (status < 200 || status >= 300) {
      throw new ConnectorError('ERR_CONNECTOR_RESPONSE', `The marketplace GraphQL endpoint answered ${status}`, status);
    }
    const data = (body as { data?: Record<string, unknown> } | undefined)?.data?.[field];
    const payload = (data as { data?: unknown } | null | undefined)?.data;
    if (typeof payload !== 'object' || payload === null) {
      throw new ConnectorError('ERR_CONNECTOR_RESPONSE', `The marketplace GraphQL answer has no ${field}.data`, status);
    }
    return payload;
  }

  return {
    async createProfileAuthToken(profileId) {
      if (typeof profileId !== 'string' || profileId.length === 0) throw new TypeError('createProfileAuthToken(profileId): profileId must be a non-empty string');
      const payload = (await call(CREATE_PROFILE_AUTH_TOKEN, { input: { profileId } }, 'createProfileAuthToken')) as { token?: unknown };
      if (typeof payload.token !== 'string' || payload.token.length === 0) {
        throw new ConnectorError('ERR_CONNECTOR_RESPONSE', 'The marketplace GraphQL answer has no token', 200);
      }
      return { token: payload.token };
    },

    async updateProfileSubject(input) {
      const { id, subject, irreversible } = (input ?? {}) as Partial<UpdateProfileSubjectInput>;
      if (irreversible !== true) {
        throw new TypeError('updateProfileSubject: the change is permanent and irrevocable; pass { irreversible: true } to confirm');
      }
      if (typeof id !== 'string' || id.length === 0) throw new TypeError('updateProfileSubject: id must be a non-empty string');
      if (typeof subject !== 'string' || subject.length === 0) throw new TypeError('updateProfileSubject: subject must be a non-empty string');
      const payload = (await call(UPDATE_PROFILE_SUBJECT, { input: { id, subject } }, 'updateProfileSubject')) as Partial<MarketplaceProfile>;
      if (typeof payload.id !== 'string' || typeof payload.subject !== 'string') {
        throw new ConnectorError('ERR_CONNECTOR_RESPONSE', 'The marketplace GraphQL answer has no profile id and subject', 200);
      }
      return { id: payload.id, subject: payload.subject };
    },
  };
}

function timedOut(timeoutMs: number, cause: unknown): ConnectorError {
  return new ConnectorError('ERR_TIMEOUT', `The marketplace GraphQL endpoint did not answer within ${timeoutMs} ms`, undefined, { cause });
}

function graphQLErrors(body: unknown): GraphQLErrorEntry[] | undefined {
  const errors = (body as { errors?: unknown } | undefined)?.errors;
  if (!Array.isArray(errors) || errors.length === 0) return undefined;
  return errors.map((entry: unknown) => {
    const { message, path, extensions } = (entry ?? {}) as Partial<GraphQLErrorEntry>;
    const error: GraphQLErrorEntry = { message: typeof message === 'string' ? message : 'unknown error' };
    if (Array.isArray(path)) error.path = path;
    if (typeof extensions === 'object' && extensions !== null) error.extensions = extensions;
    return error;
  });
}

function checkEndpoint(endpoint: string): string {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new InvalidOptionsError(`${FACTORY}: option "endpoint" must be an absolute URL, such as https://marketplace.example/graphql`);
  }
  const loopback = LOOPBACK_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new InvalidOptionsError(`${FACTORY}: option "endpoint" must use https (http is allowed for localhost only): the API token travels with every call`);
  }
  return url.href;
}
