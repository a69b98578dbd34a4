/**
 * Reading V8 profiles for the bench's tools (bench/profile.ts, bench/inprocess.ts): a CPU profile's
 * self time and a sampling heap profile's allocations, per request or call.
 */
import type { Session } from 'node:inspector/promises';

/** One node of a V8 CPU profile (the part used here). */
export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

/** Short names: the package's files relative to dist/, dependencies by package. */
function place(url: string): string {
  return url.replace(/^.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\/.*$/, '$1').replace(/^.*\/dist\//, 'dist/').replace(/^file:\/\/.*\/bench\//, 'bench/');
}

/** The files and functions with the most self time, in µs per unit (request or call), idle left out. */
export function summarize(profile: CpuProfile, units: number, rows = 25): string {
  const perSample = (profile.endTime - profile.startTime) / Math.max(1, profile.samples.length);
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    const { functionName, url, lineNumber } = node.callFrame;
    if (hits === 0 || functionName === '(idle)') continue;
    busy += hits;
    const file = url === '' ? functionName : place(url);
    byFile.set(file, (byFile.get(file) ?? 0) + hits);
    const fn = `${functionName === '' ? '(anonymous)' : functionName} ${file}${url === '' ? '' : `:${lineNumber + 1}`}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + hits);
  }
  const us = (hits: number) => ((hits * perSample) / units).toFixed(2).padStart(8);
  const top = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]).slice(0, rows).map(([name, hits]) => `${us(hits)} µs  ${name}`).join('\n');
  return `main thread busy: ${us(busy).trim()} µs per unit (sampled)\n-- self time by file\n${top(byFile)}\n-- self time by function\n${top(byFunction)}`;
}

/** A node of a sampling heap profile (the part used here). */
interface AllocationNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocationNode[];
}

/** Bytes allocated per call by the functions that allocate most (sampled, so approximate). */
function summarizeAllocations(head: AllocationNode, units: number, rows = 30): string {
  const byFunction = new Map<string, number>();
  let total = 0;
  const walk = (node: AllocationNode): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    if (node.selfSize > 0) {
      const name = `${functionName === '' ? '(anonymous)' : functionName} ${url === '' ? '(native)' : `${place(url)}:${lineNumber + 1}`}`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    for (const child of node.children) walk(child);
  };
  walk(head);
  const lines = [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, rows).map(([name, bytes]) => `${Math.round(bytes / units).toString().padStart(7)} B  ${name}`);
  return `allocated: about ${Math.round(total / units)} B per unit (sampled)\n-- by allocating function\n${lines.join('\n')}`;
}

/**
 * Starts V8's sampling heap profiler on `session` (connected, `HeapProfiler` enabled), keeping every
 * sampled allocation, also those a collection frees soon after: the garbage a call makes.
 */
export async function startAllocationSampling(session: Session): Promise<void> {
  await session.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
}

/** Stops the sampling {@link startAllocationSampling} started; its summary per unit. */
export async function stopAllocationSampling(session: Session, units: number, rows?: number): Promise<string> {
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: { head: AllocationNode } };
  return summarizeAllocations(profile.head, units, rows);
}
