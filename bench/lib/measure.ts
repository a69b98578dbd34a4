/** Small measuring helpers shared by the in-process benchmarks. */

/** Runs `op(i)` from `concurrency` loops until `ms` elapse; returns completed operations and seconds. */
export async function runFor(op: (i: number) => Promise<void>, concurrency: number, ms: number): Promise<{ ops: number; seconds: number }> {
  let next = 0;
  let ops = 0;
  const started = performance.now();
  const end = started + ms;
  const loop = async () => {
    while (performance.now() < end) {
      await op(next++);
      ops++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { ops, seconds: (performance.now() - started) / 1000 };
}

/** Least-squares slope of y over x. */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** A full collection, twice so that objects freed by finalizers of the first go too. */
export function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('bench: run with --expose-gc');
  gc();
  gc();
}
