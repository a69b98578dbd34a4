import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * A tiny request/answer protocol over Node's IPC channel, so that the load generator, the servers
 * under test and the memory probes each run in their own process, as the measurements require.
 */

interface Call {
  id: number;
  method: string;
  params: unknown;
}
type Reply = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A benchmark child process answering {@link Worker.call}. */
export interface Worker {
  readonly pid: number | undefined;
  call<T>(method: string, params?: unknown, timeoutMs?: number): Promise<T>;
  /** Asks the child to exit and waits for it; kills it after `graceMs`. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Starts `bench/<script>` under tsx with IPC. `exposeGc` adds `--expose-gc`. With BENCH_PROFILE_DIR
 * set, the child also writes a V8 CPU profile there when it exits (`--cpu-prof`, which
 * NODE_OPTIONS does not accept). With BENCH_TRACE_GC=1 each server process traces its garbage
 * collections (`--trace-gc`, refused in NODE_OPTIONS too).
 */
export function startWorker(script: string, options: { exposeGc?: boolean; env?: Record<string, string> } = {}): Worker {
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const execArgv = [
    '--import', 'tsx',
    ...(options.exposeGc === true ? ['--expose-gc'] : []),
    // One line per collection of each server under test (pause, heap before and after), to stderr.
    ...(process.env.BENCH_TRACE_GC === '1' && script === 'server.ts' ? ['--trace-gc'] : []),
    ...(profileDir === undefined || profileDir === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-interval=${process.env.BENCH_PROFILE_INTERVAL ?? '1000'}`]),
  ];
  const child: ChildProcess = fork(fileURLToPath(new URL(`../${script}`, import.meta.url)), [], {
    cwd: REPO_ROOT,
    execArgv,
    // The child's stdout joins our stderr: only run.ts writes to stdout (the table), whatever a
    // server under test logs.
    stdio: ['ignore', 2, 2, 'ipc'],
    env: { ...process.env, ...options.env },
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
  let exited: Error | undefined;
  const exitPromise = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  child.on('message', (message: Reply) => {
    const entry = pending.get(message.id);
    if (entry === undefined) return;
    pending.delete(message.id);
    clearTimeout(entry.timer);
    if (message.ok) entry.resolve(message.result);
    else entry.reject(new Error(message.error));
  });
  child.once('exit', (code, signal) => {
    exited = new Error(`bench/${script} exited (code ${String(code)}, signal ${String(signal)})`);
    for (const entry of pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(exited);
    }
    pending.clear();
  });

  return {
    pid: child.pid,
    call<T>(method: string, params: unknown = {}, timeoutMs = 600_000): Promise<T> {
      if (exited !== undefined) return Promise.reject(exited);
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`bench/${script}: ${method} took longer than ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
        child.send({ id, method, params } satisfies Call);
      });
    },
    async close(graceMs = 10_000): Promise<void> {
      if (exited !== undefined) return;
      if (child.connected) child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exitPromise;
      clearTimeout(timer);
    },
  };
}

/**
 * The child side: answers calls with `handlers[method](params)`, and exits once the parent
 * disconnects (after `onClose`, which should release what the child opened).
 */
export function serveCalls(handlers: Record<string, (params: never) => unknown>, onClose: () => Promise<void> = async () => undefined): void {
  if (process.send === undefined) throw new Error('bench: this file runs as a child of bench/run.ts');
  process.on('message', (message: Call) => {
    const handler = handlers[message.method];
    const reply = (value: Reply) => process.send?.(value);
    if (handler === undefined) {
      reply({ id: message.id, ok: false, error: `unknown method ${message.method}` });
      return;
    }
    Promise.resolve()
      .then(() => handler(message.params as never))
      .then(
        (result) => reply({ id: message.id, ok: true, result: result ?? null }),
        (error: unknown) => reply({ id: message.id, ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
      );
  });
  process.once('disconnect', () => {
    onClose().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('bench: cleanup failed:', error);
        process.exit(1);
      },
    );
  });
}
