import { InvalidOptionsError } from '../../errors.js';
import { createSimulator } from '../simulator/server.js';
import { CONNECTOR_CLIENT_NEEDED_FOR } from '../acceptance/run.js';
import { DEFAULT_CONNECTOR_PORT, DEFAULT_PROVIDER_URL } from './test.js';
import { durationOption, EXIT, loadMasterKey, parse, portOption, UsageError, type CliIo } from './io.js';
import { waitForProviderFlag, waitOption } from './wait.js';

/** Where the simulator page listens unless --port says otherwise. */
export const DEFAULT_SERVE_PORT = 4570;

export const SERVE_USAGE = `Usage: embedded-marketplace serve [options] [URL]

Serves a small marketplace page on http://127.0.0.1:${DEFAULT_SERVE_PORT} to provision, resize, rotate
credentials, deprovision and open the dashboard through single sign-on against the provider at URL
(default ${DEFAULT_PROVIDER_URL}), showing every request and answer. It signs with ./masterkey.json and
runs the fake connector (the provider's CONNECTOR_URL) on 127.0.0.1:<connector port>.

  --port PORT             port of the page (default ${DEFAULT_SERVE_PORT})
  --product NAME          product label (required)
  --plan NAME             plan to provision (required)
  --new-plan NAME         another plan to offer for resizing (repeatable)
  --region NAME           region (default all::global)
  --credential MODE       single (rotation replaces) or multiple (rotation swaps; default)
  --client-id ID          the provider's connector client id (default $CONNECTOR_CLIENT_ID)
  --client-secret SECRET  the provider's connector client secret (default $CONNECTOR_CLIENT_SECRET)
  --connector-port PORT   port of the fake connector (default ${DEFAULT_CONNECTOR_PORT})
  --callback-timeout DUR  how long an action waits for a callback after a 202 (default 60s)
  --wait SECONDS          first wait up to SECONDS for the provider to answer at all (while it starts)
  --master-key FILE       the master key file (default ./masterkey.json)
`;

/** `serve`: runs the simulator until interrupted. */
export async function serveCommand(args: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values, positionals } = parse(args, {
    port: { type: 'string' },
    product: { type: 'string' },
    plan: { type: 'string' },
    'new-plan': { type: 'string', multiple: true },
    region: { type: 'string' },
    credential: { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'connector-port': { type: 'string' },
    'callback-timeout': { type: 'string' },
    wait: { type: 'string' },
    'master-key': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help === true) {
    io.stdout.write(SERVE_USAGE);
    return EXIT.ok;
  }
  if (positionals.length > 1) throw new UsageError(`serve takes one URL, got ${positionals.length} arguments`);
  const providerUrl = positionals[0] ?? DEFAULT_PROVIDER_URL;
  if (values.product === undefined || values.plan === undefined) throw new UsageError('--product and --plan are required');
  const credential = values.credential ?? 'multiple';
  if (credential !== 'single' && credential !== 'multiple') throw new UsageError('--credential must be single or multiple');
  const clientId = values['client-id'] ?? io.env.CONNECTOR_CLIENT_ID;
  const clientSecret = values['client-secret'] ?? io.env.CONNECTOR_CLIENT_SECRET;
  if (clientId === undefined || clientSecret === undefined) throw new UsageError(`--client-id and --client-secret (or $CONNECTOR_CLIENT_ID and $CONNECTOR_CLIENT_SECRET) are required: the provider's connector client; ${CONNECTOR_CLIENT_NEEDED_FOR}`);
  const port = portOption(values.port, '--port', DEFAULT_SERVE_PORT);
  const connectorPort = portOption(values['connector-port'], '--connector-port', DEFAULT_CONNECTOR_PORT);
  const callbackTimeoutMs = durationOption(values['callback-timeout'], '--callback-timeout', 60_000);
  const waitMs = waitOption(values.wait);
  const key = loadMasterKey(io, values['master-key']);

  let simulator;
  try {
    simulator = createSimulator({
      providerUrl,
      masterPrivateKey: key.privateKey,
      product: values.product,
      plan: values.plan,
      plans: values['new-plan'] ?? [],
      ...(values.region === undefined ? {} : { region: values.region }),
      credential,
      clientId,
      clientSecret,
      connectorPort,
      callbackTimeoutMs,
    });
  } catch (err) {
    if (err instanceof InvalidOptionsError) throw new UsageError(err.message.replace(/^createSimulator: /, ''));
    throw err;
  }
  const notAnswering = await waitForProviderFlag(providerUrl, waitMs, (line) => io.stdout.write(line), signal, io.clock);
  if (notAnswering !== undefined || signal?.aborted === true) {
    await simulator.close();
    if (notAnswering === undefined) return EXIT.ok;
    io.stderr.write(`embedded-marketplace serve: ${notAnswering}\n`);
    return EXIT.usage;
  }
  let url: string;
  try {
    ({ url } = await simulator.listen(port, '127.0.0.1'));
  } catch (err) {
    await simulator.close();
    const code = (err as NodeJS.ErrnoException).code;
    io.stderr.write(`embedded-marketplace serve: could not listen${code === 'EADDRINUSE' ? ' (a port is in use: choose --port or --connector-port)' : ''}: ${(err as Error).message}\n`);
    return EXIT.failed;
  }
  io.stdout.write(`Marketplace simulator: ${url}\n`);
  io.stdout.write(`  provider   ${providerUrl}\n`);
  io.stdout.write(`  connector  ${simulator.connectorUrl} (start the provider with CONNECTOR_URL=${simulator.connectorUrl})\n`);
  io.stdout.write('Press Ctrl-C to stop.\n');

  await new Promise<void>((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  await simulator.close();
  return EXIT.ok;
}
