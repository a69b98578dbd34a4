import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvalidOptionsError, marketplaceRouter, type ProviderHandlers } from '../../src/index.js';
import { checkCatalog } from '../../src/domain/catalog.js';
import { LABEL_PATTERN, REGION_PATTERN, validateProvision } from '../../src/domain/schemas.js';

// Start-up says what the first request would: a catalog name the interface's patterns refuse
// stops marketplaceRouter at construction, naming the name and the pattern, rather than starting
// and then answering 400 to every request for it.

const handlers: ProviderHandlers = {
  provision: () => undefined,
  changePlan: () => undefined,
  deprovision: () => undefined,
  provisionCredentials: () => ({ credentials: { A: 'b' } }),
  deprovisionCredentials: () => undefined,
};

function startError(catalog: unknown): InvalidOptionsError {
  try {
    const router = marketplaceRouter({ handlers, catalog: catalog as never, logger: false, outbox: false });
    void router.close();
  } catch (error) {
    assert.ok(error instanceof InvalidOptionsError, String(error));
    return error;
  }
  assert.fail(`marketplaceRouter started with the catalog ${JSON.stringify(catalog)}`);
}

describe('the catalog at construction', () => {
  it('refuses the one-letter plans s and m, naming the plan and the label pattern', () => {
    const error = startError({ bonnets: { plans: ['s', 'm'] } });
    assert.equal(error.code, 'ERR_INVALID_OPTIONS');
    assert.match(error.message, /^marketplaceRouter: catalog\.bonnets\.plans "s" does not match/);
    assert.ok(error.message.includes(LABEL_PATTERN), error.message);
    assert.match(error.message, /at least 2/);
    assert.match(error.message, /every request for it would answer 400/);
  });

  it('names a product, an uppercase plan (with its lowercase form) and a region without a platform', () => {
    assert.match(startError({ 'My Bonnets': { plans: ['small'] } }).message, /catalog product "My Bonnets"/);
    assert.match(startError({ bonnets: { plans: ['Small'] } }).message, /labels are lowercase: "small"/);
    const region = startError({ bonnets: { plans: ['small'], regions: ['us-east-1'] } });
    assert.match(region.message, /catalog\.bonnets\.regions "us-east-1"/);
    assert.ok(region.message.includes(REGION_PATTERN), region.message);
    assert.match(region.message, /aws::us-east-1/);
  });

  it('refuses a product without plans and an empty region list', () => {
    assert.match(startError({ bonnets: { plans: [] } }).message, /catalog\.bonnets\.plans is empty/);
    assert.match(startError({ bonnets: { plans: ['small'], regions: [] } }).message, /catalog\.bonnets\.regions is empty/);
  });

  it('starts with the README catalog', async () => {
    const router = marketplaceRouter({ handlers, logger: false, outbox: false, catalog: { bonnets: { plans: ['small', 'large'], regions: ['aws::us-east-1'] } } });
    await router.close();
  });

  it('accepts a name exactly when a provisioning request may carry it', () => {
    const body = (product: string, plan: string, region: string) => ({ id: 'r1', product, plan, region });
    const accepted = (f: () => unknown) => {
      try {
        f();
        return true;
      } catch {
        return false;
      }
    };
    const label = fc.oneof(fc.string({ maxLength: 4 }), fc.stringMatching(/^[a-zA-Z0-9_ -]{1,6}$/), fc.constantFrom('ab', 'a'.repeat(129), 'a'.repeat(130), '-ab', '0-_'));
    const region = fc.oneof(fc.string({ maxLength: 6 }), fc.stringMatching(/^[a-z0-9-]{1,4}(::[a-z0-9_-]{1,4})?$/), fc.constantFrom('all::global', 'aws::us-east-1', 'a::bb'));
    fc.assert(fc.property(label, label, region, (product, plan, where) => {
      const started = accepted(() => checkCatalog({ [product]: { plans: [plan], regions: [where] } }, 'test'));
      const served = accepted(() => validateProvision(body(product, plan, where)));
      assert.equal(started, served, JSON.stringify({ product, plan, where }));
    }), { numRuns: 500 });
  });
});
