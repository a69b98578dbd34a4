import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { generateKeyPair } from '../../src/testkit/keys.js';
import { createSigner } from '../../src/testkit/signer.js';

/** An app listening on an OS-chosen loopback port. */
export interface Running {
  url: string;
  host: string;
  server: Server;
  close(): Promise<void>;
}

/** Anything that listens as Express's app does (the example provider offers it on every host). */
export interface Listenable {
  listen(port: number, host: string, callback?: () => void): Server;
}

export async function listen(app: Listenable): Promise<Running> {
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface SignedAnswer {
  status: number;
  body: unknown;
  text: string;
  headers: Headers;
}

/** A marketplace stand-in: signs each request with a fresh test master key, like the real one. */
export function marketplaceClient(options: { now?: () => number } = {}) {
  const master = generateKeyPair();
  const signer = createSigner({ masterPrivateKey: master.privateKey, ...(options.now === undefined ? {} : { now: () => new Date(options.now!()) }) });
  return {
    masterPublicKey: master.publicKey,
    signer,
    async send(target: Running, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<SignedAnswer> {
      const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
      const base: Record<string, string> = { ...headers };
      if (body !== undefined) base['content-type'] = 'application/json';
      const signed = signer.sign({ method, url: path, headers: base, body: bytes, host: target.host });
      const response = await fetch(target.url + path, { method, headers: signed, ...(bytes.length > 0 ? { body: bytes } : {}) });
      return { ...(await readAnswer(response)), headers: response.headers };
    },
  };
}

/** Status, raw text and parsed JSON (undefined when the body is empty or not JSON) of an answer. */
export async function readAnswer(response: Response): Promise<{ status: number; body: unknown; text: string }> {
  const text = await response.text();
  let body: unknown;
  try {
    body = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: response.status, body, text };
}

/** Collects pino's JSON lines in memory. */
export function logCapture() {
  const lines: string[] = [];
  return {
    lines,
    stream: { write: (line: string) => void lines.push(line) },
    text: () => lines.join(''),
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
