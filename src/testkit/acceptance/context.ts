import type { FakeConnector, FakeTokenProblem, ReceivedCallback } from '../fake-connector.js';
import { caseSpec, type CaseId } from './cases.js';
import { redactBody, type Exchange, type ProviderClient, type RequestSigner } from './http.js';
import type { AcceptanceCase, AcceptanceReport, CaseStatus, OptionalFeature, RecordedCallback, RecordedRequest, RecordedResponse } from './types.js';

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
  /** Set when the case ran but could not make its check: it is reported NOT CHECKED with this reason. */
  notChecked?: string;
  /** Set when the case is not applicable (a feature the provider does not have): reported SKIP with this reason. */
  skipped?: string;
  /** Records an exchange as the judged one. */
  saw(exchange: Exchange): Exchange;
}

/** Options of {@link RunContext.run}. */
export interface RunOptions {
  /**
   * Asked when the case would pass: a reason means its check proves nothing (e.g. the valid request
   * it is a variant of was refused too), and the case is NOT CHECKED instead.
   */
  provesNothingIf?: () => string | undefined;
}

/** A 202 the provider answered: its callback is owed. */
interface Owed {
  callbackId: string;
  caseId: string;
  at: number;
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
  /** Whether the caller gave the provider's client id and secret (otherwise the fake knows a made-up client). */
  clientGiven: boolean;
  /** Optional features that must be there (`--require`). */
  required: readonly OptionalFeature[];
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
  /** Every 202 answered during the run, in order. */
  private readonly owed: Owed[] = [];
  /** The case running now (202s are attributed to it). */
  private current = 'none';
  /** How many token requests the fake had seen when the current case started. */
  private tokenMark = 0;
  /** How many token requests the fake had seen when the run started (a given fake may have served earlier runs). */
  private readonly runMark: number;

  constructor(
    readonly client: ProviderClient,
    readonly connector: FakeConnector,
    readonly settings: Settings,
    readonly signers: Signers,
    private readonly onCase: ((result: AcceptanceCase) => void) | undefined,
    private readonly onProgress: ((note: string) => void) | undefined,
  ) {
    this.state = { resourceId: undefined, plan: settings.plan, credentialId: undefined, credentials: undefined };
    this.runMark = connector.tokenRequests.length;
    client.onAccepted = (callbackId) => this.owed.push({ callbackId, caseId: this.current, at: Date.now() });
  }

  /**
   * Runs one case; its function throws {@link CaseFailure} (or anything) to fail it, or sets
   * `record.notChecked` / `record.skipped`. Returns whether it passed.
   */
  async run(id: CaseId, fn: (record: CaseRecord) => Promise<void>, options: RunOptions = {}): Promise<boolean> {
    const spec = caseSpec(id);
    const started = Date.now();
    const record: CaseRecord = {
      saw(exchange) {
        record.request = exchange.request;
        record.response = exchange.response;
        return exchange;
      },
    };
    this.current = id;
    this.tokenMark = this.connector.tokenRequests.length;
    let failure: string | undefined;
    try {
      await fn(record);
    } catch (err) {
      failure = err instanceof CaseFailure ? err.message : describeError(err);
    }
    let status: CaseStatus = 'failed';
    let detail = failure;
    if (failure === undefined) {
      const provesNothing = record.skipped === undefined && record.notChecked === undefined ? options.provesNothingIf?.() : undefined;
      if (record.skipped !== undefined) [status, detail] = ['skipped', record.skipped];
      else if (record.notChecked !== undefined) [status, detail] = ['not-checked', record.notChecked];
      else if (provesNothing !== undefined) [status, detail] = ['not-checked', provesNothing];
      else [status, detail] = ['passed', record.note];
    }
    const result: AcceptanceCase = {
      id: spec.id,
      feature: spec.feature,
      name: spec.name,
      status,
      passed: status === 'passed',
      expected: spec.expected,
      durationMs: Date.now() - started,
    };
    if (record.request !== undefined) result.request = record.request;
    if (record.response !== undefined) result.response = record.response;
    if (record.callback !== undefined) result.callback = record.callback;
    if (detail !== undefined) result.detail = detail;
    this.push(result);
    return result.passed;
  }

  /** Reports a case as not run. */
  skip(id: CaseId, reason: string): void {
    this.report(id, 'skipped', reason);
  }

  /** Reports a case with an outcome decided without a request of its own (e.g. `--require sso` against a provider without it). */
  report(id: CaseId, status: 'skipped' | 'failed' | 'not-checked', reason: string): void {
    const spec = caseSpec(id);
    this.push({ id: spec.id, feature: spec.feature, name: spec.name, status, passed: false, expected: spec.expected, detail: reason, durationMs: 0 });
  }

  /** The reported outcome of a case, if it ran. */
  outcome(id: CaseId): AcceptanceCase | undefined {
    return this.cases.find((c) => c.id === id);
  }

  /**
   * For {@link RunOptions.provesNothingIf}: a refusal proves nothing unless the valid request it is
   * a variant of (case `control`) was answered with one of `accepted` (default any 2xx).
   */
  unlessAnswered(control: CaseId, accepted: (status: number) => boolean = (s) => s >= 200 && s < 300): () => string | undefined {
    return () => {
      const outcome = this.outcome(control);
      const status = outcome?.response?.status;
      if (status !== undefined && accepted(status)) return undefined;
      const why = outcome === undefined || outcome.status === 'skipped'
        ? `the valid request it is a variant of (${control}) was not made`
        : status === undefined
          ? `the valid request it is a variant of (${control}) got no answer`
          : `the valid request it is a variant of (${control}) was refused too (${status})`;
      return `refused as expected, but ${why}: a refusal proves nothing while the valid request fails; fix ${control} first`;
    };
  }

  /** Continues the current case's bookkeeping under another case id (a request made on a later case's behalf). */
  workFor(id: CaseId): void {
    this.current = id;
    this.tokenMark = this.connector.tokenRequests.length;
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

  /**
   * Waits for the callback of a 202 and judges it: state "done", a 3..256 character message. A
   * callback refused with 401 is not a failure while the provider may still retry with a new token
   * (a token kept from an earlier run, say): the case is judged by the outcome within the callback
   * timeout, and the 401s are noted.
   */
  async awaitCallback(record: CaseRecord, id: string, message: string): Promise<{ credentials?: unknown }> {
    const timeoutMs = this.settings.callbackTimeoutMs;
    this.progress(`202 "${message}": waiting up to ${seconds(timeoutMs)} s for callback ${id}`);
    const deadline = Date.now() + timeoutMs;
    const attempts = (): ReceivedCallback[] => this.connector.callbacks.filter((c) => c.id === id);
    for (;;) {
      const seen = attempts();
      const accepted = seen.find((c) => c.status === 204);
      if (accepted !== undefined) {
        record.callback = { id, status: 204, payload: redactBody(accepted.body) };
        const refused = seen.filter((c) => c.status === 401 && c.receivedAt <= accepted.receivedAt);
        if (refused.length > 0) {
          const problem = refused.at(-1)?.authProblem;
          addNote(record, `the callback was refused with 401 ${refused.length === 1 ? 'once' : `${refused.length} times`} (${describeTokenProblem(problem)}), then the provider fetched a new token and retried, as it should`);
        }
        const payload = accepted.body as { state?: unknown; message?: unknown; credentials?: unknown };
        if (payload.state !== 'done') {
          throw new CaseFailure(`the callback reports state "${String(payload.state)}" with message ${JSON.stringify(payload.message)}; expected "done"`);
        }
        return payload;
      }
      const invalid = seen.find((c) => c.status === 400);
      if (invalid !== undefined) {
        record.callback = { id, status: 400, payload: redactBody(invalid.body) };
        throw new CaseFailure('the callback was refused with 400: its body must be {"state": "done"|"error", "message": 3..256 characters, "credentials"?: {"KEY": "value"}} (credentials only for credential provisioning)');
      }
      // A wrong client id or secret does not get better by waiting: say so at once.
      const wrongClient = this.connector.tokenRequests.slice(this.tokenMark).find((t) => t.grantType === 'client_credentials' && t.status === 401);
      if (wrongClient !== undefined) {
        this.recordLast(record, id);
        throw new CaseFailure(`answered 202, but the fake connector refused the provider's client credentials (401 invalid_client at POST /v1/oauth/tokens), so no callback can be authenticated: ${this.clientHint()}`);
      }
      if (Date.now() >= deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    this.recordLast(record, id);
    throw new CaseFailure(`answered 202 but no callback was accepted within ${seconds(timeoutMs)} s: ${this.missingCallbackCause(attempts())}`);
  }

  private recordLast(record: CaseRecord, id: string): void {
    const last = this.connector.callbacks.filter((c) => c.id === id).at(-1);
    record.callback = { id, status: last?.status ?? 'none', ...(last === undefined ? {} : { payload: redactBody(last.body) }) };
  }

  private clientHint(): string {
    return this.settings.clientGiven
      ? 'the provider\'s CONNECTOR_CLIENT_ID/CONNECTOR_CLIENT_SECRET differ from --client-id/--client-secret given here'
      : 'no --client-id/--client-secret were given here, so the fake connector knows no client; pass the provider\'s CONNECTOR_CLIENT_ID and CONNECTOR_CLIENT_SECRET';
  }

  /** Why no callback was accepted, from what the fake connector saw. */
  private missingCallbackCause(seen: readonly ReceivedCallback[]): string {
    const tokens = this.connector.tokenRequests.slice(this.tokenMark).filter((t) => t.grantType === 'client_credentials');
    const refused = seen.filter((c) => c.status === 401);
    if (refused.length > 0) {
      const first = refused[0] as ReceivedCallback;
      const problem = refused.at(-1)?.authProblem;
      if (problem === 'missing') return `${refused.length} attempt(s) were refused with 401: the callback carried no Bearer token; send "Authorization: Bearer <token>" with a client_credentials token from POST ${this.connector.url}/v1/oauth/tokens`;
      if (problem === 'not-client-credentials') return `${refused.length} attempt(s) were refused with 401: the callback carried a single sign-on token; callbacks need a client_credentials token`;
      const fetched = tokens.some((t) => t.status === 201 && t.receivedAt >= first.receivedAt);
      if (fetched) return `${refused.length} attempt(s) were refused with 401 (${describeTokenProblem(problem)}); the provider fetched a new token afterwards but its callbacks still carried a refused one`;
      return `${refused.length} attempt(s) were refused with 401 (${describeTokenProblem(problem)}) and the provider did not fetch a new token and retry. `
        + 'It most likely kept a token from an earlier run or another connector: on a 401 a provider must drop its cached token, fetch a new one (client_credentials) and send the callback again (docs/connector.md)'
        + (this.connector.tokenRequests.some((t) => t.status === 401) ? '' : '; the client id and secret are not the cause (the token endpoint refused none)');
    }
    if (seen.length > 0) return `the fake connector answered its ${seen.length} attempt(s) ${[...new Set(seen.map((c) => c.status))].join(', ')}`;
    if (tokens.some((t) => t.status === 201)) return `the provider got a client_credentials token but sent no callback; it must PUT the outcome to the X-Callback-URL it was given (${this.connector.url}/v1/callbacks/…)`;
    return `nothing reached the fake connector; the provider must PUT the outcome to X-Callback-URL (${this.connector.url}/v1/callbacks/…): is its CONNECTOR_URL ${this.connector.url}?`;
  }

  /**
   * After the last case: waits, until each one's callback timeout, for the callbacks still owed for
   * 202 answers (e.g. a 202 to a request that should have been refused), so that a provider is not
   * left retrying against a closed fake connector; returns what was acknowledged.
   */
  async settleCallbacks(): Promise<AcceptanceReport['callbacks']> {
    const pending = () => this.owed.filter((o) => this.connector.acceptedCallback(o.callbackId) === undefined);
    // Worth waiting for: still within its timeout, not refused for good (400), and the provider's
    // client is one the fake knows (after a 401 at the token endpoint no callback can get through).
    const awaitable = () => {
      if (this.connector.tokenRequests.slice(this.runMark).some((t) => t.grantType === 'client_credentials' && t.status === 401)) return [];
      return pending().filter((o) => o.at + this.settings.callbackTimeoutMs > Date.now()
        && !this.connector.callbacks.some((c) => c.id === o.callbackId && c.status === 400));
    };
    const outstanding = awaitable();
    if (outstanding.length > 0) {
      const last = Math.max(...outstanding.map((o) => o.at)) + this.settings.callbackTimeoutMs;
      this.progress(`waiting up to ${seconds(last - Date.now())} s for ${outstanding.length} callback(s) still owed for 202 answers`);
      while (awaitable().length > 0) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const unacknowledged = pending().map((o) => ({ caseId: o.caseId, callbackId: o.callbackId }));
    return { expected: this.owed.length, acknowledged: this.owed.length - unacknowledged.length, unacknowledged };
  }
}

function seconds(ms: number): number {
  return Math.max(1, Math.round(ms / 1000));
}

function addNote(record: CaseRecord, note: string): void {
  record.note = record.note === undefined ? note : `${record.note}; ${note}`;
}

function describeTokenProblem(problem: FakeTokenProblem | undefined): string {
  switch (problem) {
    case 'missing': return 'no Bearer token';
    case 'expired': return 'an expired token';
    case 'revoked': return 'a revoked token';
    case 'not-client-credentials': return 'a single sign-on token instead of a client_credentials one';
    default: return 'a token this fake connector did not grant, such as one kept from an earlier run';
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
