import type { FakeConnector } from '../fake-connector.js';

/** The features an acceptance run covers, in the order it runs them; each may be excluded. */
export const FEATURES = ['provision', 'credentials', 'credential-rotation', 'plan-change', 'resource-measures', 'sso', 'cleanup'] as const;

/** One feature of the acceptance suite (`--exclude <feature>`). */
export type Feature = (typeof FEATURES)[number];

/** What a feature needs: excluding a feature excludes every feature that depends on it. */
export const FEATURE_DEPENDENCIES: Readonly<Record<Feature, readonly Feature[]>> = {
  provision: [],
  credentials: ['provision'],
  'credential-rotation': ['credentials'],
  'plan-change': ['provision'],
  'resource-measures': ['provision'],
  sso: ['provision'],
  cleanup: ['provision'],
};

/**
 * Features a provider may leave out: when it answers that one is not configured, its cases are
 * SKIP with that reason, unless the feature is in `require` (`--require`), where they FAIL.
 *
 * @example
 * ```ts
 * const report = await runAcceptance({ ...options, require: [...OPTIONAL_FEATURES] });
 * ```
 */
export const OPTIONAL_FEATURES = ['sso'] as const;

/**
 * A feature a provider may leave out (`--require <feature>` makes it mandatory).
 *
 * @example
 * ```ts
 * const required: OptionalFeature[] = ['sso'];
 * ```
 */
export type OptionalFeature = (typeof OPTIONAL_FEATURES)[number];

/**
 * The outcome of a case: `passed` (the check was made and held), `failed`, `skipped` (not run: a
 * feature the provider does not have, or a case whose prerequisite failed) or `not-checked` (run,
 * but the suite could not make its check, e.g. a conflict with a made-up product that the
 * provider refused as unknown; never counted as passed).
 *
 * @example
 * ```ts
 * const unchecked = report.cases.filter((c) => c.status === ('not-checked' satisfies CaseStatus));
 * ```
 */
export type CaseStatus = 'passed' | 'failed' | 'skipped' | 'not-checked';

/** Options of {@link runAcceptance}. */
export interface AcceptanceOptions {
  /** The provider's base URL, e.g. `http://127.0.0.1:4567` (a trailing `/v1` is ignored). */
  url: string;
  /** The test master private key (32-byte seed, base64 or base64url), e.g. `readMasterKey().privateKey`. */
  masterPrivateKey: string;
  /** Product label to provision. */
  product: string;
  /** Plan label to provision. */
  plan: string;
  /** A second valid plan: the plan change goes to it and the plan conflict uses it. Required unless `plan-change` is excluded. */
  newPlan?: string;
  /** Region to provision in. Default `all::global`. */
  region?: string;
  /** A second valid product for the product conflict (without it a made-up one is used and 400 is accepted too). */
  conflictProduct?: string;
  /** A second valid region for the region conflict (without it a made-up one is used and 400 is accepted too). */
  conflictRegion?: string;
  /** Credential rotation strategy: `multiple` (swap: new set first) or `single` (replace: old set deleted first). Default `multiple`. */
  credential?: 'single' | 'multiple';
  /**
   * The OAuth client the provider uses at the connector (CONNECTOR_CLIENT_ID/CONNECTOR_CLIENT_SECRET).
   * Required for `sso` (the code exchange) and for callbacks of long-running operations (the
   * provider's client_credentials token); may be left out only when `sso` is excluded and the
   * provider answers every operation at once.
   */
  clientId?: string;
  clientSecret?: string;
  /** Port of the fake connector on 127.0.0.1 (the provider's CONNECTOR_URL). Default 0: any free port. */
  connectorPort?: number;
  /** An already listening fake connector to use instead of starting one (it is not closed afterwards). */
  connector?: FakeConnector;
  /** Features to leave out (and those that depend on them). */
  exclude?: readonly Feature[];
  /**
   * Optional features the provider must have: when it answers that one is not configured, its
   * cases FAIL instead of SKIP. Today only `sso`.
   */
  require?: readonly OptionalFeature[];
  /** How long to wait for a callback after a 202. Default 60 000 ms. */
  callbackTimeoutMs?: number;
  /** Timeout of each request to the provider. Default 60 000 ms (the marketplace's own limit). */
  requestTimeoutMs?: number;
  /** Called once the options are checked and the fake connector listens, before the first request. */
  onStart?: (info: { url: string; connectorUrl: string }) => void;
  /** Called after each case, for progress output. */
  onCase?: (result: AcceptanceCase) => void;
  /** Called with progress notes (e.g. "waiting for the callback"). */
  onProgress?: (note: string) => void;
}

/** A request as the report shows it: signature, SSO code and credential values redacted. */
export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: unknown;
}

/** An answer as the report shows it (credential values and cookie values redacted). */
export interface RecordedResponse {
  status: number;
  headers: Record<string, string>;
  body?: unknown;
}

/** A callback the provider sent for a 202 (payload redacted). */
export interface RecordedCallback {
  id: string;
  /** What the fake connector answered the last attempt, or `'none'` when nothing arrived in time. */
  status: number | 'dropped' | 'none';
  payload?: unknown;
}

/** The outcome of one case. */
export interface AcceptanceCase {
  /** Stable id, e.g. `provision.conflict-plan`. */
  id: string;
  feature: Feature;
  /** Human-readable name. */
  name: string;
  status: CaseStatus;
  /** `status === 'passed'`: false for a failed, skipped or not-checked case. */
  passed: boolean;
  /** What a correct provider answers. */
  expected: string;
  /** The judged request (the last one when a case sends several). */
  request?: RecordedRequest;
  response?: RecordedResponse;
  callback?: RecordedCallback;
  /** Why it failed, was skipped or could not be checked, or a note on a pass. */
  detail?: string;
  durationMs: number;
}

/** What {@link runAcceptance} returns (and `--json FILE` writes). */
export interface AcceptanceReport {
  url: string;
  connectorUrl: string;
  startedAt: string;
  durationMs: number;
  /**
   * True when no case failed and every 202 got its callback acknowledged (nothing is left
   * retrying in the provider's outbox). Skipped and not-checked cases do not fail a run.
   */
  passed: boolean;
  settings: {
    product: string;
    plan: string;
    newPlan: string | undefined;
    region: string;
    credential: 'single' | 'multiple';
    excluded: Feature[];
    /** The optional features the run required (`require`). */
    required: OptionalFeature[];
  };
  summary: { total: number; passed: number; failed: number; skipped: number; notChecked: number };
  /**
   * The callbacks of every 202 the provider answered during the run: `expected` 202 answers,
   * `acknowledged` of them with a callback the fake connector accepted (204) before it closed, and
   * the others by case, which the provider's outbox may still be retrying.
   */
  callbacks: { expected: number; acknowledged: number; unacknowledged: { caseId: string; callbackId: string }[] };
  cases: AcceptanceCase[];
}
