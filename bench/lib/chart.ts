/**
 * The chart of docs/performance.md: each configuration's throughput as a fraction of its own host's
 * one-verify ceiling (Express, Fastify or the fetch bridge) measured in the same run, a tick at its
 * target, and its server CPU per request. The ceilings are drawn at 1.00 with their own req/s. Plain SVG
 * text, no dependency, so `npm run bench -- --svg=docs/performance.svg` writes it from the run.
 */

export interface ChartBar {
  label: string;
  /** req/s over its host's ceiling's req/s (a ceiling itself: 1). */
  ratio: number;
  /** The target fraction, drawn as a tick. */
  target?: number;
  /** Server CPU per request, µs (all threads). */
  cpu: number;
  /** req/s over every round. */
  rate: number;
}

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function ceilingChart(bars: readonly ChartBar[], caption: string): string {
  const width = 760;
  const left = 200;
  const barArea = 380;
  const rowHeight = 44;
  const top = 58;
  const height = top + bars.length * rowHeight + 46;
  const x = (fraction: number): number => left + Math.min(fraction, 1.2) * (barArea / 1.2);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="13">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="16" y="24" font-size="16" font-weight="600">Signed PUT throughput as a fraction of its host's one-verify ceiling</text>`,
    `<text x="16" y="44" fill="#555">${escape(caption)}</text>`,
  ];
  for (const fraction of [0, 0.25, 0.5, 0.75, 1]) {
    parts.push(
      `<line x1="${x(fraction)}" y1="${top - 6}" x2="${x(fraction)}" y2="${top + bars.length * rowHeight}" stroke="${fraction === 1 ? '#888' : '#e2e2e2'}" stroke-dasharray="${fraction === 1 ? '4 3' : ''}"/>`,
      `<text x="${x(fraction)}" y="${top + bars.length * rowHeight + 16}" text-anchor="middle" fill="#555">${fraction.toFixed(2)}</text>`,
    );
  }
  bars.forEach((bar, index) => {
    const y = top + index * rowHeight;
    const met = bar.target === undefined || bar.ratio >= bar.target;
    const fill = bar.target === undefined ? '#7a7a7a' : met ? '#2f7d32' : '#c0392b';
    parts.push(
      `<text x="${left - 10}" y="${y + 18}" text-anchor="end">${escape(bar.label)}</text>`,
      `<rect x="${left}" y="${y + 4}" width="${Math.max(1, x(bar.ratio) - left).toFixed(1)}" height="20" fill="${fill}" rx="2"/>`,
      `<text x="${x(bar.ratio) + 6}" y="${y + 18}" font-weight="600">${bar.ratio.toFixed(2)}</text>`,
      `<text x="${left - 10}" y="${y + 36}" text-anchor="end" fill="#555" font-size="11">${Math.round(bar.rate).toLocaleString('en-US')} req/s · ${Math.round(bar.cpu).toLocaleString('en-US')} µs CPU/req</text>`,
    );
    if (bar.target !== undefined) {
      parts.push(
        `<line x1="${x(bar.target)}" y1="${y}" x2="${x(bar.target)}" y2="${y + 28}" stroke="#111" stroke-width="2"/>`,
        `<text x="${x(1.2) + 8}" y="${y + 18}" fill="#555" font-size="11">target ≥ ${bar.target} ${met ? '(met)' : '(missed)'}</text>`,
      );
    }
  });
  parts.push(
    `<text x="16" y="${height - 10}" fill="#555" font-size="11">Bar: req/s over its host's ceiling (median of rounds); tick: target. Ceiling: raw body, canonical form, 1 Ed25519 verify, JSON.parse.</text>`,
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}
