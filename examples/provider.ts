/**
 * Starts the example provider: `npm run example`. Listens on 127.0.0.1:$PORT (default 4567; `0`
 * lets the OS choose, and the "listening on" line names the port it chose).
 * Environment: EXAMPLE_ADAPTER (express | fastify | fetch: the host serving it, default express),
 * MASTER_PUBLIC_KEY, STORE (memory | sqlite:<path> | postgres://…), STORE_ENCRYPTION_KEY,
 * CONNECTOR_URL, CONNECTOR_CLIENT_ID, CONNECTOR_CLIENT_SECRET, SESSION_SECRET, EXAMPLE_ASYNC=1, and the test knobs listed
 * in provider-app.ts.
 */
import { createProviderApp, type ProviderApp } from './provider-app.js';

const port = Number(process.env.PORT ?? 4567);
let provider: ProviderApp;
try {
  provider = await createProviderApp();
} catch (error) {
  // A setting that cannot work (an unknown EXAMPLE_ADAPTER, a malformed STORE …) stops the start.
  console.error(`example provider: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
const server = provider.app.listen(port, '127.0.0.1', () => {
  const address = server.address();
  console.log(`example provider listening on http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : port} (${provider.adapter})`);
});
// An idle keep-alive connection outlives the client's own idle timeout (undici's is 4 s, a load
// balancer's about 60 s), so the client, not the server, ends it: otherwise a request sent on a
// socket just as the server closes it fails (ECONNRESET), which a busy machine makes likely.
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;

let stopping = false;
// Once stopping, a connection whose last answer went out is closed at once instead of idling until
// the keep-alive timeout, which would hold the exit back by seconds.
server.on('request', (_req, res) => {
  res.on('finish', () => {
    if (stopping) setImmediate(() => server.closeIdleConnections());
  });
});
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  console.log(`example provider: ${signal}, finishing requests in flight`);
  // Stop taking requests, let the ones in flight finish, then stop the outbox and close the store.
  server.close(() => {
    provider.close().then(
      () => {
        console.log('example provider: stopped (requests finished, outbox stopped, store closed)');
        process.exit(0);
      },
      (error: unknown) => {
        console.error('example provider: error while closing', error);
        process.exit(1);
      },
    );
  });
  server.closeIdleConnections();
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
