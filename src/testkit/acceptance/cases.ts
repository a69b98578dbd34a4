import type { Feature } from './types.js';

/** One case of the acceptance suite: stable id, feature, name, and what a correct provider answers. */
export interface CaseSpec {
  id: string;
  feature: Feature;
  name: string;
  expected: string;
}

const DONE = 'then a "done" callback';
const REFUSAL = (status: number) => `${status} with a JSON {"message"}, answered on the request itself (not 202)`;

/** Every case, in the order a full run reports them. */
export const CASES = [
  { id: 'provision.new', feature: 'provision', name: 'provisions a new resource', expected: `201 (or 204) with a JSON {"message"}, or 202 ${DONE} without credentials` },
  { id: 'provision.repeat', feature: 'provision', name: 'repeating the same provisioning succeeds', expected: `201 or 204 again, or 202 ${DONE}` },
  { id: 'provision.conflict-plan', feature: 'provision', name: 'the same id with another plan conflicts', expected: REFUSAL(409) },
  { id: 'provision.conflict-product', feature: 'provision', name: 'the same id with another product conflicts', expected: REFUSAL(409) },
  { id: 'provision.conflict-region', feature: 'provision', name: 'the same id with another region conflicts', expected: REFUSAL(409) },
  { id: 'provision.faulty-product', feature: 'provision', name: 'an unknown product is refused', expected: REFUSAL(400) },
  { id: 'provision.faulty-plan', feature: 'provision', name: 'an unknown plan is refused', expected: REFUSAL(400) },
  { id: 'provision.faulty-region', feature: 'provision', name: 'an unknown region is refused', expected: REFUSAL(400) },
  { id: 'signature.missing', feature: 'provision', name: 'an unsigned request is refused', expected: REFUSAL(401) },
  { id: 'signature.bad', feature: 'provision', name: 'a signing key not endorsed by the master key is refused', expected: REFUSAL(401) },
  { id: 'signature.tampered', feature: 'provision', name: 'a body changed after signing is refused', expected: REFUSAL(401) },
  { id: 'signature.stale-date', feature: 'provision', name: 'a Date 10 minutes in the past is refused', expected: REFUSAL(401) },
  { id: 'signature.future-date', feature: 'provision', name: 'a Date 10 minutes in the future is refused', expected: REFUSAL(401) },
  { id: 'credentials.new', feature: 'credentials', name: 'provisions a credential set', expected: `201 with {"message", "credentials": {"KEY": "value"}}, or 202 ${DONE} carrying the credentials` },
  { id: 'credentials.repeat', feature: 'credentials', name: 'repeating it returns the same credentials', expected: `201 with the same credentials (or 204), or 202 ${DONE} with the same credentials` },
  { id: 'credentials.unknown-resource', feature: 'credentials', name: 'credentials for an unknown resource are not found', expected: REFUSAL(404) },
  { id: 'rotation.new-set', feature: 'credential-rotation', name: 'rotation: the new credential set differs from the old one', expected: `201 with credentials that differ from the old set, or 202 ${DONE} with them` },
  { id: 'rotation.delete-old', feature: 'credential-rotation', name: 'rotation: the old credential set is deleted', expected: `204, or 202 ${DONE}` },
  { id: 'plan-change.change', feature: 'plan-change', name: 'changes the plan', expected: `200 or 204, or 202 ${DONE} without credentials` },
  { id: 'plan-change.faulty-plan', feature: 'plan-change', name: 'a change to an unknown plan is refused', expected: REFUSAL(400) },
  { id: 'plan-change.unknown-resource', feature: 'plan-change', name: 'a plan change of an unknown resource is not found', expected: REFUSAL(404) },
  { id: 'measures.period', feature: 'resource-measures', name: 'reports usage for the current month', expected: '200 {"resource_id", "period_start", "period_end", "measures": {"feature": integer}}, or 204 when there is no data yet' },
  { id: 'measures.bad-period', feature: 'resource-measures', name: 'a period that ends before it starts is refused', expected: '400 with a JSON {"message"}' },
  { id: 'measures.unknown-resource', feature: 'resource-measures', name: 'usage of an unknown resource is not found', expected: '404 with a JSON {"message"}' },
  { id: 'sso.sign-in', feature: 'sso', name: 'signs in through the connector', expected: '303 (or 302) to the dashboard, or 200, with a session cookie' },
  { id: 'sso.tampered', feature: 'sso', name: 'a tampered resource_id is refused', expected: 'a 4xx answer and no session cookie' },
  { id: 'sso.reused-code', feature: 'sso', name: 'a code that was already used is refused', expected: 'a 4xx answer and no session cookie' },
  { id: 'cleanup.credential', feature: 'cleanup', name: 'deletes the credential set', expected: `204, or 202 ${DONE}` },
  { id: 'cleanup.credential-again', feature: 'cleanup', name: 'deleting the credential set again is not found', expected: REFUSAL(404) },
  { id: 'cleanup.resource', feature: 'cleanup', name: 'deprovisions the resource', expected: `204, or 202 ${DONE} without credentials` },
  { id: 'cleanup.resource-again', feature: 'cleanup', name: 'deprovisioning the resource again is not found', expected: REFUSAL(404) },
  { id: 'cleanup.credentials-follow', feature: 'cleanup', name: 'credentials of a deprovisioned resource are gone with it', expected: `${REFUSAL(404)} for a credential set of the deleted resource` },
] as const satisfies readonly CaseSpec[];

/** A case id. */
export type CaseId = (typeof CASES)[number]['id'];

const BY_ID = new Map<string, CaseSpec>(CASES.map((c) => [c.id, c]));

/** The spec of a case by id. */
export function caseSpec(id: CaseId): CaseSpec {
  const spec = BY_ID.get(id);
  if (spec === undefined) throw new Error(`unknown acceptance case ${id}`);
  return spec;
}
