/**
 * A bench's handle on a child node process's inspector (the child runs with
 * `--inspect=127.0.0.1:0` and prints its WebSocket address on stderr): a full
 * garbage collection before a memory reading, the process's own
 * `process.memoryUsage()`, and heap snapshots for a profile. The Chrome
 * DevTools protocol over Node's own WebSocket client, on loopback.
 */
import { createWriteStream } from 'node:fs';

export interface Memory {
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  readonly arrayBuffers: number;
}

export class Inspector {
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (r: unknown) => void; reject: (e: Error) => void }>();
  private chunk: ((s: string) => void) | undefined;

  private constructor(private readonly ws: WebSocket) {
    ws.addEventListener('message', (ev) => {
      const m = JSON.parse(String(ev.data)) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
        method?: string;
        params?: { chunk?: string };
      };
      if (m.method === 'HeapProfiler.addHeapSnapshotChunk') this.chunk?.(m.params?.chunk ?? '');
      if (m.id === undefined) return;
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.error) w?.reject(new Error(m.error.message));
      else w?.resolve(m.result);
    });
  }

  /** Connects to the address the child printed (`Debugger listening on ws://…`) among its output lines. */
  static async attach(lines: () => readonly string[], ms = 15_000): Promise<Inspector> {
    const deadline = Date.now() + ms;
    let url: string | undefined;
    while (!(url = /Debugger listening on (ws:\/\/\S+)/.exec(lines().join('\n'))?.[1])) {
      if (Date.now() > deadline) throw new Error('the child printed no inspector address');
      await new Promise((r) => setTimeout(r, 50));
    }
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve(), { once: true });
      ws.addEventListener('error', () => reject(new Error(`cannot open ${url}`)), { once: true });
    });
    return new Inspector(ws);
  }

  call(method: string, params: object = {}): Promise<unknown> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Full collections (two: the first one's finalizers free more), then the child's process.memoryUsage(). */
  async collectedMemory(): Promise<Memory> {
    await this.call('HeapProfiler.collectGarbage');
    await this.call('HeapProfiler.collectGarbage');
    const r = (await this.call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    })) as { result: { value: string } };
    return JSON.parse(r.result.value) as Memory;
  }

  /** A heap snapshot written to `file` (open it in Chrome DevTools' Memory tab). */
  async snapshot(file: string): Promise<void> {
    const out = createWriteStream(file);
    this.chunk = (s) => out.write(s);
    try {
      await this.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    } finally {
      this.chunk = undefined;
      await new Promise<void>((resolve) => out.end(resolve));
    }
  }

  close(): void {
    this.ws.close();
  }
}
