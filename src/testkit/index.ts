/**
 * `embedded-marketplace/testkit`: test a provider without the marketplace. A signer that signs like
 * the marketplace, test keys, the fake connector (tokens, SSO codes, resource check, callbacks),
 * the acceptance suite as a library, masterkey.json helpers and the mini marketplace page.
 *
 * @example
 * ```ts
 * import { generateKeyPair, createSigner } from 'embedded-marketplace/testkit';
 * const master = generateKeyPair();   // give master.publicKey to marketplaceRouter({ masterKey })
 * const signer = createSigner({ masterPrivateKey: master.privateKey });
 * const headers = signer.sign({ method: 'DELETE', url: '/v1/resources/r1', host: '127.0.0.1:4567' });
 * ```
 */
export { generateKeyPair, publicKeyOf } from './keys.js';
export type { KeyPair } from './keys.js';
export { createSigner } from './signer.js';
export type { SignInput, Signer, SignerOptions } from './signer.js';
export { createFakeConnector } from './fake-connector.js';
export type {
  FakeConnector,
  FakeConnectorOptions,
  FakeConnectorServer,
  FakeConnectorTarget,
  FakeFailure,
  FakeResource,
  FakeTokenProblem,
  FakeTokenRequest,
  ReceivedCallback,
} from './fake-connector.js';
export {
  CASES,
  FEATURES,
  FEATURE_DEPENDENCIES,
  OPTIONAL_FEATURES,
  effectiveFeatures,
  formatCase,
  formatHeader,
  formatSummary,
  newMarketplaceId,
  runAcceptance,
  shouldColor,
} from './acceptance/index.js';
export type {
  AcceptanceCase,
  AcceptanceOptions,
  AcceptanceReport,
  CaseId,
  CaseSpec,
  CaseStatus,
  Feature,
  FormatOptions,
  OptionalFeature,
  RecordedCallback,
  RecordedRequest,
  RecordedResponse,
} from './acceptance/index.js';
export {
  DEFAULT_MASTER_KEY_FILE,
  generateMasterKey,
  MasterKeyError,
  parseMasterKey,
  readMasterKey,
  toMasterKeyFile,
  writeMasterKey,
} from './masterkey.js';
export type { MasterKey, MasterKeyFile } from './masterkey.js';
export { createSimulator } from './simulator/index.js';
export type {
  Simulator,
  SimulatorCallback,
  SimulatorCallbackAttempt,
  SimulatorCredentialSet,
  SimulatorLogEntry,
  SimulatorOptions,
  SimulatorResponse,
  SimulatorSsoHop,
  SimulatorSsoStep,
  SimulatorState,
} from './simulator/index.js';
export { storeConformance, storeContract, operationTableContract, heldBy } from './conformance/index.js';
export type { StoreConformanceOptions, StoreContractOptions, StoreUnderTest, TestCaseContext, TestFunctions } from './conformance/index.js';
export { storeDifferential, checkDifferential, assertDifferential } from './differential/index.js';
export type { DifferentialOptions, DifferentialReport, DifferentialTarget, SequenceShape, StoreDifferentialOptions } from './differential/index.js';
export { createCipher, generateEncryptionKey, DecryptionError, MissingEncryptionKeyError } from '../store/crypto.js';
export type { SecretCipher, EncryptionKeyOption, EncryptionKeyring } from '../store/crypto.js';
