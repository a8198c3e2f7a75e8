/**
 * A minimal protobuf wire writer: sizes first, then one write into one
 * buffer. Used where bytes are assembled from pre-encoded parts.
 */
import { copyBytes, type Bytes } from './rope.js';
import { CodedError } from '../domain/errors.js';

export function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Size of a length-delimited field (tag + length + body). Field numbers < 16 take one tag byte. */
export function fieldSize(field: number, bodyLength: number): number {
  return varintSize(field << 3) + varintSize(bodyLength) + bodyLength;
}

/** Size of a string or bytes field that proto3 leaves out when empty. */
export function optionalFieldSize(field: number, bodyLength: number): number {
  return bodyLength ? fieldSize(field, bodyLength) : 0;
}

export function varintFieldSize(field: number, value: number): number {
  return varintSize(field << 3) + varintSize(value);
}

const utf8 = new TextEncoder();

export class WireWriter {
  readonly buf: Uint8Array;
  pos = 0;

  /** `shared`: the bytes in a SharedArrayBuffer, which threads read without a copy (transport/xds-workers.ts). */
  constructor(size: number, shared = false) {
    // Not zero-filled: finish() checks that every byte was written.
    if (shared) this.buf = new Uint8Array(new SharedArrayBuffer(size));
    else this.buf = size > 4096 ? Buffer.allocUnsafeSlow(size) : new Uint8Array(size);
  }

  varint(n: number): this {
    while (n >= 0x80) {
      this.buf[this.pos++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    this.buf[this.pos++] = n;
    return this;
  }

  tag(field: number, wireType: 0 | 2 | 5): this {
    return this.varint((field << 3) | wireType);
  }

  /** A length-delimited field whose body is `length` bytes, written next by the caller. */
  open(field: number, length: number): this {
    return this.tag(field, 2).varint(length);
  }

  bytes(field: number, body: Uint8Array): this {
    this.open(field, body.length);
    this.buf.set(body, this.pos);
    this.pos += body.length;
    return this;
  }

  /** A string field whose every character is ASCII (the caller checks): one byte each, no encoder. */
  ascii(field: number, s: string): this {
    this.open(field, s.length);
    const buf = this.buf;
    let pos = this.pos;
    for (let i = 0; i < s.length; i++) buf[pos++] = s.charCodeAt(i);
    this.pos = pos;
    return this;
  }

  /** Like `bytes`, but writes nothing for an empty body (proto3's default). */
  optionalBytes(field: number, body: Uint8Array): this {
    return body.length ? this.bytes(field, body) : this;
  }

  /** A length-delimited field whose body is contiguous bytes or a rope. */
  part(field: number, body: Bytes): this {
    this.open(field, body.length);
    this.pos = copyBytes(body, this.buf, this.pos);
    return this;
  }

  raw(body: Uint8Array): this {
    this.buf.set(body, this.pos);
    this.pos += body.length;
    return this;
  }

  uint(field: number, value: number): this {
    return this.tag(field, 0).varint(value);
  }

  /** A fixed32 field (wire type 5), little-endian as protobuf defines it. */
  fixed32(field: number, value: number): this {
    this.tag(field, 5);
    const b = this.buf;
    b[this.pos++] = value & 0xff;
    b[this.pos++] = (value >>> 8) & 0xff;
    b[this.pos++] = (value >>> 16) & 0xff;
    b[this.pos++] = (value >>> 24) & 0xff;
    return this;
  }

  finish(): Uint8Array {
    if (this.pos !== this.buf.length)
      throw new CodedError('CANOPY_BROKEN_INVARIANT', `wire size mismatch: wrote ${this.pos} of ${this.buf.length}`);
    return this.buf;
  }
}

/**
 * One writer that lives as long as the module. Writers are short-lived, and
 * V8 drops an object shape (hidden class) that no live object has at a full
 * GC, deoptimizing every function compiled against it: without a writer that
 * outlives each GC, every encoding function would run unoptimized and be
 * recompiled after each one.
 */
export const SHAPE_ANCHOR = new WireWriter(0);

export function utf8Bytes(s: string): Uint8Array {
  return utf8.encode(s);
}
