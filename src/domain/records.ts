/**
 * The domain leaf: what the marketplace provisions, as every layer of this package sees it.
 * Imports nothing of ours (errors excepted), so that the store, the operation table, the core and
 * the adapters can all depend on it without depending on each other.
 */

/** A feature value of a plan (section 2.4): number, string or boolean. */
export type Scalar = string | number | boolean;
/** Feature name → scalar value. */
export type Features = Record<string, Scalar>;
/** Credential key (environment-variable name) → value. Secret. */
export type CredentialValues = Record<string, string>;

/** A provisioned resource as the provider keeps it. */
export interface ResourceRecord {
  id: string;
  product: string;
  plan: string;
  region: string;
  features: Features;
  /** The message answered when it was provisioned, replayed to an identical repeated PUT. */
  message: string;
  createdAt: number;
  updatedAt: number;
}

/** A provisioned credential set. `values` are plaintext here; durable adapters encrypt them at rest. */
export interface CredentialRecord {
  id: string;
  resourceId: string;
  values: CredentialValues;
  /** The message answered when it was provisioned, replayed to an identical repeated PUT. */
  message: string;
  createdAt: number;
}

/** The five state-changing operations of section 4.3. */
export type OperationKind = 'provision' | 'changePlan' | 'deprovision' | 'provisionCredentials' | 'deprovisionCredentials';

/** The properties of the request an operation carries out, kept so a 202 can be completed later. */
export type OperationRequest =
  | { kind: 'provision'; product: string; plan: string; region: string; features: Features }
  | { kind: 'changePlan'; plan: string; features?: Features }
  | { kind: 'deprovision' }
  | { kind: 'provisionCredentials'; resourceId: string }
  | { kind: 'deprovisionCredentials' };

/** The two kinds of entity the marketplace provisions: the first half of an operation key and of a tombstone. */
export type EntityKind = 'resource' | 'credential';

/** The key of the operation lock for an entity. */
export function operationKey(entity: EntityKind, id: string): string {
  return `${entity}:${id}`;
}
