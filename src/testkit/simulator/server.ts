import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { InvalidOptionsError } from '../../errors.js';
import { asOptionsObject, optionalPositiveNumber, rejectUnknownKeys, requireNonEmptyString } from '../../lib/options.js';
import { newMarketplaceId, ProviderClient, redactBody, type Exchange, type RequestSigner } from '../acceptance/http.js';
import { canonicalRequest } from '../../signature/canonicalize.js';
import { shellQuote } from '../cli/curl.js';
import type { RecordedRequest, RecordedResponse } from '../acceptance/types.js';
import { createFakeConnector, type FakeConnector } from '../fake-connector.js';
import { createSigner } from '../signer.js';
import { renderPage } from './page.js';

/** Options of {@link createSimulator}. */
export interface SimulatorOptions {
  /** The provider's base URL, e.g. `http://127.0.0.1:4567`. */
  providerUrl: string;
  /** The test master private key the provider trusts (32-byte seed, base64 or base64url). */
  masterPrivateKey: string;
  product: string;
  plan: string;
  /** Plans offered for resizing (the current one is always shown). */
  plans?: readonly string[];
  /** Default `all::global`. */
  region?: string;
  /** Rotation strategy: `multiple` swaps (new set first), `single` replaces. Default `multiple`. */
  credential?: 'single' | 'multiple';
  /** The provider's connector client (CONNECTOR_CLIENT_ID/CONNECTOR_CLIENT_SECRET). */
  clientId: string;
  clientSecret: string;
  /** Port of the fake connector on 127.0.0.1 (the provider's CONNECTOR_URL). Default 0: any free port. */
  connectorPort?: number;
  /** An already listening fake connector to use instead (not closed by `close()`). */
  connector?: FakeConnector;
  /** How long an action waits for a callback after a 202. Default 60 000 ms. */
  callbackTimeoutMs?: number;
}

/** One line of the page's log: what was sent, what came back, and the callback if any. */
export interface SimulatorLogEntry {
  at: string;
  action: string;
  request: RecordedRequest;
  response?: RecordedResponse;
  /** The callback of a 202: its id, the accepted attempt's status, and every attempt the fake connector received. */
  callback?: { id: string; status: number | 'dropped' | 'none'; payload?: unknown; attempts?: (number | 'dropped')[] };
  error?: string;
  /**
   * How the request was signed: the canonical string and the full X-Signature. Shown because the
   * simulator only ever signs with test keys (masterkey.json), never the marketplace's.
   */
  signing?: { canonical: string; signature: string };
  /** The request as a ready-to-run curl command (its signature holds for the Date tolerance, 5 minutes). */
  curl?: string;
  /** Steps of a flow that is not one request (single sign-on: code issued, redirect). */
  steps?: string[];
}

/** What the page shows. */
export interface SimulatorState {
  provider: string;
  connector: string;
  product: string;
  region: string;
  plans: string[];
  credentialMode: 'single' | 'multiple';
  resource: { id: string; plan: string; status: 'provisioned' } | null;
  /** The current credential set, values in clear: this page is the marketplace showing them to their owner. */
  credentials: { id: string; values: Record<string, string> } | null;
  log: SimulatorLogEntry[];
  /** An operation answered 202 and the page waits for its callback. */
  pending: { action: string; callbackId: string; deadline: number } | null;
}

/** A running simulator. */
export interface Simulator {
  readonly app: express.Express;
  /** The fake connector's URL (the provider's CONNECTOR_URL); known once listening. */
  readonly connectorUrl: string;
  /** Starts the page (default 127.0.0.1 and an OS-chosen port) and the fake connector. */
  listen(port?: number, host?: string): Promise<{ url: string }>;
  close(): Promise<void>;
}

const FACTORY = 'createSimulator';
const KNOWN = ['providerUrl', 'masterPrivateKey', 'product', 'plan', 'plans', 'region', 'credential', 'clientId', 'clientSecret', 'connectorPort', 'connector', 'callbackTimeoutMs'] as const;
const LABEL = /^[a-z0-9][a-z0-9\-_]{1,128}$/;
const LOOPBACK_HOST = /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/;

class ActionFailed extends Error {}

/**
 * The mini marketplace behind `embedded-marketplace serve`: a page on loopback with buttons to
 * provision (resource, then credentials), resize, rotate credentials, deprovision and open the
 * dashboard through single sign-on, showing every signed request and its answer. Its backend signs
 * with the test master key and runs the fake connector for callbacks and SSO codes.
 *
 * @example
 * ```ts
 * const sim = createSimulator({ providerUrl: 'http://127.0.0.1:4567', masterPrivateKey, product: 'bonnets', plan: 'small', plans: ['small', 'large'], clientId, clientSecret, connectorPort: 4568 });
 * const { url } = await sim.listen(4570);
 * console.log(`open ${url}`);
 * ```
 */
export function createSimulator(options: SimulatorOptions): Simulator {
  const raw = asOptionsObject(FACTORY, options);
  rejectUnknownKeys(FACTORY, raw, KNOWN);
  const providerUrl = requireNonEmptyString(FACTORY, raw, 'providerUrl');
  const masterPrivateKey = requireNonEmptyString(FACTORY, raw, 'masterPrivateKey');
  const product = requireNonEmptyString(FACTORY, raw, 'product');
  const plan = requireNonEmptyString(FACTORY, raw, 'plan');
  const clientId = requireNonEmptyString(FACTORY, raw, 'clientId');
  const clientSecret = requireNonEmptyString(FACTORY, raw, 'clientSecret');
  const region = raw.region === undefined ? 'all::global' : requireNonEmptyString(FACTORY, raw, 'region');
  const credentialMode = raw.credential ?? 'multiple';
  if (credentialMode !== 'single' && credentialMode !== 'multiple') throw new InvalidOptionsError(`${FACTORY}: option "credential" must be "single" or "multiple"`);
  const plans = [...new Set([plan, ...((raw.plans as readonly string[] | undefined) ?? [])])];
  if (plans.some((p) => typeof p !== 'string' || !LABEL.test(p))) throw new InvalidOptionsError(`${FACTORY}: option "plans" must list plan labels`);
  const connectorPort = optionalPositiveNumber(FACTORY, raw, 'connectorPort', { allowZero: true }) ?? 0;
  const callbackTimeoutMs = optionalPositiveNumber(FACTORY, raw, 'callbackTimeoutMs') ?? 60_000;
  const given = raw.connector as FakeConnector | undefined;
  let client: ProviderClient;
  try {
    client = new ProviderClient(providerUrl, capturing(createSigner({ masterPrivateKey })), 60_000);
  } catch (err) {
    if (err instanceof InvalidOptionsError) throw new InvalidOptionsError(err.message.replace('createSigner', FACTORY));
    throw new InvalidOptionsError(`${FACTORY}: option "providerUrl" must be an absolute http(s) URL`);
  }
  const connector = given ?? createFakeConnector({ clientId, clientSecret });

  const state: SimulatorState = {
    provider: client.base.href.replace(/\/$/, ''),
    connector: '',
    product,
    region,
    plans,
    credentialMode,
    resource: null,
    credentials: null,
    log: [],
    pending: null,
  };
  let busy = false;
  // The last request the client signed, in full: for the canonical string, signature and curl.
  let lastSigned: { input: Parameters<RequestSigner['sign']>[0]; headers: Record<string, string> } | undefined;

  function capturing(signer: RequestSigner): RequestSigner {
    return {
      sign(input) {
        const headers = signer.sign(input);
        lastSigned = { input, headers };
        return headers;
      },
    };
  }

  function signingOf(): Pick<SimulatorLogEntry, 'signing' | 'curl'> {
    if (lastSigned === undefined) return {};
    const { input, headers } = lastSigned;
    const body = typeof input.body === 'string' ? Buffer.from(input.body) : input.body;
    const signedHeaders = (headers['x-signed-headers'] ?? '').split(' ').filter((name) => name !== '');
    const canonical = canonicalRequest({ method: input.method, url: input.url, headers, body, signedHeaders }).toString('utf8');
    const words = ['curl', '-i', '-X', input.method, client.urlOf(input.url).href];
    for (const [name, value] of Object.entries(headers)) if (name !== 'host') words.push('-H', `${name}: ${value}`);
    if (body !== undefined && body.length > 0) words.push('--data-binary', Buffer.from(body).toString('utf8'));
    return { signing: { canonical, signature: headers['x-signature'] ?? '' }, curl: words.map(shellQuote).join(' ') };
  }

  function log(action: string, exchange: Exchange, callback?: SimulatorLogEntry['callback']): void {
    state.log.unshift({ at: new Date().toISOString(), action, request: exchange.request, response: exchange.response, ...(callback === undefined ? {} : { callback }), ...signingOf() });
    state.log.length = Math.min(state.log.length, 100);
  }

  /** Sends one signed request; a 202 waits for its callback. Returns the outcome's JSON (answer or callback). */
  async function operate(action: string, method: string, path: string, body: unknown, ok: number[]): Promise<Record<string, unknown>> {
    const callbackId = newMarketplaceId();
    const exchange = await client.send(method, path, body, { callback: { id: callbackId, url: connector.callbackUrl(callbackId) } });
    if (exchange.status === 202) {
      const deadline = Date.now() + callbackTimeoutMs;
      // The page polls the state while it waits: it shows the callback id and a countdown.
      state.pending = { action, callbackId, deadline };
      for (;;) {
        const attempts = connector.callbacks.filter((c) => c.id === callbackId);
        const accepted = attempts.find((c) => c.status === 204);
        const tried = attempts.map((c) => c.status);
        if (accepted !== undefined) {
          state.pending = null;
          log(action, exchange, { id: callbackId, status: 204, payload: redactBody(accepted.body), attempts: tried });
          const payload = accepted.body as Record<string, unknown>;
          if (payload.state !== 'done') throw new ActionFailed(`the provider reported an error: ${String(payload.message)}`);
          return payload;
        }
        if (Date.now() >= deadline) {
          const last = attempts.at(-1);
          state.pending = null;
          log(action, exchange, { id: callbackId, status: last?.status ?? 'none', attempts: tried });
          throw new ActionFailed(`no callback within ${Math.round(callbackTimeoutMs / 1000)} s`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    log(action, exchange);
    if (!ok.includes(exchange.status)) {
      const message = (exchange.json as { message?: unknown } | undefined)?.message;
      throw new ActionFailed(`the provider answered ${exchange.status}${typeof message === 'string' ? `: ${message}` : ''}`);
    }
    return (typeof exchange.json === 'object' && exchange.json !== null ? exchange.json : {}) as Record<string, unknown>;
  }

  async function issueCredentials(resourceId: string): Promise<void> {
    const id = newMarketplaceId();
    const outcome = await operate('provision credentials', 'PUT', `/v1/credentials/${id}`, { id, resource_id: resourceId }, [201]);
    const values = outcome.credentials;
    if (typeof values !== 'object' || values === null) throw new ActionFailed('the provider answered without credentials');
    state.credentials = { id, values: values as Record<string, string> };
  }

  const actions: Record<string, (body: Record<string, unknown>) => Promise<void>> = {
    async provision() {
      if (state.resource !== null) throw new ActionFailed('a resource is already provisioned; deprovision it first');
      const id = newMarketplaceId();
      await operate('provision', 'PUT', `/v1/resources/${id}`, { id, product, plan, region, features: {} }, [201, 204]);
      state.resource = { id, plan, status: 'provisioned' };
      await issueCredentials(id);
    },
    async resize(body) {
      const resource = requireResource();
      const target = body.plan;
      if (typeof target !== 'string' || !LABEL.test(target)) throw new ActionFailed('choose a plan');
      await operate(`resize to ${target}`, 'PATCH', `/v1/resources/${resource.id}`, { plan: target }, [200, 204]);
      resource.plan = target;
    },
    async rotate() {
      const resource = requireResource();
      const old = state.credentials;
      if (credentialMode === 'multiple' || old === null) {
        await issueCredentials(resource.id);
        if (old !== null) await operate('delete old credentials', 'DELETE', `/v1/credentials/${old.id}`, undefined, [204]);
      } else {
        await operate('delete old credentials', 'DELETE', `/v1/credentials/${old.id}`, undefined, [204]);
        state.credentials = null;
        await issueCredentials(resource.id);
      }
    },
    async 'new-credentials'() {
      const resource = requireResource();
      await issueCredentials(resource.id);
    },
    async 'delete-credentials'() {
      requireResource();
      const current = state.credentials;
      if (current === null) throw new ActionFailed('there is no credential set to delete');
      await operate('delete credentials', 'DELETE', `/v1/credentials/${current.id}`, undefined, [204]);
      state.credentials = null;
    },
    async usage() {
      const resource = requireResource();
      // The current UTC month so far, as the marketplace asks for billing.
      const now = new Date();
      const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().replace('.000Z', 'Z');
      const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().replace('.000Z', 'Z');
      await operate('usage (measures)', 'GET', `/v1/resources/${resource.id}/measures?period_start=${encodeURIComponent(start)}&period_end=${encodeURIComponent(end)}`, undefined, [200, 204]);
    },
    async 'clear-log'() {
      state.log = [];
    },
    async deprovision() {
      const resource = requireResource();
      await operate('deprovision', 'DELETE', `/v1/resources/${resource.id}`, undefined, [204]);
      connector.removeResource(resource.id);
      state.resource = null;
      state.credentials = null;
    },
  };

  function requireResource(): NonNullable<SimulatorState['resource']> {
    if (state.resource === null) throw new ActionFailed('provision a resource first');
    return state.resource;
  }

  const app = express();
  app.disable('x-powered-by');
  // Loopback only, and no DNS rebinding: a page on another site must not drive this one.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (!LOOPBACK_HOST.test(req.headers.host ?? '')) {
      res.status(403).json({ message: 'The simulator only answers on 127.0.0.1 or localhost' });
      return;
    }
    next();
  });
  app.get('/', (_req, res) => {
    const nonce = randomBytes(16).toString('base64');
    res.setHeader('Content-Security-Policy', `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'`);
    res.setHeader('Cache-Control', 'no-store');
    res.type('html').send(renderPage(nonce));
  });
  app.get('/api/state', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json(state);
  });
  // JSON only: a cross-site form cannot send it without a CORS preflight, which we never grant.
  app.post('/api/:action', express.json({ limit: '8kb' }), async (req: Request, res: Response) => {
    if (!req.is('application/json')) {
      res.status(415).json({ message: 'Send JSON' });
      return;
    }
    const action = actions[String(req.params.action)];
    if (action === undefined || !Object.hasOwn(actions, String(req.params.action))) {
      res.status(404).json({ message: 'Unknown action' });
      return;
    }
    if (busy) {
      res.status(409).json({ message: 'Another action is still running' });
      return;
    }
    busy = true;
    try {
      await action((req.body ?? {}) as Record<string, unknown>);
      res.json({ ok: true, state });
    } catch (err) {
      const message = err instanceof ActionFailed ? err.message : `the request failed: ${err instanceof Error ? err.message : String(err)}`;
      res.status(502).json({ ok: false, message, state });
    } finally {
      busy = false;
    }
  });
  // The dashboard button: a fresh single-use code for the resource, then off to the provider.
  app.get('/sso', (_req, res) => {
    if (state.resource === null) {
      res.status(409).json({ message: 'Provision a resource first' });
      return;
    }
    const { id } = state.resource;
    connector.addResource({ id, product, plan: state.resource.plan, region });
    const code = connector.issueSsoCode({ resourceId: id });
    const target = client.urlOf('/v1/sso');
    target.search = `code=${encodeURIComponent(code)}&resource_id=${encodeURIComponent(id)}`;
    // The hop as the page shows it; the code is single-use but still a secret until used.
    const shown = target.href.replace(encodeURIComponent(code), '<code>');
    state.log.unshift({
      at: new Date().toISOString(),
      action: 'single sign-on',
      request: { method: 'GET', url: shown, headers: {} },
      steps: [
        `1. the fake connector issued a single-use code for resource ${id}`,
        `2. the browser is redirected (302) to ${shown}`,
        '3. the provider exchanges the code at the fake connector (POST /v1/oauth/tokens) and reads the resource',
        '4. the provider answers 303 to its dashboard and sets its session cookie in the browser',
      ],
    });
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.redirect(302, target.href);
  });

  let server: Server | undefined;
  const sockets = new Set<Socket>();
  return {
    app,
    get connectorUrl() {
      return connector.url;
    },
    async listen(port = 0, host = '127.0.0.1') {
      if (given === undefined) await connector.listen(connectorPort, '127.0.0.1');
      state.connector = connector.url;
      const created = createServer(app);
      created.on('connection', (socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        created.once('error', reject);
        created.listen(port, host, () => resolve());
      });
      server = created;
      const address = created.address();
      const actual = typeof address === 'object' && address !== null ? address.port : port;
      return { url: `http://${host.includes(':') ? `[${host}]` : host}:${actual}` };
    },
    async close() {
      const current = server;
      server = undefined;
      if (current !== undefined) {
        await new Promise<void>((resolve) => {
          current.close(() => resolve());
          for (const socket of sockets) socket.destroy();
        });
      }
      if (given === undefined) await connector.close();
    },
  };
}
