/** Number formatting for the results table. */

const group = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export const int = (value: number): string => group.format(Math.round(value));
export const fixed = (value: number, digits: number): string => value.toFixed(digits);
export const ms = (value: number): string => `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;
export const mib = (bytes: number): string => `${(bytes / 1_048_576).toFixed(1)} MiB`;
export const signedMib = (bytes: number): string => `${bytes >= 0 ? '+' : '−'}${mib(Math.abs(bytes))}`;

/** A markdown table, columns padded so it also reads well in a terminal. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
