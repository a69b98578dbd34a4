/**
 * How the simulator records what it saw: answers with every header (secrets redacted), failures in
 * words, and the single sign-on hop followed the way a browser follows it. Private to the simulator.
 */
import { redactBody, redactUrl } from '../acceptance/http.js';
import type { FakeConnector } from '../fake-connector.js';
import type { SimulatorResponse, SimulatorSsoHop, SimulatorSsoStep } from './types.js';

/** Headers whose values are secrets wherever they appear. */
const SECRET_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie']);
/** Headers that may carry a URL with an SSO code. */
const URL_HEADERS = new Set(['location', 'content-location', 'refresh']);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Redirects followed after `/v1/sso` before the simulator stops, as a browser would stop at some point. */
export const MAX_SSO_REDIRECTS = 5;
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** Every header of an answer, in the page's form: cookie values, Authorization and codes in URLs redacted. */
export function recordHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (name === 'set-cookie') return;
    out[name] = SECRET_HEADERS.has(name) ? '<redacted>' : URL_HEADERS.has(name) ? redactUrl(value) : value;
  });
  const cookies = headers.getSetCookie();
  // Session ids are secrets: the name and attributes are shown, never the value.
  if (cookies.length > 0) out['set-cookie'] = cookies.map((c) => c.replace(/^([^=;]*)=[^;]*/, '$1=<redacted>')).join(', ');
  return out;
}

/** The body for the page: JSON with credential values redacted, or the start of the text. */
export function recordBody(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return redactBody(JSON.parse(text) as unknown);
  } catch {
    return text.length > 300 ? `${text.slice(0, 300)}…` : text;
  }
}

/** A recorded answer. */
export function recordResponse(status: number, headers: Headers, text: string, latencyMs: number): SimulatorResponse {
  const recorded: SimulatorResponse = { status, headers: recordHeaders(headers), at: new Date().toISOString(), latencyMs };
  const body = recordBody(text);
  if (body !== undefined) recorded.body = body;
  return recorded;
}

/** Why a fetch got no answer, in words (no URL: the caller shows it already). */
export function describeFailure(err: unknown, timeoutMs: number): string {
  const error = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return `no answer within ${Math.round(timeoutMs / 1000)} s`;
  const cause = error.cause?.code ?? error.cause?.message ?? error.message ?? String(err);
  return `no answer: ${cause}`;
}

/** `name (attributes)` of a Set-Cookie line: never its value. */
function cookieSummary(line: string): string {
  const [pair = '', ...attributes] = line.split(';');
  const name = pair.split('=')[0]?.trim() ?? '';
  const shown = attributes.map((a) => a.trim()).filter((a) => a !== '');
  return shown.length === 0 ? name : `${name} (${shown.join('; ')})`;
}

/** Stores the cookies of an answer the way a browser would, enough for one origin: by name, deleted when expired. */
function applyCookies(jar: Map<string, string>, lines: string[]): void {
  for (const line of lines) {
    const [pair = '', ...attributes] = line.split(';');
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    const name = pair.slice(0, at).trim();
    const value = pair.slice(at + 1).trim();
    const expired = attributes.some((a) => {
      const [key = '', val = ''] = a.split('=').map((s) => s.trim());
      if (key.toLowerCase() === 'max-age') return Number(val) <= 0;
      if (key.toLowerCase() === 'expires') return Date.parse(val) <= Date.now();
      return false;
    });
    if (expired) jar.delete(name);
    else jar.set(name, value);
  }
}

function titleOf(text: string): string | undefined {
  const match = /<title[^>]*>([^<]{0,200})<\/title>/i.exec(text);
  const title = match?.[1]?.replace(/\s+/g, ' ').trim();
  return title === undefined || title === '' ? undefined : title;
}

/** An error answer's message: its JSON `message`, or the start of its text without tags. */
function messageOf(text: string): string | undefined {
  try {
    const message = (JSON.parse(text) as { message?: unknown }).message;
    if (typeof message === 'string') return message.slice(0, 256);
  } catch {
    // not JSON: the text below
  }
  const body = /<body[^>]*>([\s\S]*)/i.exec(text)?.[1] ?? text;
  const plain = body.replace(/<(script|style)[\s\S]*?<\/\1>/gi, ' ').replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  if (plain === '') return undefined;
  return plain.length > 200 ? `${plain.slice(0, 200)}…` : plain;
}

/**
 * The single sign-on hop, made by the simulator itself as a browser makes it: `GET /v1/sso` with a
 * fresh code, then each redirect on the provider's origin with the cookies set so far, until an
 * answer that is not a redirect (the dashboard). `changed` is called after each step, for the page.
 * The code is single-use, so the browser tab gets another one afterwards.
 */
export async function observeSsoHop(options: {
  connector: FakeConnector;
  resourceId: string;
  ssoUrl: URL;
  timeoutMs: number;
  hop: SimulatorSsoHop;
  /** The /v1/sso answer as a log entry's response. */
  onFirstAnswer: (response: SimulatorResponse) => void;
  changed: () => void;
}): Promise<void> {
  const { connector, resourceId, timeoutMs, hop, changed } = options;
  const tokensFrom = connector.tokenRequests.length;
  const checksFrom = connector.resourceChecks.length;
  const code = connector.issueSsoCode({ resourceId });
  hop.code = { issuedAt: new Date().toISOString(), length: code.length };
  let url = new URL(options.ssoUrl);
  url.search = `code=${encodeURIComponent(code)}&resource_id=${encodeURIComponent(resourceId)}`;
  const origin = url.origin;
  const jar = new Map<string, string>();
  try {
    for (let redirects = 0; ; redirects++) {
      const step: SimulatorSsoStep = { url: redactUrl(url.href), cookiesSent: [...jar.keys()], cookiesSet: [] };
      hop.steps.push(step);
      changed();
      const headers: Record<string, string> = { accept: BROWSER_ACCEPT };
      if (jar.size > 0) headers.cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
      const started = performance.now();
      let response: Response;
      let text: string;
      try {
        response = await fetch(url, { headers, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
        text = await response.text();
      } catch (err) {
        step.error = describeFailure(err, timeoutMs);
        return;
      }
      step.latencyMs = Math.round(performance.now() - started);
      step.status = response.status;
      if (redirects === 0) options.onFirstAnswer(recordResponse(response.status, response.headers, text, step.latencyMs));
      const setCookies = response.headers.getSetCookie();
      step.cookiesSet = setCookies.map(cookieSummary);
      applyCookies(jar, setCookies);
      const contentType = response.headers.get('content-type');
      if (contentType !== null) step.contentType = contentType;
      const title = /html/i.test(contentType ?? '') ? titleOf(text) : undefined;
      if (title !== undefined) step.title = title;
      // Only an error's text: a dashboard that works may show the user's credentials.
      if (response.status >= 400) {
        const message = messageOf(text);
        if (message !== undefined) step.message = message;
      }
      if (!REDIRECTS.has(response.status)) return;
      const location = response.headers.get('location');
      if (location === null) {
        step.note = 'a redirect without a Location header: a browser stops here';
        return;
      }
      step.location = redactUrl(location);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        step.note = 'the Location is not a URL: a browser stops here';
        return;
      }
      if (next.origin !== origin) {
        step.note = `not followed: ${next.origin} is not the provider's origin (${origin}); a browser would go on, the simulator only talks to the provider`;
        return;
      }
      if (redirects >= MAX_SSO_REDIRECTS) {
        step.note = `not followed: already ${MAX_SSO_REDIRECTS} redirects after /v1/sso`;
        return;
      }
      url = next;
    }
  } finally {
    hop.connector = {
      codeExchanges: connector.tokenRequests.slice(tokensFrom).filter((t) => t.grantType === 'authorization_code').map((t) => t.status),
      resourceChecks: connector.resourceChecks.slice(checksFrom).filter((c) => c.id === resourceId).map((c) => c.status),
    };
    hop.finished = true;
    changed();
  }
}
