/**
 * What the xDS workers (xds-worker.ts) and the main thread (xds-workers.ts) tell each other about the
 * calls a worker carries. A worker owns the connections and grpc-js's work on them (TLS, HTTP/2, framing,
 * decoding the requests); the main thread owns everything a call's handler decides (the pipeline, the
 * budget, access, CSDS, LRS). Messages go in batches, one per turn of the event loop.
 */

/** A call's identity as its handler reads it (getPeer, metadata, the client certificate's SANs). */
export interface CallInfo {
  readonly path: string;
  readonly peer: string;
  readonly metadata: Readonly<Record<string, string[]>>;
  readonly subjectaltname?: string;
}

/** Worker → main. */
export type WorkerEvent =
  | ({ readonly t: 'open'; readonly id: number } & CallInfo)
  | ({ readonly t: 'unary'; readonly id: number; readonly request: unknown } & CallInfo)
  | { readonly t: 'data'; readonly id: number; readonly msg: unknown }
  | { readonly t: 'end' | 'cancelled' | 'closed'; readonly id: number }
  /** Each call's oldest write is flushed (many calls in one entry: a push's writes flush together). */
  | { readonly t: 'flushed'; readonly ids: number[] };

/** Main → worker. */
export type MainOp =
  /** The same message to each call (one entry per push and worker: the streams that get the same bytes). */
  | { readonly t: 'write'; readonly ids: number[]; readonly msg: unknown }
  | { readonly t: 'end'; readonly id: number }
  | { readonly t: 'status'; readonly id: number; readonly code: number; readonly details: string }
  | { readonly t: 'reply'; readonly id: number; readonly value: unknown };

/** Control messages of the worker's life. */
export type Control =
  | { readonly t: 'listening'; readonly port: number }
  | { readonly t: 'failed'; readonly message: string }
  | { readonly t: 'stop'; readonly graceMs: number }
  | { readonly t: 'stopped' };

export type ToMain = { readonly events: readonly WorkerEvent[] } | Control;
export type ToWorker = { readonly ops: readonly MainOp[] } | Control;

/** What a worker starts with. */
export interface WorkerStart {
  readonly host: string;
  /** 0 for the first worker: it picks the port, the others bind the same one. */
  readonly port: number;
  readonly tls?: { readonly cert: Uint8Array; readonly key: Uint8Array; readonly clientCa?: Uint8Array };
  readonly serverOptions: Readonly<Record<string, string | number>>;
  readonly withLoad: boolean;
}

/**
 * The bytes alone, for a message: structured clone copies a view's whole ArrayBuffer, and grpc-js decodes
 * small requests into slices of its 8 KB Buffer pool. A view of all its buffer, or of shared memory, as is.
 */
export function tight(value: unknown): unknown {
  if (!(value instanceof Uint8Array) || value.buffer instanceof SharedArrayBuffer) return value;
  return value.byteLength === value.buffer.byteLength ? value : new Uint8Array(value);
}

/** Restores a Buffer a message carried as a Uint8Array (structured clone drops Buffer's prototype). */
export function asBuffer(value: unknown): unknown {
  return value instanceof Uint8Array && !Buffer.isBuffer(value)
    ? Buffer.from(value.buffer, value.byteOffset, value.byteLength)
    : value;
}

/**
 * Adds `next` to `last` when both are writes of the same message or both are flushes: a push to 2,000
 * streams is then a few entries to clone and read, not one per stream.
 */
export function merged(last: MainOp | WorkerEvent | undefined, next: MainOp | WorkerEvent): boolean {
  const same =
    (last?.t === 'write' && next.t === 'write' && last.msg === next.msg) ||
    (last?.t === 'flushed' && next.t === 'flushed');
  if (same) for (const id of next.ids) last.ids.push(id);
  return same;
}

/** Queues messages and posts them as one, at the end of this turn of the event loop. */
export class Batch<T extends MainOp | WorkerEvent> {
  private items: T[] = [];
  private scheduled = false;

  constructor(private readonly post: (items: T[]) => void) {}

  push(item: T): void {
    if (!merged(this.items[this.items.length - 1], item)) this.items.push(item);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  flush(): void {
    this.scheduled = false;
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.post(items);
  }
}
