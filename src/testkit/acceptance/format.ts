import type { AcceptanceCase, AcceptanceReport, RecordedRequest, RecordedResponse } from './types.js';

/** How to render acceptance output. */
export interface FormatOptions {
  /** ANSI colors (only on a terminal). */
  color: boolean;
}

/**
 * Whether a stream should get colors: a TTY, unless NO_COLOR is set; FORCE_COLOR forces them.
 *
 * @example
 * ```ts
 * const color = shouldColor(process.stdout, process.env);
 * ```
 */
export function shouldColor(stream: { isTTY?: boolean }, env: Record<string, string | undefined>): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '' && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true;
}

const CODES = { red: 31, green: 32, yellow: 33, cyan: 36, dim: 2, bold: 1 } as const;

function paint(options: FormatOptions, style: keyof typeof CODES, text: string): string {
  return options.color ? `\u001b[${CODES[style]}m${text}\u001b[0m` : text;
}

function short(value: unknown, max = 240): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function requestLine(request: RecordedRequest): string {
  return `${request.method} ${request.url}${request.body === undefined ? '' : ` ${short(request.body)}`}`;
}

function responseLine(response: RecordedResponse): string {
  const extras: string[] = [];
  const location = response.headers.location;
  if (location !== undefined) extras.push(`Location: ${location}`);
  if (response.headers['set-cookie'] !== undefined) extras.push('Set-Cookie: (session cookie)');
  const body = response.body === undefined ? '' : ` ${short(response.body)}`;
  return `${response.status}${extras.length > 0 ? ` [${extras.join('; ')}]` : ''}${body}`;
}

const LABELS = {
  passed: ['green', 'PASS'],
  failed: ['red', 'FAIL'],
  skipped: ['yellow', 'SKIP'],
  'not-checked': ['cyan', 'NOT CHECKED'],
} as const satisfies Record<AcceptanceCase['status'], readonly [keyof typeof CODES, string]>;

/**
 * One case as a few terminal lines: a PASS/FAIL/SKIP/NOT CHECKED line with the case name, then the
 * request, the answer, any callback, what was expected and, for a failure, why (for a case not
 * checked, the reason).
 *
 * @example
 * ```ts
 * const report = await runAcceptance({ ...options, onCase: (c) => console.log(formatCase(c, { color: false })) });
 * ```
 */
export function formatCase(result: AcceptanceCase, options: FormatOptions): string {
  const [style, text] = LABELS[result.status];
  const head = `${paint(options, style, text)}  ${result.name} ${paint(options, 'dim', `(${result.id})`)}`;
  if (result.status === 'skipped') return `${head}\n      ${paint(options, 'dim', `skipped: ${result.detail ?? ''}`)}`;
  const lines = [head];
  const row = (name: string, text: string) => lines.push(`      ${paint(options, 'dim', name.padEnd(9))} ${text}`);
  if (result.request !== undefined) row('request', requestLine(result.request));
  if (result.status === 'failed' && result.request !== undefined) {
    const headers = Object.entries(result.request.headers).map(([k, v]) => `${k}: ${v}`).join(' | ');
    row('headers', paint(options, 'dim', headers));
  }
  if (result.response !== undefined) row('answer', responseLine(result.response));
  if (result.callback !== undefined) {
    row('callback', `${result.callback.id} → ${result.callback.status}${result.callback.payload === undefined ? '' : ` ${short(result.callback.payload)}`}`);
  }
  row('expected', result.expected);
  if (result.status === 'failed') row('why', paint(options, 'red', result.detail ?? 'failed'));
  else if (result.status === 'not-checked') row('why not', result.detail ?? 'the check could not be made');
  else if (result.detail !== undefined) row('note', result.detail);
  return lines.join('\n');
}

/** The configuration block printed before a run. */
export function formatHeader(input: { url: string; connectorUrl: string; product: string; plan: string; newPlan?: string | undefined; region: string; credential: string; excluded: readonly string[] }, options: FormatOptions): string {
  const rows: [string, string][] = [
    ['Provider', input.url],
    ['Connector', `${input.connectorUrl} (fake; the provider's CONNECTOR_URL)`],
    ['Product', input.product],
    ['Plan', input.newPlan === undefined ? input.plan : `${input.plan} → ${input.newPlan}`],
    ['Region', input.region],
    ['Credentials', input.credential === 'single' ? 'single (rotation: replace)' : 'multiple (rotation: swap)'],
  ];
  if (input.excluded.length > 0) rows.push(['Excluded', input.excluded.join(', ')]);
  return [paint(options, 'bold', 'Marketplace acceptance run'), ...rows.map(([k, v]) => `  ${paint(options, 'dim', k.padEnd(12))}${v}`)].join('\n');
}

/**
 * The closing summary: counts (`32 cases: 28 passed, 0 failed, 3 skipped, 1 not checked in 3.2 s`),
 * then the failed cases by id, or the cases skipped and not checked when nothing failed, and any
 * 202 whose callback never came.
 *
 * @example
 * ```ts
 * console.log(formatSummary(await runAcceptance(options), { color: false }));
 * ```
 */
export function formatSummary(report: AcceptanceReport, options: FormatOptions): string {
  const { summary } = report;
  const seconds = (report.durationMs / 1000).toFixed(1);
  // Reports written before "not checked" existed have no such count.
  const notChecked = summary.notChecked ?? 0;
  const counts = [
    paint(options, summary.passed > 0 ? 'green' : 'dim', `${summary.passed} passed`),
    paint(options, summary.failed > 0 ? 'red' : 'dim', `${summary.failed} failed`),
    paint(options, summary.skipped > 0 ? 'yellow' : 'dim', `${summary.skipped} skipped`),
    paint(options, notChecked > 0 ? 'cyan' : 'dim', `${notChecked} not checked`),
  ].join(', ');
  const lines = [`${summary.total} cases: ${counts} in ${seconds} s`];
  const ids = (status: AcceptanceCase['status']) => report.cases.filter((c) => c.status === status).map((c) => c.id);
  const unacknowledged = report.callbacks?.unacknowledged ?? [];
  if (unacknowledged.length > 0) {
    lines.push(paint(options, 'red', `No callback came for ${unacknowledged.length} of ${report.callbacks.expected} 202 answer(s) (${unacknowledged.map((u) => u.caseId).join(', ')}): the provider may still be retrying them against a fake connector that is gone.`));
  }
  if (summary.failed > 0) {
    lines.push(paint(options, 'red', `Failed: ${ids('failed').join(', ')}`));
  } else if (summary.total === 0) {
    lines.push('No case ran (every feature excluded).');
  } else if (summary.passed === summary.total && report.passed) {
    lines.push(paint(options, 'green', 'All green: the provider answers like the marketplace expects.'));
  } else if (report.passed) {
    lines.push(paint(options, 'green', 'No failure: the provider answers like the marketplace expects in every case checked.'));
  }
  if (notChecked > 0) lines.push(paint(options, 'cyan', `Not checked (see why above): ${ids('not-checked').join(', ')}`));
  // After a failure, skips mostly follow from it; on their own they are worth naming.
  if (summary.skipped > 0 && summary.failed === 0) lines.push(paint(options, 'yellow', `Skipped: ${ids('skipped').join(', ')}`));
  return lines.join('\n');
}
