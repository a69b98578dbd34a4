/**
 * The mini marketplace page behind `embedded-marketplace serve`. Its public types are every type
 * of ./types.ts; which of them the package exports is listed once, in src/testkit/index.ts.
 */
export { createSimulator } from './server.js';
export type * from './types.js';
