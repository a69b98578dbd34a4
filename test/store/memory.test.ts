import { memoryStore } from '../../src/store/memory.js';
import { operationTableContract, storeContract } from './contract.js';

const open = async () => {
  const store = memoryStore();
  return { store, cleanup: () => store.close() };
};

storeContract('memory', open);
operationTableContract('memory', open);
