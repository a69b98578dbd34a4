/** The mini marketplace page behind `embedded-marketplace serve`. */
export { createSimulator } from './server.js';
export type { Simulator, SimulatorLogEntry, SimulatorOptions, SimulatorState } from './server.js';
