/**
 * Real example-provider processes for the multi-instance and fault-injection tests: started with
 * `node --import tsx examples/provider.ts` and an explicit environment, on a port the OS chooses,
 * killed by their own pid only. Every process started here is also killed when the test file's
 * process exits, so a failing test never leaves one behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Output kept per stream: the tail, so a chatty process cannot exhaust memory. */
const MAX_OUTPUT = 2 * 1024 * 1024;
const LISTENING = /example provider listening on (http:\/\/127\.0\.0\.1:(\d+))/;

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** How a process ended. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Handler calls by handler name, then by resource or credential id (GET /example/handler-calls). */
export type HandlerCalls = Record<string, Record<string, number>>;

/** A running example provider. */
export interface ExampleProcess {
  readonly name: string;
  readonly pid: number;
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** `127.0.0.1:<port>`: the Host a signed request must name. */
  readonly host: string;
  /** Settles when the process has exited. */
  readonly exited: Promise<ProcessExit>;
  /** Whether it has not exited yet. */
  readonly running: boolean;
  /** Everything it wrote on stdout so far (the tail past 2 MiB). */
  stdout(): string;
  stderr(): string;
  /** Sends `signal` to this process (by its pid) unless it already exited. */
  kill(signal: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`; resolves with how it ended. */
  stop(graceMs?: number): Promise<ProcessExit>;
  /** GET /example/handler-calls. */
  handlerCalls(): Promise<HandlerCalls>;
}

export interface StartOptions {
  /** A label for messages. Default `example`. */
  name?: string;
  /** How long to wait for `/healthz`. Default 30 s (a cold tsx compile on a busy CI machine). */
  timeoutMs?: number;
}

/**
 * Starts the example provider with exactly `env` (plus PATH, HOME, NODE_ENV=test, PORT=0 and
 * LOG_LEVEL=warn unless given) and resolves once `/healthz` answers. Rejects, with the tail of
 * the process's stderr, when it exits or does not become healthy in time.
 *
 * @example
 * ```ts
 * const provider = await startExample({ STORE: `sqlite:${file}`, MASTER_PUBLIC_KEY: key });
 * after(() => provider.stop());
 * ```
 */
export async function startExample(env: Record<string, string>, options: StartOptions = {}): Promise<ExampleProcess> {
  const name = options.name ?? 'example';
  const timeoutMs = options.timeoutMs ?? 30_000;
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    NODE_ENV: 'test',
    PORT: '0',
    LOG_LEVEL: 'warn',
    ...(process.env.HOME === undefined ? {} : { HOME: process.env.HOME }),
    ...(process.env.TMPDIR === undefined ? {} : { TMPDIR: process.env.TMPDIR }),
    ...env,
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/provider.ts'], { cwd: ROOT, env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`${name}: could not spawn node`);
  const pid = child.pid;
  live.add(child);

  let out = '';
  let err = '';
  let running = true;
  const keep = (text: string): string => (text.length > MAX_OUTPUT ? text.slice(text.length - MAX_OUTPUT) : text);
  let announced: ((url: string) => void) | undefined;
  const listening = new Promise<string>((resolve) => {
    announced = resolve;
  });
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    out = keep(out + chunk);
    const match = LISTENING.exec(out);
    if (match !== null && announced !== undefined) {
      announced(match[1]!);
      announced = undefined;
    }
  });
  child.stderr.on('data', (chunk: string) => {
    err = keep(err + chunk);
  });
  const exited = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => {
      running = false;
      live.delete(child);
      resolve({ code, signal });
    });
  });

  const kill = (signal: NodeJS.Signals): void => {
    if (!running) return;
    try {
      process.kill(pid, signal);
    } catch {
      // exited between the check and the signal
    }
  };
  const tail = (): string => `\n--- stderr (tail) ---\n${err.slice(-3000)}\n--- stdout (tail) ---\n${out.slice(-3000)}`;

  let url: string;
  let timer: NodeJS.Timeout | undefined;
  try {
    url = await Promise.race([
      listening,
      exited.then((exit) => {
        throw new Error(`${name}: exited during start-up (code ${exit.code}, signal ${exit.signal})${tail()}`);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${name}: did not announce its port within ${timeoutMs} ms${tail()}`)), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    await waitFor(`${name} /healthz`, async () => {
      if (!running) throw new Error(`${name}: exited before it became healthy${tail()}`);
      const response = await fetch(`${url}/healthz`).catch(() => undefined);
      return response?.status === 200;
    }, { timeoutMs });
  } catch (error) {
    clearTimeout(timer);
    kill('SIGKILL');
    await exited;
    throw error;
  }

  const host = url.slice('http://'.length);
  return {
    name,
    pid,
    url,
    host,
    exited,
    get running() {
      return running;
    },
    stdout: () => out,
    stderr: () => err,
    kill,
    async stop(graceMs = 10_000) {
      kill('SIGTERM');
      const timer = setTimeout(() => kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
    async handlerCalls() {
      const response = await fetch(`${url}/example/handler-calls`);
      if (response.status !== 200) throw new Error(`${name}: /example/handler-calls answered ${response.status}`);
      return (await response.json()) as HandlerCalls;
    },
  };
}

/**
 * Stops every given process that still runs (SIGTERM, then SIGKILL), for after hooks, and prints
 * the tail of whatever a process wrote on stderr (nothing, normally), so that a failure in CI
 * comes with the provider's side of the story.
 */
export async function stopAll(processes: readonly (ExampleProcess | undefined)[]): Promise<void> {
  await Promise.all(processes.filter((p) => p?.running === true).map((p) => p!.stop(5000)));
  for (const p of processes) {
    const err = p?.stderr() ?? '';
    if (err.trim() !== '') console.log(`${p!.name} (pid ${p!.pid}) stderr:\n${err.slice(-2000)}`);
  }
}

export interface WaitOptions {
  /** Give up after this long. Default 10 s. */
  timeoutMs?: number;
  /** Between two checks. Default 25 ms. */
  intervalMs?: number;
}

/**
 * Polls `check` until it returns something other than `undefined`/`false`, and resolves with it;
 * rejects naming `what` after `timeoutMs`. A check that throws stops the wait with its error.
 */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, options: WaitOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(intervalMs);
  }
}

/** Sum of one handler's calls for `id` over several processes' counts. */
export function sumCalls(counts: readonly HandlerCalls[], handler: string, id: string): number {
  return counts.reduce((total, c) => total + (c[handler]?.[id] ?? 0), 0);
}

export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
