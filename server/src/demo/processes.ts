/** The demo's child processes: a free loopback port for one, and a stop that cannot hang. */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export function stopProcess(child: ChildProcess, graceMs = 5000, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill(signal);
  });
}

/** A port free on 127.0.0.1 now (for a program that cannot bind port 0 and say which it got). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** The last `max` characters a stream wrote, for an error message. */
export function tail(stream: NodeJS.ReadableStream | null | undefined, max = 4000): () => string {
  let text = '';
  stream?.on('data', (d: Buffer) => (text = (text + d.toString()).slice(-max)));
  return () => text;
}
