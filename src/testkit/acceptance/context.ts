import type { FakeConnector, ReceivedCallback } from '../fake-connector.js';
import { caseSpec, type CaseId } from './cases.js';
import { redactBody, type Exchange, type ProviderClient, type RequestSigner } from './http.js';
import type { AcceptanceCase, RecordedCallback, RecordedRequest, RecordedResponse } from './types.js';

/** Thrown inside a case to fail it with a reason. */
export class CaseFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CaseFailure';
  }
}

/** What a case records while it runs: the judged exchange, a callback, a note. */
export interface CaseRecord {
  request?: RecordedRequest;
  response?: RecordedResponse;
  callback?: RecordedCallback;
  note?: string;
  /** Records an exchange as the judged one. */
  saw(exchange: Exchange): Exchange;
}

/** The settings cases read, already defaulted. */
export interface Settings {
  product: string;
  plan: string;
  newPlan: string | undefined;
  region: string;
  conflictProduct: string | undefined;
  conflictRegion: string | undefined;
  credential: 'single' | 'multiple';
  callbackTimeoutMs: number;
}

/** Signers for the signature cases. */
export interface Signers {
  stale: RequestSigner;
  future: RequestSigner;
  rogue: RequestSigner;
}

/** What a resource provisioning left for the features after it. */
export interface RunState {
  resourceId: string | undefined;
  plan: string;
  credentialId: string | undefined;
  credentials: Record<string, string> | undefined;
}

const CREDENTIAL_KEY = /^[A-Z][A-Z0-9_]{0,127}$/;

/** The state of one acceptance run, shared by its cases. */
export class RunContext {
  readonly cases: AcceptanceCase[] = [];
  readonly state: RunState;

  constructor(
    readonly client: ProviderClient,
    readonly connector: FakeConnector,
    readonly settings: Settings,
    readonly signers: Signers,
    private readonly onCase: ((result: AcceptanceCase) => void) | undefined,
    private readonly onProgress: ((note: string) => void) | undefined,
  ) {
    this.state = { resourceId: undefined, plan: settings.plan, credentialId: undefined, credentials: undefined };
  }

  /** Runs one case; its function throws {@link CaseFailure} (or anything) to fail it. Returns whether it passed. */
  async run(id: CaseId, fn: (record: CaseRecord) => Promise<void>): Promise<boolean> {
    const spec = caseSpec(id);
    const started = Date.now();
    const record: CaseRecord = {
      saw(exchange) {
        record.request = exchange.request;
        record.response = exchange.response;
        return exchange;
      },
    };
    let failure: string | undefined;
    try {
      await fn(record);
    } catch (err) {
      failure = err instanceof CaseFailure ? err.message : describeError(err);
    }
    const result: AcceptanceCase = {
      id: spec.id,
      feature: spec.feature,
      name: spec.name,
      status: failure === undefined ? 'passed' : 'failed',
      passed: failure === undefined,
      expected: spec.expected,
      durationMs: Date.now() - started,
    };
    if (record.request !== undefined) result.request = record.request;
    if (record.response !== undefined) result.response = record.response;
    if (record.callback !== undefined) result.callback = record.callback;
    const detail = failure ?? record.note;
    if (detail !== undefined) result.detail = detail;
    this.push(result);
    return result.passed;
  }

  /** Reports a case as not run. */
  skip(id: CaseId, reason: string): void {
    const spec = caseSpec(id);
    this.push({ id: spec.id, feature: spec.feature, name: spec.name, status: 'skipped', passed: false, expected: spec.expected, detail: reason, durationMs: 0 });
  }

  progress(note: string): void {
    this.onProgress?.(note);
  }

  /** A fresh callback id with its X-Callback-URL on the fake connector. */
  callback(id: string): { id: string; url: string } {
    return { id, url: this.connector.callbackUrl(id) };
  }

  private push(result: AcceptanceCase): void {
    this.cases.push(result);
    this.onCase?.(result);
  }

  // --- judging ----------------------------------------------------------------------------------

  /** A refusal: one of `statuses`, answered at once (not 202), with a JSON {message}. */
  expectRefusal(exchange: Exchange, statuses: readonly number[], why: string): void {
    if (exchange.status === 202) {
      throw new CaseFailure(`answered 202 (accepted for later); ${why}, and that is answered on the request itself, never through a callback`);
    }
    if (!statuses.includes(exchange.status)) {
      throw new CaseFailure(`answered ${exchange.status}; expected ${statuses.join(' or ')}: ${why}`);
    }
    this.expectMessage(exchange);
  }

  /** Section 7: every error answer is JSON with a human-readable message of 3 to 256 characters. */
  expectMessage(exchange: Exchange): void {
    const body = exchange.json;
    if (typeof body !== 'object' || body === null || typeof (body as { message?: unknown }).message !== 'string') {
      throw new CaseFailure(`the status is right (${exchange.status}) but the body is not a JSON object with a "message" string (the marketplace shows it to the user)`);
    }
    checkMessageLength((body as { message: string }).message, 'the answer\'s "message"');
  }

  /**
   * A success: one of `statuses`, or 202 followed by a "done" callback. For credentials, returns the
   * credential values (from the answer or the callback); `undefined` after a 204.
   */
  async expectSuccess(
    record: CaseRecord,
    exchange: Exchange,
    options: { statuses: readonly number[]; callbackId: string; credentials: boolean; messageRequired?: boolean },
  ): Promise<Record<string, string> | undefined> {
    const { status } = exchange;
    if (status === 202) {
      this.expectMessage(exchange);
      const payload = await this.awaitCallback(record, options.callbackId, String((exchange.json as { message?: unknown }).message));
      if (options.credentials) return checkCredentials(payload.credentials, 'the callback');
      if (payload.credentials !== undefined) throw new CaseFailure('the callback carries "credentials": only a credential provisioning callback may');
      return undefined;
    }
    if (!options.statuses.includes(status)) {
      const hint = status === 401 ? ' (is MASTER_PUBLIC_KEY the public key of the master key used here?)' : '';
      throw new CaseFailure(`answered ${status}; expected ${options.statuses.join(' or ')}${options.statuses.length > 0 ? ', or 202 with a callback' : ''}${hint}`);
    }
    if (status === 204) {
      if (exchange.text.length > 0) throw new CaseFailure('answered 204 with a body; a 204 has none');
      return undefined;
    }
    if (options.credentials) {
      if (typeof exchange.json !== 'object' || exchange.json === null) throw new CaseFailure(`answered ${status} without a JSON body; expected {"message", "credentials"}`);
      this.expectMessage(exchange);
      return checkCredentials((exchange.json as { credentials?: unknown }).credentials, 'the answer');
    }
    if (options.messageRequired === true) this.expectMessage(exchange);
    return undefined;
  }

  /** Waits for the callback of a 202 and judges it: state "done", a 3..256 character message. */
  async awaitCallback(record: CaseRecord, id: string, message: string): Promise<{ credentials?: unknown }> {
    const timeoutMs = this.settings.callbackTimeoutMs;
    this.progress(`202 "${message}": waiting up to ${Math.round(timeoutMs / 1000)} s for callback ${id}`);
    const deadline = Date.now() + timeoutMs;
    const attempts = (): ReceivedCallback[] => this.connector.callbacks.filter((c) => c.id === id);
    for (;;) {
      const accepted = attempts().find((c) => c.status === 204);
      if (accepted !== undefined) {
        record.callback = { id, status: 204, payload: redactBody(accepted.body) };
        const payload = accepted.body as { state?: unknown; message?: unknown; credentials?: unknown };
        if (payload.state !== 'done') {
          throw new CaseFailure(`the callback reports state "${String(payload.state)}" with message ${JSON.stringify(payload.message)}; expected "done"`);
        }
        return payload;
      }
      const refused = attempts().find((c) => c.status === 400 || c.status === 401);
      if (refused !== undefined) {
        record.callback = { id, status: refused.status, payload: redactBody(refused.body) };
        throw new CaseFailure(refused.status === 401
          ? 'the callback was refused with 401: the provider must authenticate it with a Bearer token from the connector\'s client_credentials grant (check CONNECTOR_CLIENT_ID/CONNECTOR_CLIENT_SECRET against --client-id/--client-secret)'
          : 'the callback was refused with 400: its body must be {"state": "done"|"error", "message": 3..256 characters, "credentials"?: {"KEY": "value"}} (credentials only for credential provisioning)');
      }
      if (Date.now() >= deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const last = attempts().at(-1);
    record.callback = { id, status: last?.status ?? 'none', ...(last === undefined ? {} : { payload: redactBody(last.body) }) };
    const tokens = this.connector.tokenRequests.filter((t) => t.status === 401);
    const hint = tokens.length > 0
      ? ' The connector refused the provider\'s client credentials (invalid_client): check CONNECTOR_CLIENT_ID/CONNECTOR_CLIENT_SECRET.'
      : ` The provider must PUT the outcome to X-Callback-URL (${this.connector.url}/v1/callbacks/…); is its CONNECTOR_URL ${this.connector.url}?`;
    throw new CaseFailure(`answered 202 but no callback was accepted within ${Math.round(timeoutMs / 1000)} s.${hint}`);
  }
}

function checkMessageLength(message: string, what: string): void {
  if (message.length < 3 || message.length > 256) throw new CaseFailure(`${what} has ${message.length} characters; messages shown to users have 3 to 256`);
}

function checkCredentials(value: unknown, where: string): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CaseFailure(`${where} has no "credentials" object`);
  const entries = Object.entries(value);
  if (entries.length === 0) throw new CaseFailure(`${where} has an empty "credentials" object`);
  for (const [key, v] of entries) {
    if (!CREDENTIAL_KEY.test(key)) throw new CaseFailure(`credential key ${JSON.stringify(key)} is not an environment-variable name (^[A-Z][A-Z0-9_]{0,127}$)`);
    if (typeof v !== 'string') throw new CaseFailure(`credential ${key} is not a string`);
  }
  return value as Record<string, string>;
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === 'TimeoutError') return 'the request timed out (the marketplace gives up after 60 s and repeats the request)';
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    if (cause?.code === 'ECONNREFUSED') return 'connection refused: is the provider running at this URL?';
    return `the request failed: ${err.message}${cause?.message === undefined ? '' : ` (${cause.message})`}`;
  }
  return 'the case failed with a non-error value';
}
