import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { InvalidOptionsError } from '../../errors.js';
import { asOptionsObject, optionalPositiveNumber, rejectUnknownKeys, requireNonEmptyString } from '../../lib/options.js';
import { newMarketplaceId, ProviderClient, redactBody } from '../acceptance/http.js';
import { canonicalRequest } from '../../signature/canonicalize.js';
import { shellQuote } from '../cli/curl.js';
import { createFakeConnector, type FakeConnector } from '../fake-connector.js';
import { createSigner, type Signer } from '../signer.js';
import { describeFailure, observeSsoHop, recordResponse } from './observe.js';
import { renderPage } from './page.js';
import type { Simulator, SimulatorCallback, SimulatorCredentialSet, SimulatorLogEntry, SimulatorOptions, SimulatorState } from './types.js';

const FACTORY = 'createSimulator';
const KNOWN = ['providerUrl', 'masterPrivateKey', 'product', 'plan', 'plans', 'region', 'credential', 'clientId', 'clientSecret', 'connectorPort', 'connector', 'callbackTimeoutMs'] as const;
const LABEL = /^[a-z0-9][a-z0-9\-_]{1,128}$/;
const LOOPBACK_HOST = /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/;
/** The marketplace's own limit for one request (interface: request timeout). */
const REQUEST_TIMEOUT_MS = 60_000;
/** The marketplace's deadline for a callback after a 202 (interface: callback deadline). */
const CALLBACK_DEADLINE_MS = 24 * 60 * 60 * 1000;
const LOG_LIMIT = 100;
/** How often the fake connector's callback list is read while a callback is awaited. */
const WATCH_INTERVAL_MS = 100;

class ActionFailed extends Error {}

/** A signed request exactly as sent: Resend (same signature) sends these bytes and headers again. */
interface SentRequest {
  method: string;
  path: string;
  url: URL;
  headers: Record<string, string>;
  body: Buffer | undefined;
  /** The JSON value of the body, to sign it again. */
  value: unknown;
  callbackId: string | undefined;
}

/** What one dispatched request came to. */
interface Outcome {
  status: number;
  json: unknown;
  entry: SimulatorLogEntry;
}

/** The accepted payload of a callback, unredacted (credential values in clear): never logged. */
interface Settled {
  state: 'done' | 'error' | 'missed';
  payload?: Record<string, unknown>;
}

/** A callback id the simulator reads the fake connector for. */
interface Watch {
  callback: SimulatorCallback;
  /** Index in `connector.callbacks` from which attempts belong to this request. */
  from: number;
  /** What the page's state becomes when it settles, in time or late. */
  onSettled?: (settled: Settled) => void;
  /** The waiting button, resolved once: by the outcome or by its own timeout (`'timeout'`). */
  waiter?: (outcome: Settled | 'timeout') => void;
}

/**
 * The mini marketplace behind `embedded-marketplace serve`: a page on loopback with buttons to
 * provision (resource, then credentials), resize, rotate credentials, add and delete credential
 * sets, deprovision and open the dashboard through single sign-on. It shows what happened: every
 * signed request stamped when sent, its answer with latency and headers, the callback of a 202 live
 * as the fake connector receives it, and the single sign-on hop as observed. Its backend signs with
 * the test master key and runs the fake connector for callbacks and SSO codes; the page follows it
 * through server-sent events (`GET /api/events`).
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
  const waitText = callbackTimeoutMs < 1000 ? `${callbackTimeoutMs} ms` : `${Math.round(callbackTimeoutMs / 1000)} s`;
  let signer: Signer;
  let client: ProviderClient;
  try {
    signer = createSigner({ masterPrivateKey });
    // Only for its URL handling (base URL with or without /v1): requests are sent below.
    client = new ProviderClient(providerUrl, signer, REQUEST_TIMEOUT_MS);
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
    credentials: [],
    log: [],
    pending: null,
    running: null,
  };
  let seq = 0;
  /** The signed requests of the entries still in the log, for Resend. */
  const sent = new Map<number, SentRequest>();

  // --- live updates: server-sent events -------------------------------------------------------
  const listeners = new Set<Response>();
  let broadcastQueued = false;
  /** Sends the whole state to every open page, once per turn of the event loop however many changes. */
  function changed(): void {
    if (broadcastQueued) return;
    broadcastQueued = true;
    setImmediate(() => {
      broadcastQueued = false;
      const data = `data: ${JSON.stringify(state)}\n\n`;
      for (const res of listeners) res.write(data);
    });
  }

  function addEntry(entry: SimulatorLogEntry, request?: SentRequest): void {
    if (request !== undefined) sent.set(entry.seq, request);
    state.log.unshift(entry);
    for (const dropped of state.log.splice(LOG_LIMIT)) sent.delete(dropped.seq);
    changed();
  }

  // --- callbacks: read from the fake connector while any is awaited ------------------------------
  const watches = new Set<Watch>();
  let watchTimer: NodeJS.Timeout | undefined;

  function watch(w: Watch): void {
    watches.add(w);
    scan();
    if (watches.size > 0 && watchTimer === undefined) {
      watchTimer = setInterval(scan, WATCH_INTERVAL_MS);
      watchTimer.unref();
    }
  }

  function scan(): void {
    const now = Date.now();
    for (const w of watches) {
      const cb = w.callback;
      const received = connector.callbacks.slice(w.from).filter((c) => c.id === cb.id);
      const attempts = received.map((c) => ({
        at: new Date(c.receivedAt).toISOString(),
        status: c.status === 0 ? ('in flight' as const) : c.status,
        authorized: c.authOk,
      }));
      if (JSON.stringify(attempts) !== JSON.stringify(cb.attempts)) {
        cb.attempts = attempts;
        changed();
      }
      const accepted = received.find((c) => c.status === 204);
      let settled: Settled | undefined;
      if (accepted !== undefined) {
        const payload = accepted.body as Record<string, unknown>;
        cb.state = payload.state === 'done' ? 'done' : 'error';
        cb.payload = redactBody(payload);
        cb.settledAt = new Date(accepted.receivedAt).toISOString();
        settled = { state: cb.state, payload };
      } else if (now >= cb.deadline) {
        cb.state = 'missed';
        settled = { state: 'missed' };
      }
      if (settled !== undefined) {
        watches.delete(w);
        w.onSettled?.(settled);
        w.waiter?.(settled);
        changed();
      } else if (w.waiter !== undefined && cb.waitUntil !== undefined && now >= cb.waitUntil) {
        // The button gives up; the entry keeps watching until the 24 h deadline.
        w.waiter('timeout');
        w.waiter = undefined;
        changed();
      }
    }
    if (watches.size === 0 && watchTimer !== undefined) {
      clearInterval(watchTimer);
      watchTimer = undefined;
    }
  }

  // --- sending signed requests ----------------------------------------------------------------
  /** Signs a request with a fresh Date, like the marketplace sends it (callback headers on changes). */
  function prepare(method: string, path: string, value: unknown, callbackId: string | undefined, date?: string): SentRequest {
    const url = client.urlOf(path);
    const body = value === undefined ? undefined : Buffer.from(JSON.stringify(value));
    const headers: Record<string, string> = { accept: 'application/json' };
    if (date !== undefined) headers.date = date;
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (callbackId !== undefined) {
      headers['x-callback-id'] = callbackId;
      headers['x-callback-url'] = connector.callbackUrl(callbackId);
    }
    const signed = signer.sign({ method, url: `${url.pathname}${url.search}`, host: url.host, headers, ...(body === undefined ? {} : { body }) });
    return { method, path, url, headers: signed, body, value, callbackId };
  }

  function signingOf(request: SentRequest): Pick<SimulatorLogEntry, 'signing' | 'curl'> {
    const { headers, body } = request;
    const signedHeaders = (headers['x-signed-headers'] ?? '').split(' ').filter((name) => name !== '');
    const canonical = canonicalRequest({ method: request.method, url: `${request.url.pathname}${request.url.search}`, headers, body, signedHeaders }).toString('utf8');
    const words = ['curl', '-i', '-X', request.method, request.url.href];
    for (const [name, value] of Object.entries(headers)) if (name !== 'host') words.push('-H', `${name}: ${value}`);
    if (body !== undefined && body.length > 0) words.push('--data-binary', body.toString('utf8'));
    return { signing: { canonical, signature: headers['x-signature'] ?? '' }, curl: words.map(shellQuote).join(' ') };
  }

  /**
   * Sends one signed request. Its entry appears when it is sent and is completed with the answer; a
   * 202 starts watching its callback (`waitMs`: how long the caller will wait, if it waits).
   */
  async function dispatch(action: string, request: SentRequest, extra: { resend?: SimulatorLogEntry['resend']; waitMs?: number; onAccepted?: () => void; onSettled?: (settled: Settled) => void } = {}): Promise<Outcome & { settled?: Promise<Settled | 'timeout'> }> {
    const entry: SimulatorLogEntry = {
      seq: ++seq,
      at: new Date().toISOString(),
      action,
      request: {
        method: request.method,
        url: request.url.href,
        headers: { ...request.headers },
        ...(request.value === undefined ? {} : { body: redactBody(request.value) }),
      },
      resendable: true,
      ...(extra.resend === undefined ? {} : { resend: extra.resend }),
      ...signingOf(request),
    };
    // Attempts that arrive from now on belong to this request (a callback can beat the 202 home).
    const from = connector.callbacks.length;
    const acceptedBefore = request.callbackId === undefined ? undefined : connector.callbacks.slice(0, from).find((c) => c.id === request.callbackId && c.status === 204);
    addEntry(entry, request);
    const started = performance.now();
    let response: globalThis.Response;
    let text: string;
    try {
      response = await fetch(request.url, {
        method: request.method,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body }),
        redirect: 'manual',
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      text = await response.text();
    } catch (err) {
      entry.error = describeFailure(err, REQUEST_TIMEOUT_MS);
      changed();
      throw new ActionFailed(`${entry.error} from ${state.provider}`);
    }
    entry.response = recordResponse(response.status, response.headers, text, Math.round(performance.now() - started));
    let json: unknown;
    try {
      json = text === '' ? undefined : (JSON.parse(text) as unknown);
    } catch {
      json = undefined;
    }
    changed();
    if (response.status !== 202 || request.callbackId === undefined) return { status: response.status, json, entry };

    const now = Date.now();
    const callback: SimulatorCallback = { id: request.callbackId, state: 'waiting', deadline: now + CALLBACK_DEADLINE_MS, attempts: [] };
    if (extra.waitMs !== undefined) callback.waitUntil = now + extra.waitMs;
    if (acceptedBefore !== undefined) callback.acceptedEarlier = new Date(acceptedBefore.receivedAt).toISOString();
    entry.callback = callback;
    extra.onAccepted?.();
    const w: Watch = { callback, from, ...(extra.onSettled === undefined ? {} : { onSettled: extra.onSettled }) };
    const settled = extra.waitMs === undefined ? undefined : new Promise<Settled | 'timeout'>((resolve) => {
      w.waiter = resolve;
    });
    watch(w);
    return { status: 202, json, entry, ...(settled === undefined ? {} : { settled }) };
  }

  /**
   * One button's request: a 202 waits for its callback up to `callbackTimeoutMs`. `onSettled`
   * applies the callback's outcome to the page's state, also when it lands after the button gave up.
   * Returns the answer's JSON, or the accepted callback's payload.
   */
  async function operate(action: string, method: string, path: string, body: unknown, ok: number[], hooks: { onAccepted?: () => void; onSettled?: (settled: Settled) => void } = {}): Promise<{ status: number; result: Record<string, unknown> }> {
    const changes = method !== 'GET' && method !== 'HEAD';
    const request = prepare(method, path, body, changes ? newMarketplaceId() : undefined);
    const outcome = await dispatch(action, request, { waitMs: callbackTimeoutMs, ...hooks });
    if (outcome.settled !== undefined && outcome.entry.callback !== undefined) {
      const { id, waitUntil } = outcome.entry.callback;
      state.pending = { action, callbackId: id, deadline: waitUntil ?? Date.now() + callbackTimeoutMs };
      changed();
      const settled = await outcome.settled;
      state.pending = null;
      changed();
      if (settled === 'timeout') {
        throw new ActionFailed(`no callback within ${waitText}; entry #${outcome.entry.seq} keeps watching callback ${id} until the 24 h deadline`);
      }
      if (settled.state !== 'done') throw new ActionFailed(`the provider reported an error: ${String(settled.payload?.message ?? 'no message')}`);
      return { status: 202, result: settled.payload ?? {} };
    }
    if (!ok.includes(outcome.status)) {
      const message = (outcome.json as { message?: unknown } | undefined)?.message;
      throw new ActionFailed(`the provider answered ${outcome.status}${typeof message === 'string' ? `: ${message}` : ''}`);
    }
    return { status: outcome.status, result: (typeof outcome.json === 'object' && outcome.json !== null ? outcome.json : {}) as Record<string, unknown> };
  }

  // --- buttons ---------------------------------------------------------------------------------
  function findSet(id: string): SimulatorCredentialSet | undefined {
    return state.credentials.find((c) => c.id === id);
  }

  function removeSet(id: string): void {
    state.credentials = state.credentials.filter((c) => c.id !== id);
  }

  function credentialValues(payload: Record<string, unknown>): Record<string, string> | null {
    const values = payload.credentials;
    return typeof values === 'object' && values !== null && !Array.isArray(values) ? (values as Record<string, string>) : null;
  }

  async function issueCredentials(resourceId: string): Promise<void> {
    const id = newMarketplaceId();
    const set: SimulatorCredentialSet = { id, createdAt: new Date().toISOString(), status: 'pending', values: null };
    const { status, result } = await operate('provision credentials', 'PUT', `/v1/credentials/${id}`, { id, resource_id: resourceId }, [201], {
      onAccepted: () => state.credentials.push(set),
      onSettled: (settled) => {
        if (settled.state === 'done' && settled.payload !== undefined) {
          set.values = credentialValues(settled.payload);
          set.status = 'active';
        } else if (settled.state === 'error') {
          removeSet(id);
        }
      },
    });
    if (status === 202) return;
    // The set exists at the provider whatever its answer held: it is listed, values or not.
    set.values = credentialValues(result);
    set.status = 'active';
    state.credentials.push(set);
    if (set.values === null) throw new ActionFailed('the provider answered without credentials');
  }

  async function deleteSet(id: string, action: string): Promise<void> {
    const set = findSet(id);
    if (set === undefined) throw new ActionFailed('that credential set is not listed');
    const before = set.status;
    try {
      const { status } = await operate(action, 'DELETE', `/v1/credentials/${id}`, undefined, [204], {
        onAccepted: () => {
          set.status = 'deleting';
        },
        onSettled: (settled) => {
          if (settled.state === 'done') removeSet(id);
          else if (settled.state === 'error') set.status = before;
        },
      });
      if (status !== 202) removeSet(id);
    } catch (err) {
      if (err instanceof ActionFailed && err.message.startsWith('the provider answered 404')) {
        removeSet(id);
        throw new ActionFailed(`${err.message} (the provider does not know this set; it is no longer listed)`);
      }
      throw err;
    }
  }

  /** The newest set that is not being deleted: what a rotation replaces. */
  function currentSet(): SimulatorCredentialSet | undefined {
    return [...state.credentials].reverse().find((c) => c.status !== 'deleting');
  }

  const actions: Record<string, (body: Record<string, unknown>) => Promise<void>> = {
    async provision() {
      if (state.resource !== null) throw new ActionFailed('a resource is already provisioned; deprovision it first');
      const id = newMarketplaceId();
      const { status } = await operate('provision', 'PUT', `/v1/resources/${id}`, { id, product, plan, region, features: {} }, [201, 204], {
        onAccepted: () => {
          state.resource = { id, plan, status: 'pending' };
        },
        onSettled: (settled) => {
          if (state.resource?.id !== id) return;
          if (settled.state === 'done') state.resource.status = 'provisioned';
          else if (settled.state === 'error') state.resource = null;
        },
      });
      if (status !== 202) state.resource = { id, plan, status: 'provisioned' };
      await issueCredentials(id);
    },
    async resize(body) {
      const resource = requireResource();
      const target = body.plan;
      if (typeof target !== 'string' || !LABEL.test(target)) throw new ActionFailed('choose a plan');
      const { status } = await operate(`resize to ${target}`, 'PATCH', `/v1/resources/${resource.id}`, { plan: target }, [200, 204], {
        onSettled: (settled) => {
          if (settled.state === 'done' && state.resource?.id === resource.id) state.resource.plan = target;
        },
      });
      if (status !== 202) resource.plan = target;
    },
    async rotate() {
      const resource = requireResource();
      const old = currentSet();
      if (credentialMode === 'multiple' || old === undefined) {
        await issueCredentials(resource.id);
        if (old !== undefined) await deleteSet(old.id, 'delete old credentials');
      } else {
        await deleteSet(old.id, 'delete old credentials');
        await issueCredentials(resource.id);
      }
    },
    async 'new-credentials'() {
      const resource = requireResource();
      await issueCredentials(resource.id);
    },
    async 'delete-credentials'(body) {
      requireResource();
      const id = body.id;
      if (typeof id !== 'string') throw new ActionFailed('choose a credential set');
      await deleteSet(id, 'delete credentials');
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
      sent.clear();
    },
    async deprovision() {
      const resource = requireResource();
      const { id } = resource;
      const gone = (): void => {
        connector.removeResource(id);
        if (state.resource?.id !== id) return;
        state.resource = null;
        // The provider deprovisions the resource's credentials with it (interface, resource lifecycle).
        state.credentials = [];
      };
      const before = resource.status;
      const { status } = await operate('deprovision', 'DELETE', `/v1/resources/${id}`, undefined, [204], {
        onAccepted: () => {
          resource.status = 'deprovisioning';
        },
        onSettled: (settled) => {
          if (settled.state === 'done') gone();
          else if (settled.state === 'error' && state.resource?.id === id) state.resource.status = before;
        },
      });
      if (status !== 202) gone();
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
  // The page's live view: the whole state at once, then again after every change.
  app.get('/api/events', (req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
    res.write(`retry: 1000\ndata: ${JSON.stringify(state)}\n\n`);
    listeners.add(res);
    req.on('close', () => listeners.delete(res));
  });
  // JSON only: a cross-site form cannot send it without a CORS preflight, which we never grant.
  const json = express.json({ limit: '8kb' });
  const jsonOnly = (req: Request, res: Response, next: NextFunction): void => {
    if (!req.is('application/json')) {
      res.status(415).json({ message: 'Send JSON' });
      return;
    }
    next();
  };
  // Resend: not a button of the resource, so it runs beside one (a repeat while a 202 is pending).
  app.post('/api/resend', json, jsonOnly, async (req: Request, res: Response) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const mode = body.mode;
    const original = typeof body.seq === 'number' ? sent.get(body.seq) : undefined;
    const entry = state.log.find((e) => e.seq === body.seq);
    if (mode !== 'same' && mode !== 'resigned') {
      res.status(400).json({ message: 'mode must be "same" or "resigned"' });
      return;
    }
    if (original === undefined || entry === undefined) {
      res.status(404).json({ message: 'That request is no longer in the log' });
      return;
    }
    // Re-signed: a later Date, so a fresh signature even within the second of the original (the
    // signature is deterministic); at most a second ahead, well inside the 5-minute tolerance.
    const later = new Date(Math.max(Date.now(), Date.parse(original.headers.date ?? '') + 1000 || 0)).toISOString().slice(0, 19);
    const request = mode === 'same' ? original : prepare(original.method, original.path, original.value, original.callbackId, `${later}Z`);
    const base = entry.resend === undefined ? entry.action : entry.action.replace(/ \(resend.*\)$/, '');
    try {
      await dispatch(`${base} (resend #${entry.seq}, ${mode === 'same' ? 'same signature' : 're-signed'})`, request, { resend: { of: entry.seq, mode } });
      res.json({ ok: true, state });
    } catch (err) {
      res.status(502).json({ ok: false, message: err instanceof Error ? err.message : String(err), state });
    }
  });
  app.post('/api/:action', json, jsonOnly, async (req: Request, res: Response) => {
    const name = String(req.params.action);
    const action = Object.hasOwn(actions, name) ? actions[name] : undefined;
    if (action === undefined) {
      res.status(404).json({ message: 'Unknown action' });
      return;
    }
    if (state.running !== null) {
      res.status(409).json({ message: `Another action is still running (${state.running})` });
      return;
    }
    state.running = name;
    changed();
    try {
      await action((req.body ?? {}) as Record<string, unknown>);
      state.running = null;
      res.json({ ok: true, state });
    } catch (err) {
      state.running = null;
      const message = err instanceof ActionFailed ? err.message : `the request failed: ${err instanceof Error ? err.message : String(err)}`;
      res.status(502).json({ ok: false, message, state });
    } finally {
      changed();
    }
  });
  // The dashboard button: the simulator makes the hop itself with one code and logs what it saw,
  // then sends the browser to the provider with a second code (each code works once).
  app.get('/sso', async (_req, res) => {
    if (state.resource === null) {
      res.status(409).json({ message: 'Provision a resource first' });
      return;
    }
    const { id } = state.resource;
    connector.addResource({ id, product, plan: state.resource.plan, region });
    const ssoUrl = client.urlOf('/v1/sso');
    const entry: SimulatorLogEntry = {
      seq: ++seq,
      at: new Date().toISOString(),
      action: 'single sign-on',
      request: { method: 'GET', url: `${ssoUrl.href}?code=<redacted>&resource_id=${encodeURIComponent(id)}`, headers: {} },
      resendable: false,
      sso: { code: { issuedAt: new Date().toISOString(), length: 0 }, steps: [], connector: { codeExchanges: [], resourceChecks: [] }, finished: false },
    };
    const hop = entry.sso!;
    addEntry(entry);
    await observeSsoHop({
      connector,
      resourceId: id,
      ssoUrl,
      timeoutMs: REQUEST_TIMEOUT_MS,
      hop,
      onFirstAnswer: (response) => {
        entry.response = response;
      },
      changed,
    });
    const last = hop.steps.at(-1);
    if (last?.error !== undefined) entry.error = last.error;
    const code = connector.issueSsoCode({ resourceId: id });
    const target = new URL(ssoUrl);
    target.search = `code=${encodeURIComponent(code)}&resource_id=${encodeURIComponent(id)}`;
    hop.browserSentAt = new Date().toISOString();
    changed();
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
      if (watchTimer !== undefined) clearInterval(watchTimer);
      watchTimer = undefined;
      for (const w of watches) w.waiter?.('timeout');
      watches.clear();
      for (const res of listeners) res.end();
      listeners.clear();
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
