/**
 * What a fetch host does on Node, in a few lines: node:http's request as a Web `Request` (every
 * header occurrence, the body as a stream), the `Response` written back (each Set-Cookie kept).
 * The tests serve `provider.fetch` through it, never through `provider.node`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';

export type FetchHandler = (request: Request) => Promise<Response> | Response;

export function toRequest(req: IncomingMessage): Request {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  const method = req.method ?? 'GET';
  const body = method === 'GET' || method === 'HEAD' ? null : (Readable.toWeb(req) as ReadableStream<Uint8Array>);
  return new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, { method, headers, body, duplex: 'half' });
}

export async function writeResponse(res: ServerResponse, response: Response): Promise<void> {
  res.statusCode = response.status;
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) res.setHeader('Set-Cookie', cookies);
  for (const [name, value] of response.headers) if (name !== 'set-cookie') res.setHeader(name, value);
  if (response.body === null) {
    res.end();
    return;
  }
  res.end(Buffer.from(await response.arrayBuffer()));
}

/** A loopback server answering every request with `handler`. */
export async function serveFetch(handler: FetchHandler): Promise<{ server: Server; url: string; host: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    Promise.resolve()
      .then(() => handler(toRequest(req)))
      .then((response) => writeResponse(res, response))
      .catch((error: unknown) => {
        res.statusCode = 500;
        res.end(JSON.stringify({ message: `bridge: ${String(error)}` }));
      });
  });
  return listening(server);
}

export async function listening(server: Server): Promise<{ server: Server; url: string; host: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
