/** The acceptance suite as a library: `runAcceptance(options)` and the terminal formatting the CLI uses. */
export { runAcceptance, effectiveFeatures } from './run.js';
export { CASES, caseSpec } from './cases.js';
export type { CaseId, CaseSpec } from './cases.js';
export { formatCase, formatHeader, formatSummary, shouldColor } from './format.js';
export type { FormatOptions } from './format.js';
export { newMarketplaceId } from './http.js';
export { FEATURES, FEATURE_DEPENDENCIES, OPTIONAL_FEATURES } from './types.js';
export type {
  AcceptanceCase,
  AcceptanceOptions,
  AcceptanceReport,
  CaseStatus,
  Feature,
  OptionalFeature,
  RecordedCallback,
  RecordedRequest,
  RecordedResponse,
} from './types.js';
