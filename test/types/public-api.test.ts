/**
 * Type-level tests of the public API: this file is type-checked in CI (`npm run typecheck`), so a
 * change that makes misuse compile, or correct use stop compiling, fails the build. The runtime
 * part only checks that the names exist.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  accepted,
  BadRequestError,
  marketplaceRouter,
  memoryStore,
  MarketplaceError,
  type ErrorCode,
  type MarketplaceRouter,
  type ProviderHandlers,
} from '../../src/index.js';
import { createSigner, generateKeyPair } from '../../src/testkit/index.js';

const handlers: ProviderHandlers = {
  provision: ({ plan }) => `Your ${plan} bonnet is ready`,
  changePlan: async () => ({ message: 'Resized' }),
  deprovision: () => undefined,
  provisionCredentials: ({ resourceId }) => ({ credentials: { BONNETS_URL: `https://u:p@bonnets.example/${resourceId}` } }),
  deprovisionCredentials: () => accepted('Revoking'),
};

function typeChecks(router: MarketplaceRouter): void {
  // @ts-expect-error handlers are required
  marketplaceRouter({ store: memoryStore() });
  // @ts-expect-error a credential handler must answer credentials, not a message
  const wrong: ProviderHandlers = { ...handlers, provisionCredentials: () => 'done' };
  void wrong;
  // @ts-expect-error accepted() takes a message
  accepted(42);
  // @ts-expect-error completion state is done or error
  void router.complete({ entity: 'resource', id: 'r1' }, { state: 'finished' });
  // @ts-expect-error an error completion needs a message for the user
  void router.complete({ entity: 'resource', id: 'r1' }, { state: 'error' });
  // @ts-expect-error entity is resource or credential
  void router.complete({ entity: 'profile', id: 'r1' }, { state: 'done' });
  // @ts-expect-error quantity is a number
  void router.recordUsage('r1', 'requests', '5');
  // @ts-expect-error unknown error codes do not compile
  const code: ErrorCode = 'ERR_WHATEVER';
  void code;
  // @ts-expect-error signing needs the host the provider sees
  createSigner({ masterPrivateKey: generateKeyPair().privateKey }).sign({ method: 'PUT', url: '/v1/resources/r1' });
}

function narrowing(error: unknown): number {
  if (error instanceof MarketplaceError) {
    switch (error.code) {
      case 'ERR_UNKNOWN_PLAN':
        return error.status;
      default:
        return 0;
    }
  }
  return -1;
}

describe('public API types', () => {
  it('exports the documented runtime names', () => {
    assert.equal(typeof marketplaceRouter, 'function');
    assert.equal(typeof typeChecks, 'function');
    assert.equal(narrowing(new BadRequestError('Unknown plan huge', 'ERR_UNKNOWN_PLAN')), 400);
  });
});
