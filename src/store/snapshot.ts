import type { ClaimInput, EntitySnapshot, EntityReads, OperationStore } from './types.js';

/**
 * Reads a claim's {@link EntitySnapshot} with separate calls. A stop-gap for adapters whose claim
 * does not read it in the same transaction yet: correct when one process serves the store (the
 * operation is already held), not atomic across instances.
 */
export async function readSnapshot(reads: EntityReads & Pick<OperationStore, 'isDeleted'>, input: ClaimInput): Promise<EntitySnapshot> {
  if (input.key.startsWith('resource:')) {
    const [resource, resourceDeleted, credentials] = await Promise.all([
      reads.getResource(input.targetId),
      reads.isDeleted('resource', input.targetId),
      input.kind === 'deprovision' ? reads.listCredentials(input.targetId) : Promise.resolve([]),
    ]);
    return { resource, resourceDeleted, credential: undefined, credentialDeleted: false, credentials };
  }
  const [credential, credentialDeleted] = await Promise.all([reads.getCredential(input.targetId), reads.isDeleted('credential', input.targetId)]);
  const parentId = input.parentId ?? credential?.resourceId;
  const [resource, resourceDeleted] = parentId === undefined
    ? [undefined, false]
    : await Promise.all([reads.getResource(parentId), reads.isDeleted('resource', parentId)]);
  return { resource, resourceDeleted, credential, credentialDeleted, credentials: [] };
}
