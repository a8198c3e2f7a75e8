/**
 * Responses a client process recorded from Canopy, for the bare server to
 * replay byte for byte: per stream, what it was sent before the first burst
 * (in order, with each response's type) and in each burst. Identical
 * responses are stored once. On disk: FILE (JSON index) and FILE.bin (the
 * distinct responses, concatenated).
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';

export interface Sent {
  readonly typeUrl: string;
  /** Index into the record's distinct responses. */
  readonly blob: number;
}

interface Index {
  readonly blobs: readonly (readonly [number, number])[];
  readonly initial: readonly (readonly Sent[])[];
  readonly bursts: readonly (readonly (readonly Sent[])[])[];
}

export class ResponseRecorder {
  private readonly blobs: Buffer[] = [];
  private readonly byHash = new Map<string, number>();
  private readonly initial: Sent[][] = [];
  private readonly bursts: Sent[][][] = [];

  /** Starts the next burst: responses from now on are that burst's. */
  mark(): void {
    this.bursts.push([]);
  }

  add(stream: number, typeUrl: string, bytes: Buffer): void {
    const hash = createHash('sha1').update(bytes).digest('base64');
    let blob = this.byHash.get(hash);
    if (blob === undefined) {
      blob = this.blobs.push(Buffer.from(bytes)) - 1;
      this.byHash.set(hash, blob);
    }
    const into = this.bursts.length === 0 ? this.initial : (this.bursts[this.bursts.length - 1] as Sent[][]);
    (into[stream] ??= []).push({ typeUrl, blob });
  }

  save(file: string): void {
    let at = 0;
    const blobs = this.blobs.map((b) => {
      const span = [at, at + b.length] as const;
      at += b.length;
      return span;
    });
    writeFileSync(`${file}.bin`, Buffer.concat(this.blobs));
    const dense = (per: Sent[][]): Sent[][] => Array.from(per, (s) => s ?? []);
    const index: Index = { blobs, initial: dense(this.initial), bursts: this.bursts.map(dense) };
    writeFileSync(file, JSON.stringify(index));
  }
}

/** A saved record, with its responses as Buffers. */
export class ResponseRecord {
  readonly streams: number;
  private readonly data: Buffer;
  private readonly index: Index;
  private readonly cache = new Map<number, Buffer>();

  constructor(file: string) {
    this.index = JSON.parse(readFileSync(file, 'utf8')) as Index;
    this.data = readFileSync(`${file}.bin`);
    this.streams = this.index.initial.length;
    if (this.streams === 0) throw new Error(`${file}: no stream was recorded`);
  }

  get burstCount(): number {
    return this.index.bursts.length;
  }

  /** What recorded stream `stream` was sent before the first burst, of one type. */
  initial(stream: number, typeUrl: string): Buffer[] {
    return (this.index.initial[stream % this.streams] ?? [])
      .filter((s) => s.typeUrl === typeUrl)
      .map((s) => this.blob(s.blob));
  }

  /** What recorded stream `stream` was sent in burst `burst`. */
  burst(burst: number, stream: number): Buffer[] {
    return (this.index.bursts[burst]?.[stream % this.streams] ?? []).map((s) => this.blob(s.blob));
  }

  private blob(i: number): Buffer {
    let b = this.cache.get(i);
    if (!b) {
      const span = this.index.blobs[i];
      if (!span) throw new Error(`record: no response ${i}`);
      b = this.data.subarray(span[0], span[1]);
      this.cache.set(i, b);
    }
    return b;
  }
}
