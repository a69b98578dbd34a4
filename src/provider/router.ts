/**
 * Where `marketplaceRouter` lived before the core: kept so that imports of this path (and of
 * `dist/provider/router.js`) go on working. The adapter is src/adapters/express.ts.
 */
export { marketplaceRouter } from '../adapters/express.js';
export type { CompletionTarget, ConnectorOptions, MarketplaceRouter, MarketplaceRouterOptions, SsoOptions } from '../adapters/express.js';
