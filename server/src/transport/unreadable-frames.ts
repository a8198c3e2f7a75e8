/**
 * Request frames the ADS server cannot read. grpc-js reads a frame whose
 * compressed flag is set, on a call without a grpc-encoding header, as if it
 * were not compressed (the gRPC spec makes that a protocol error), and when
 * it does fail to deserialize a request it sends its status while the
 * responses to the requests read before it are still being written: the
 * write after its end loses the status and the client sees silence. So the
 * deserializer never throws; it returns an `Unreadable` that the stream
 * handler answers with its own status after it has stopped writing.
 */

/** A request frame that could not be read: the stream ends with INVALID_ARGUMENT and this detail. */
export interface Unreadable {
  readonly unreadable: string;
}

export function isUnreadable(value: object): value is Unreadable {
  return 'unreadable' in value;
}

/** `decode` as a gRPC request deserializer that reports, instead of throwing, what it cannot read. */
export function readableRequest<R>(
  decode: (bytes: Buffer) => R,
  messageName: string,
): (bytes: Buffer) => R | Unreadable {
  return (bytes) => {
    if (compressedWithoutEncoding(bytes)) {
      return {
        unreadable:
          `a ${messageName} frame has the compressed flag set but the call declared no grpc-encoding ` +
          '(send the grpc-encoding header with compressed messages, or clear the flag)',
      };
    }
    try {
      return decode(bytes);
    } catch (err) {
      return {
        unreadable: `a message of ${bytes.length} bytes is not a valid ${messageName}: ${(err as Error).message}`,
      };
    }
  };
}

/**
 * grpc-js hands an identity-encoded message over as a view into its frame, so the 5-byte prefix (flag,
 * big-endian length) sits just before it; a decompressed message is a fresh buffer and has no such prefix.
 * The flag is believed only when the length beside it is this message's: anything else reads as "not set".
 */
function compressedWithoutEncoding(bytes: Buffer): boolean {
  if (bytes.byteOffset < 5) return false;
  const prefix = new DataView(bytes.buffer, bytes.byteOffset - 5, 5);
  return prefix.getUint8(0) === 1 && prefix.getUint32(1) === bytes.length;
}
