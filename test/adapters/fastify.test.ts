/**
 * The Fastify adapter through the shared adapter suite and the acceptance suite over HTTP, on
 * Fastify 5 (sign-in kept by @fastify/session 11) and Fastify 4, with @fastify/session 10 (its
 * major for Fastify 4: the peer range allows both) and with the package's sealed cookie.
 */
import { createRequire } from 'node:module';
import fastify5 from 'fastify';
import { adapterAcceptance, adapterConformance } from './conformance.js';
import { fastifyHost, type FastifyMajor } from './fastify-hosts.js';

// Fastify 4 beside 5 in the dev dependencies, under the alias `fastify4`.
const fastify4 = createRequire(import.meta.url)('fastify4') as FastifyMajor;

for (const adapter of [
  fastifyHost('Fastify 5 (@fastify/session)', fastify5, '@fastify/session'),
  fastifyHost('Fastify 4 (@fastify/session 10)', fastify4, '@fastify/session 10'),
  fastifyHost('Fastify 4 (sealed cookie)', fastify4, 'sealed cookie'),
]) {
  adapterConformance(adapter);
  adapterAcceptance(adapter);
}
