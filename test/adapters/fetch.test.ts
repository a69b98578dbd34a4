import { adapterAcceptance, adapterConformance } from './conformance.js';
import { fetchHost } from './web-hosts.js';

adapterConformance(fetchHost);
adapterAcceptance(fetchHost);
