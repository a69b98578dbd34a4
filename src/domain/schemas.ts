import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { BadRequestError } from '../errors.js';
import type { Features } from './records.js';

/** gaps.md, "Labels and regions". */
export const LABEL_PATTERN = '^[a-z0-9][a-z0-9\\-_]{1,128}$';
export const REGION_PATTERN = '^([a-z0-9][a-z0-9\\-_]{1,63})::([a-z0-9][a-z0-9\\-_]{1,63})$';
/** gaps.md: credential keys are environment-variable names. */
export const CREDENTIAL_KEY = /^[A-Z][A-Z0-9_]{0,127}$/;
/** Ids are opaque URL-safe strings (29 base32 characters in practice); bound them all the same. */
export const ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_\\-.~]{0,127}$';
const ID_REGEX = new RegExp(ID_PATTERN);
export const MAX_FEATURES = 256;

/** Keys that would reach Object.prototype if ever copied naively. They are refused outright. */
const POISONED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

const featureValue = { type: ['string', 'number', 'boolean'], maxLength: 1024 } as const;
const features = {
  type: 'object',
  maxProperties: MAX_FEATURES,
  propertyNames: { minLength: 1, maxLength: 128, not: { enum: [...POISONED_KEYS] } },
  additionalProperties: featureValue,
} as const;

// Unknown top-level fields are tolerated (gaps.md): no additionalProperties: false anywhere but features.
const provisionSchema = {
  type: 'object',
  required: ['id', 'product', 'plan', 'region'],
  properties: {
    id: { type: 'string', pattern: ID_PATTERN },
    product: { type: 'string', pattern: LABEL_PATTERN },
    plan: { type: 'string', pattern: LABEL_PATTERN },
    region: { type: 'string', pattern: REGION_PATTERN },
    features,
  },
} as const;

const changePlanSchema = {
  type: 'object',
  required: ['plan'],
  properties: { plan: { type: 'string', pattern: LABEL_PATTERN }, features },
} as const;

const credentialSchema = {
  type: 'object',
  required: ['id', 'resource_id'],
  properties: {
    id: { type: 'string', pattern: ID_PATTERN },
    resource_id: { type: 'string', pattern: ID_PATTERN },
  },
} as const;

export interface ProvisionBody {
  id: string;
  product: string;
  plan: string;
  region: string;
  features?: Features;
}
export interface ChangePlanBody {
  plan: string;
  features?: Features;
}
export interface CredentialBody {
  id: string;
  resource_id: string;
}

// Compiled once at load: compiling per request would dominate the hot path.
const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
const validators = {
  provision: ajv.compile<ProvisionBody>(provisionSchema),
  changePlan: ajv.compile<ChangePlanBody>(changePlanSchema),
  credential: ajv.compile<CredentialBody>(credentialSchema),
};

function describe(error: ErrorObject | undefined): string {
  if (error === undefined) return 'Invalid request body';
  const field = error.instancePath === '' ? (error.params as { missingProperty?: string }).missingProperty ?? 'body' : error.instancePath.slice(1).replaceAll('/', '.');
  switch (error.keyword) {
    case 'required':
      return `Missing required field: ${field}`;
    case 'pattern':
      return `Invalid value for ${field}`;
    case 'type':
      return `Field ${field} must be of type ${String((error.params as { type?: unknown }).type)}`;
    case 'maxProperties':
      return `Too many entries in ${field}`;
    case 'propertyNames':
      return `Invalid name in ${field}`;
    default:
      return `Invalid value for ${field}`;
  }
}

function check<T>(validate: ValidateFunction<T>, body: unknown): T {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequestError('Request body must be a JSON object', 'ERR_VALIDATION');
  if (!validate(body)) throw new BadRequestError(describe(validate.errors?.[0]), 'ERR_VALIDATION');
  return body;
}

export const validateProvision = (body: unknown): ProvisionBody => check(validators.provision, body);
export const validateChangePlan = (body: unknown): ChangePlanBody => check(validators.changePlan, body);
export const validateCredential = (body: unknown): CredentialBody => check(validators.credential, body);

/** A path id must satisfy the same rule as body ids (it is used as a store key and in log lines). */
export function validatePathId(id: string | undefined): string {
  if (id === undefined || !ID_REGEX.test(id)) throw new BadRequestError('Invalid id in path', 'ERR_VALIDATION');
  return id;
}

/** Copy features into a null-prototype object so nothing downstream can reach a prototype. */
export function cleanFeatures(input: Features | undefined): Features {
  const out = Object.create(null) as Features;
  if (input === undefined) return out;
  for (const key of Object.keys(input)) {
    if (!POISONED_KEYS.has(key)) out[key] = input[key]!;
  }
  return out;
}

/** Credential sets from handlers: at least one pair, env-var keys, string values. */
export function checkCredentialValues(values: unknown): string | undefined {
  if (typeof values !== 'object' || values === null || Array.isArray(values)) return 'credentials must be an object';
  const entries = Object.entries(values);
  if (entries.length === 0) return 'credentials must hold at least one pair';
  for (const [key, value] of entries) {
    if (!CREDENTIAL_KEY.test(key)) return `credential key ${JSON.stringify(key.slice(0, 40))} is not an environment-variable name`;
    if (typeof value !== 'string') return `credential ${key} must be a string`;
  }
  return undefined;
}

/** Order-independent equality of two feature maps. */
export function sameFeatures(a: Features, b: Features): boolean {
  const keysA = Object.keys(a);
  if (keysA.length !== Object.keys(b).length) return false;
  return keysA.every((key) => Object.prototype.hasOwnProperty.call(b, key) && b[key] === a[key]);
}

/** Stable text of a feature map for fingerprints. */
export function featuresFingerprint(value: Features | undefined): string {
  if (value === undefined) return '-';
  return JSON.stringify(Object.keys(value).sort().map((key) => [key, value[key]]));
}
