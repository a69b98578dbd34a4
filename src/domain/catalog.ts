import { InvalidOptionsError } from '../errors.js';
import type { Catalog } from './handlers.js';
import { LABEL_PATTERN, REGION_PATTERN } from './schemas.js';

/**
 * The catalog checked against the interface's own patterns, at start-up. The marketplace sends
 * products and plans as labels and regions as `platform::location`; the request schema refuses
 * anything else with 400 before the catalog is even consulted. So a catalog name that does not
 * match would start fine and then refuse every request for it: better to say so when the router is
 * built, naming the name and the pattern.
 */

const LABEL = new RegExp(LABEL_PATTERN);
const REGION = new RegExp(REGION_PATTERN);
const LABEL_RULE = 'lowercase letters, digits, "-" and "_", 2 to 129 characters, starting with a letter or a digit';
const REGION_RULE = '"platform::location", each part 2 to 64 lowercase letters, digits, "-" or "_" starting with a letter or a digit, e.g. "aws::us-east-1" or "all::global"';

/** Why `name` is not a label, in words an operator can act on. */
function labelProblem(name: string): string {
  if (name.length < 2) return `it has ${name.length} character${name.length === 1 ? '' : 's'}, a label at least 2`;
  if (name.length > 129) return `it has ${name.length} characters, a label at most 129`;
  if (LABEL.test(name.toLowerCase())) return `labels are lowercase: "${name.toLowerCase()}"`;
  if (!/^[a-z0-9]/.test(name)) return 'a label starts with a lowercase letter or a digit';
  return 'a label holds only lowercase letters, digits, "-" and "_"';
}

function refuse(factory: string, where: string, name: string, pattern: string, why: string): never {
  throw new InvalidOptionsError(
    `${factory}: ${where} "${name}" does not match the interface's pattern ${pattern} (${why}); `
    + 'the marketplace cannot send it, and every request for it would answer 400',
  );
}

/**
 * Throws an {@link InvalidOptionsError} for the first product, plan or region name of `catalog`
 * that the interface's patterns refuse (products and plans: `LABEL_PATTERN`; regions:
 * `REGION_PATTERN`), and for a product without plans or with an empty region list. The message
 * names the option path, the name and the pattern.
 *
 * @example
 * ```ts
 * checkCatalog({ bonnets: { plans: ['small', 'large'], regions: ['aws::us-east-1'] } }, 'marketplaceRouter'); // passes
 * checkCatalog({ bonnets: { plans: ['s'] } }, 'marketplaceRouter');
 * // InvalidOptionsError: marketplaceRouter: catalog.bonnets.plans "s" does not match the interface's pattern …
 * ```
 */
export function checkCatalog(catalog: Catalog, factory: string): void {
  for (const [product, { plans, regions }] of Object.entries(catalog)) {
    if (!LABEL.test(product)) refuse(factory, 'catalog product', product, LABEL_PATTERN, `${labelProblem(product)}; ${LABEL_RULE}`);
    if (plans.length === 0) throw new InvalidOptionsError(`${factory}: catalog.${product}.plans is empty: every request for ${product} would answer 400; list its plans`);
    for (const plan of plans) {
      if (!LABEL.test(plan)) refuse(factory, `catalog.${product}.plans`, plan, LABEL_PATTERN, `${labelProblem(plan)}; ${LABEL_RULE}`);
    }
    if (regions === undefined) continue;
    if (regions.length === 0) throw new InvalidOptionsError(`${factory}: catalog.${product}.regions is empty: every request for ${product} would answer 400; list its regions, or leave "regions" out for all::global`);
    for (const region of regions) {
      if (!REGION.test(region)) refuse(factory, `catalog.${product}.regions`, region, REGION_PATTERN, REGION_RULE);
    }
  }
}
