import { adapterAcceptance, adapterConformance } from './conformance.js';
import { nodeHost } from './web-hosts.js';

adapterConformance(nodeHost);
adapterAcceptance(nodeHost);
