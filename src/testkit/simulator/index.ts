/** The mini marketplace page behind `embedded-marketplace serve`. */
export { createSimulator } from './server.js';
export type {
  Simulator,
  SimulatorCallback,
  SimulatorCallbackAttempt,
  SimulatorCredentialSet,
  SimulatorLogEntry,
  SimulatorOptions,
  SimulatorResponse,
  SimulatorSsoHop,
  SimulatorSsoStep,
  SimulatorState,
} from './server.js';
