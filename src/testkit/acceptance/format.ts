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

const CODES = { red: 31, green: 32, yellow: 33, dim: 2, bold: 1 } as const;

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

/**
 * One case as a few terminal lines: a PASS/FAIL/SKIP line with the case name, then the request,
 * the answer, any callback, what was expected and, for a failure, why.
 */
export function formatCase(result: AcceptanceCase, options: FormatOptions): string {
  const label = result.status === 'passed' ? paint(options, 'green', 'PASS') : result.status === 'failed' ? paint(options, 'red', 'FAIL') : paint(options, 'yellow', 'SKIP');
  const head = `${label}  ${result.name} ${paint(options, 'dim', `(${result.id})`)}`;
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

/** The closing summary: counts, duration, and the failed cases by id. */
export function formatSummary(report: AcceptanceReport, options: FormatOptions): string {
  const { summary } = report;
  const seconds = (report.durationMs / 1000).toFixed(1);
  const counts = [
    paint(options, summary.passed > 0 ? 'green' : 'dim', `${summary.passed} passed`),
    paint(options, summary.failed > 0 ? 'red' : 'dim', `${summary.failed} failed`),
    paint(options, summary.skipped > 0 ? 'yellow' : 'dim', `${summary.skipped} skipped`),
  ].join(', ');
  const lines = [`${summary.total} cases: ${counts} in ${seconds} s`];
  if (report.passed) {
    lines.push(paint(options, 'green', summary.total > 0 ? 'All green: the provider answers like the marketplace expects.' : 'No case ran (every feature excluded).'));
  } else {
    const failed = report.cases.filter((c) => c.status === 'failed').map((c) => c.id);
    lines.push(paint(options, 'red', `Failed: ${failed.join(', ')}`));
  }
  return lines.join('\n');
}
