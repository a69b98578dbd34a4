/**
 * Starts the example provider: `npm run example`. Listens on 127.0.0.1:$PORT (default 4567).
 * Environment: MASTER_PUBLIC_KEY, STORE (memory | sqlite:<path> | postgres://…), STORE_ENCRYPTION_KEY,
 * CONNECTOR_URL, CLIENT_ID, CLIENT_SECRET, SESSION_SECRET, EXAMPLE_ASYNC=1.
 */
import { createProviderApp } from './provider-app.js';

const port = Number(process.env.PORT ?? 4567);
const provider = await createProviderApp();
const server = provider.app.listen(port, '127.0.0.1', () => {
  console.log(`example provider listening on http://127.0.0.1:${port}`);
});

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  console.log(`example provider: ${signal}, finishing requests in flight`);
  // Stop taking requests, let the ones in flight finish, then stop the outbox and close the store.
  server.close(() => {
    provider.close().then(
      () => process.exit(0),
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
