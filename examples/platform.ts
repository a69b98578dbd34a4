/**
 * Starts the example platform: `npm run example:platform`. Listens on 127.0.0.1:$PORT (default 4568).
 * Environment: PLATFORM_ACCESS_TOKEN (required), OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET and
 * MARKETPLACE_CALLBACK_URL (all three to serve the deprecated OAuth flow), SESSION_SECRET,
 * EVENTS_SECRET, DATABASE_URL and DATABASE_SCHEMA (shared stores for several instances), LOG_LEVEL.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { postgresOAuthStore, postgresSeenEventStore } from '../src/store/postgres/index.js';
import { createPlatformApp, parsePort, PlatformConfigError, type PlatformAppOptions } from './platform-app.js';

let app: ReturnType<typeof createPlatformApp>;
let port: number;
let closeStores = async (): Promise<void> => undefined;
try {
  port = parsePort(process.env.PORT);
  const databaseUrl = process.env.DATABASE_URL ?? '';
  let stores: PlatformAppOptions['stores'];
  if (databaseUrl !== '') {
    // Several instances on one database behave as one: codes, tokens and seen events are shared.
    const connection = { connectionString: databaseUrl, ...(process.env.DATABASE_SCHEMA ? { schema: process.env.DATABASE_SCHEMA } : {}) };
    const oauth = postgresOAuthStore(connection);
    const seen = postgresSeenEventStore(connection);
    await Promise.all([oauth.ready(), seen.ready()]);
    stores = { oauth, seen };
    closeStores = async () => {
      await Promise.all([oauth.close(), seen.close()]);
    };
  }
  app = createPlatformApp(process.env, { stores });
} catch (error) {
  if (!(error instanceof PlatformConfigError)) throw error;
  console.error(`example platform: ${error.message}`);
  process.exit(1);
}

const server = createServer(app);
// An idle keep-alive connection outlives the client's own idle timeout (undici's is 4 s, a load
// balancer's about 60 s), so the client, not the server, ends it: otherwise a request sent on a
// socket just as the server closes it fails (ECONNRESET), which a busy machine makes likely.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.on('error', (error: NodeJS.ErrnoException) => {
  console.error(`example platform: cannot listen on 127.0.0.1:${port}: ${error.code ?? error.message}`);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  const { port: actual } = server.address() as AddressInfo;
  console.log(`example platform listening on http://127.0.0.1:${actual}`);
});

let stopping = false;
function shutdown(signal: string): void {
  if (stopping) return;
  stopping = true;
  console.log(`example platform: ${signal}, finishing requests in flight`);
  server.close(() => {
    void closeStores().finally(() => process.exit(0));
  });
  server.closeIdleConnections();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
