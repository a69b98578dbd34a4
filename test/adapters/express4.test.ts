import { createRequire } from 'node:module';
import { adapterAcceptance, adapterConformance } from './conformance.js';
import { expressHost, type ExpressMajor } from './express-hosts.js';

// Express 4 beside 5 in the dev dependencies, under the alias `express4` (it ships no types).
const express4 = createRequire(import.meta.url)('express4') as ExpressMajor;

const adapter = expressHost('Express 4', express4);
adapterConformance(adapter);
adapterAcceptance(adapter);
