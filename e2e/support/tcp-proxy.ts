/**
 * A loopback TCP proxy a test can cut: `cut()` drops every connection and
 * refuses new ones (a network partition between one client and its server),
 * `heal()` lets connections through again.
 */
import net from 'node:net';

export interface TcpProxy {
  readonly address: string;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

/** `onClientData` sees each chunk a client sends, before it is passed on (a test can act on a request). */
export async function startTcpProxy(
  target: { host: string; port: number },
  onClientData?: (chunk: Buffer) => void,
): Promise<TcpProxy> {
  let open = true;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (!open) return client.destroy();
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    if (onClientData) client.on('data', onClientData);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    address: `127.0.0.1:${port}`,
    cut: () => {
      open = false;
      for (const s of sockets) s.destroy();
    },
    heal: () => {
      open = true;
    },
    close: () =>
      new Promise((resolve) => {
        open = false;
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
