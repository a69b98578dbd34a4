import { memoryStore } from '../../src/store/memory.js';
import { storeContract } from './contract.js';

storeContract('memory', async () => {
  const store = memoryStore();
  return { store, cleanup: () => store.close() };
});
