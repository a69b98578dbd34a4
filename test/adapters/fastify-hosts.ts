/**
 * The Fastify adapter as a host app registers it, on the Fastify major given: for /v1/sso
 * @fastify/cookie and @fastify/session before the plugin (@fastify/session 11 with @fastify/cookie
 * 11 on Fastify 5; 10 with cookie 9 on Fastify 4, the majors made for it, installed under the
 * aliases `fastify-session10` and `fastify-cookie9`) or the package's sealed cookie, the dashboard
 * reading `app.marketplace.session(request)`, a JSON 404 handler of the host's own.
 */
import type { FastifyInstance } from 'fastify';
import fastifyCookie from '@fastify/cookie';
import fastifySession from '@fastify/session';
import fastifyCookie9 from 'fastify-cookie9';
import fastifySession10 from 'fastify-session10';
import { marketplacePlugin, type FastifySsoOptions } from '../../src/adapters/fastify.js';
import type { CommonProviderOptions } from '../../src/core/types.js';
import type { AdapterServer, AdapterUnderTest } from './conformance.js';
import { dashboardAnswer, SESSION_SECRET } from './web-hosts.js';

/** What the tests need of a Fastify major: its factory (Fastify 4 ships under the alias `fastify4`). */
export type FastifyMajor = (options?: Record<string, unknown>) => FastifyInstance;

/** Where a host keeps the marketplace sign-in. */
export type FastifySessionKind = '@fastify/session' | '@fastify/session 10' | 'sealed cookie';

/**
 * A Fastify host app with the marketplace plugin registered: single sign-on kept in `session`,
 * and anything `configure` adds before the plugin (a content-type parser of the host's, hooks).
 */
export async function fastifyApp(fastify: FastifyMajor, options: CommonProviderOptions, sso: boolean, session: FastifySessionKind, configure?: (app: FastifyInstance) => void | Promise<void>): Promise<FastifyInstance> {
  const app = fastify();
  await configure?.(app);
  let ssoOption: FastifySsoOptions | undefined;
  const sessionOptions = { secret: 'conformance-fastify-session-secret-0123456789', cookieName: 'bonnets.sid', saveUninitialized: false, cookie: { secure: 'auto' as const, httpOnly: true, sameSite: 'lax' as const } };
  if (sso && session === '@fastify/session') {
    await app.register(fastifyCookie);
    await app.register(fastifySession, sessionOptions);
    ssoOption = {};
  } else if (sso && session === '@fastify/session 10') {
    await app.register(fastifyCookie9);
    await app.register(fastifySession10, sessionOptions);
    ssoOption = {};
  } else if (sso) {
    ssoOption = { session: { secret: SESSION_SECRET } };
  }
  await app.register(marketplacePlugin, { ...options, ...(ssoOption === undefined ? {} : { sso: ssoOption }) });
  app.get('/dashboard/:id', async (request, reply) => {
    const answer = dashboardAnswer(await app.marketplace.session(request), (request.params as { id: string }).id);
    return reply.code(answer.status).send(answer.body);
  });
  app.setNotFoundHandler((_request, reply) => void reply.code(404).send({ message: 'host app: not found' }));
  return app;
}

export function fastifyHost(name: string, fastify: FastifyMajor, session: FastifySessionKind): AdapterUnderTest {
  return {
    name,
    async start(options, sso): Promise<AdapterServer> {
      const app = await fastifyApp(fastify, options, sso, session);
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as { port: number };
      return {
        url: `http://127.0.0.1:${port}`,
        host: `127.0.0.1:${port}`,
        // Fastify's onClose closes the provider (outbox and store) too.
        close: async () => {
          app.server.closeAllConnections();
          await app.close();
        },
      };
    },
  };
}
