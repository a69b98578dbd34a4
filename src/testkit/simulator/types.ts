import type { Express } from 'express';
import type { RecordedRequest } from '../acceptance/types.js';
import type { FakeConnector } from '../fake-connector.js';

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
  /**
   * How long a button waits for a callback after a 202 before it gives up (the log entry keeps
   * watching until the marketplace's 24 h deadline). Default 60 000 ms.
   */
  callbackTimeoutMs?: number;
}

/** An answer as the page shows it: every header (cookie values, Authorization and SSO codes redacted), stamped. */
export interface SimulatorResponse {
  status: number;
  headers: Record<string, string>;
  /** The JSON body (credential values redacted) or the first 300 characters of another body. */
  body?: unknown;
  /** When the answer was complete (ISO 8601 with milliseconds). */
  at: string;
  /** From sending the request to the end of the answer's body, in milliseconds. */
  latencyMs: number;
}

/** One request that reached the fake connector's callback route for a watched callback id. */
export interface SimulatorCallbackAttempt {
  /** When the fake connector received it (ISO 8601). */
  at: string;
  /** What the fake connector answered; `'in flight'` while it has not answered yet. */
  status: number | 'dropped' | 'in flight';
  /** Whether it carried a valid client_credentials token (the token itself is never kept). */
  authorized: boolean;
}

/** The callback a 202 announced, as the fake connector saw it; updated live until it lands. */
export interface SimulatorCallback {
  id: string;
  /**
   * `waiting` until the fake connector accepts a callback (204) for this id after the request was
   * sent; then the accepted payload's `done` or `error`; `missed` once the 24 h deadline passed
   * without one.
   */
  state: 'waiting' | 'done' | 'error' | 'missed';
  /** When the button stops waiting (ms since the epoch); absent for a resend, which never waits. */
  waitUntil?: number;
  /** The marketplace's deadline: 24 h after the 202 (ms since the epoch). */
  deadline: number;
  /** Every attempt received for this id since the request was sent, in order. */
  attempts: SimulatorCallbackAttempt[];
  /** The accepted payload, credential values redacted. */
  payload?: unknown;
  /** When the accepted attempt arrived (ISO 8601). */
  settledAt?: string;
  /** For a resend: when a callback for this id had already been accepted before it (ISO 8601). */
  acceptedEarlier?: string;
}

/** One GET of the single sign-on hop, made by the simulator the way a browser makes it. */
export interface SimulatorSsoStep {
  /** The URL asked for (the code redacted). */
  url: string;
  /** Names of the cookies sent with it (collected from the earlier steps' Set-Cookie). */
  cookiesSent: string[];
  status?: number;
  /** The Location answered (the code redacted), for a redirect. */
  location?: string;
  /** Cookies set by this answer: name and attributes, never the value. */
  cookiesSet: string[];
  contentType?: string;
  /** The page's `<title>`, when the answer is HTML. */
  title?: string;
  /** For an error answer: its JSON `message`, or the start of its text. */
  message?: string;
  latencyMs?: number;
  /** Why no answer came (connection refused, timeout). */
  error?: string;
  /** Why the simulator stopped here although the answer was a redirect. */
  note?: string;
}

/** The single sign-on hop as observed by the simulator. */
export interface SimulatorSsoHop {
  /** The code the fake connector issued for the simulator's own hop: when and how long, never its value. */
  code: { issuedAt: string; length: number };
  /** `/v1/sso` first, then each redirect followed on the provider's origin. */
  steps: SimulatorSsoStep[];
  /** What the provider asked of the fake connector during the hop: statuses of its code exchanges and resource checks. */
  connector: { codeExchanges: (number | 'dropped')[]; resourceChecks: (number | 'dropped')[] };
  /** Set once the hop is over. */
  finished: boolean;
  /** When the browser tab was sent to `/v1/sso` with a second, fresh code (ISO 8601); absent when no tab was opened. */
  browserSentAt?: string;
}

/** One line of the page's log: what was sent, what came back, and the callback if any. */
export interface SimulatorLogEntry {
  /** Number of the entry, counting from 1 since the simulator started (Resend names it). */
  seq: number;
  /** When the request was sent (ISO 8601 with milliseconds). */
  at: string;
  action: string;
  /** The request as sent (credential values in the body redacted). */
  request: RecordedRequest;
  /** The answer; absent while it has not come (or when none came: see `error`). */
  response?: SimulatorResponse;
  /** The callback of a 202. */
  callback?: SimulatorCallback;
  /** Why no answer came, or why the button stopped. */
  error?: string;
  /**
   * How the request was signed: the canonical string and the full X-Signature. Shown because the
   * simulator only ever signs with test keys (masterkey.json), never the marketplace's.
   */
  signing?: { canonical: string; signature: string };
  /** The request as a ready-to-run curl command (its signature holds for the Date tolerance, 5 minutes). */
  curl?: string;
  /** Whether the page offers Resend for it (a signed request the simulator still holds). */
  resendable: boolean;
  /** For a resend: the entry it repeats and how. */
  resend?: { of: number; mode: 'same' | 'resigned' };
  /** For single sign-on: the hop as observed. */
  sso?: SimulatorSsoHop;
}

/** A credential set of the resource, as the marketplace holds it. */
export interface SimulatorCredentialSet {
  id: string;
  /** ISO 8601: when it was asked for. */
  createdAt: string;
  /**
   * `pending` until its callback came (202); `active`; `deleting` while its deletion waits for a
   * callback.
   */
  status: 'pending' | 'active' | 'deleting';
  /** The values in clear (this page is the marketplace showing them to their owner); null until known. */
  values: Record<string, string> | null;
}

/** What the page shows. */
export interface SimulatorState {
  provider: string;
  connector: string;
  product: string;
  region: string;
  plans: string[];
  credentialMode: 'single' | 'multiple';
  /** `pending` after a 202 until the callback; `deprovisioning` after a 202 to DELETE until its callback. */
  resource: { id: string; plan: string; status: 'pending' | 'provisioned' | 'deprovisioning' } | null;
  /** Every credential set of the resource, oldest first. */
  credentials: SimulatorCredentialSet[];
  /** Newest first, at most 100. */
  log: SimulatorLogEntry[];
  /** A button answered 202 and waits for its callback. */
  pending: { action: string; callbackId: string; deadline: number } | null;
  /** The button running now, if any (one at a time). */
  running: string | null;
}

/** A running simulator. */
export interface Simulator {
  readonly app: Express;
  /** The fake connector's URL (the provider's CONNECTOR_URL); known once listening. */
  readonly connectorUrl: string;
  /** Starts the page (default 127.0.0.1 and an OS-chosen port) and the fake connector. */
  listen(port?: number, host?: string): Promise<{ url: string }>;
  close(): Promise<void>;
}
