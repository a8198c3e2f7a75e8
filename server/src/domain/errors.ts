/**
 * Errors with stable codes (the admin API's in docs/admin-api.md's table). Validation
 * itself returns results, never throws; these wrap a failed result where a
 * caller needs an exception (config load at startup).
 */

export interface FieldError {
  /** Where the bad value is, e.g. `services[0].endpoints[2].port`. */
  readonly path: string;
  readonly message: string;
}

export type ValidationResult<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly errors: readonly FieldError[] };

export function formatFieldErrors(errors: readonly FieldError[]): string {
  return errors.map((e) => `${e.path || '(root)'}: ${e.message}`).join('; ');
}

export type ErrorCode =
  | 'CANOPY_INVALID_CONFIG'
  | 'CANOPY_INVALID_SERVICE'
  | 'CANOPY_SERVICE_NOT_FOUND'
  | 'CANOPY_ENDPOINT_NOT_FOUND'
  | 'CANOPY_CONFIG_UNREADABLE'
  | 'CANOPY_BAD_REQUEST'
  | 'CANOPY_NOT_FOUND'
  | 'CANOPY_NOT_READY'
  | 'CANOPY_CONFLICT'
  | 'CANOPY_UNAUTHORIZED'
  | 'CANOPY_MISDIRECTED'
  | 'CANOPY_RATE_LIMITED'
  | 'CANOPY_STORE_FULL'
  | 'CANOPY_METHOD_NOT_ALLOWED'
  | 'CANOPY_UNSUPPORTED_MEDIA_TYPE'
  | 'CANOPY_BODY_TOO_LARGE'
  | 'CANOPY_INTERNAL';

/**
 * The codes of errors the server, the agent and the command line throw that never cross the admin API as
 * themselves (an admin request that meets one answers CANOPY_INTERNAL, as before). Stable: logs and
 * scripts may match them. Documented in docs/operations.md's table.
 */
export type InternalErrorCode =
  /** A flag or option given at start is not usable (`--store`, `--cgroup`, an admin API off loopback). */
  | 'CANOPY_BAD_OPTION'
  /** The data directory or the store's backend cannot be opened or read. */
  | 'CANOPY_STORE_UNAVAILABLE'
  /** A write the store refuses as written (one service put twice in one write). */
  | 'CANOPY_STORE_BAD_WRITE'
  /** The store was closed. */
  | 'CANOPY_STORE_CLOSED'
  /** A watch asked for revisions older than the store keeps: list again. */
  | 'CANOPY_STORE_COMPACTED'
  /** What the data directory holds was written in a format this version cannot read, or is damaged. */
  | 'CANOPY_STORE_FORMAT'
  /** A canopy.v1.LocalityTree that cannot be built or loaded (a node agent NACKs it with this message). */
  | 'CANOPY_INVALID_TREE'
  /** The kernel datapath is not available (not Linux, the addon or the BPF object not built, a map missing). */
  | 'CANOPY_DATAPATH_UNAVAILABLE'
  /** A key or value Buffer handed to the BPF addon is not its map's key or value size (thrown by the addon). */
  | 'CANOPY_BPF_BUFFER'
  /** A cgroup is not a cgroup v2 directory. */
  | 'CANOPY_BAD_CGROUP'
  /** Something the code relies on did not hold (an encoder's sizes, a slot's state): a bug. */
  | 'CANOPY_BROKEN_INVARIANT'
  /** A peer (etcd, a replica, a CSDS server, the Kubernetes API, the config parser thread) failed to answer. */
  | 'CANOPY_PEER_FAILED'
  /** The installed package lacks files it ships with (package.json beside proto/). */
  | 'CANOPY_INSTALL_INCOMPLETE'
  /** An xDS worker thread could not start or listen on the xDS port (`--xds-workers`). */
  | 'CANOPY_XDS_WORKER_FAILED';

/**
 * The one base of Canopy's errors: a stable `code` and, where input was at fault, the field paths
 * (`services[0].endpoints[2].port`). The admin API's errors (CanopyError) are the ones its error handler
 * maps to an HTTP status; the rest carry an InternalErrorCode.
 */
export class CodedError<C extends string = ErrorCode | InternalErrorCode> extends Error {
  constructor(
    readonly code: C,
    message: string,
    readonly fields?: readonly FieldError[],
  ) {
    // The name stays 'Error': what the command line and the logs print of these is unchanged.
    super(message);
  }
}

/** An error of the admin API: its code says the HTTP status (admin/app.ts HTTP_STATUS). */
export class CanopyError extends CodedError<ErrorCode> {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
    this.name = 'CanopyError';
  }
}

export class ValidationError extends CanopyError {
  constructor(
    code: 'CANOPY_INVALID_CONFIG' | 'CANOPY_INVALID_SERVICE' | 'CANOPY_BAD_REQUEST',
    readonly errors: readonly FieldError[],
  ) {
    super(code, formatFieldErrors(errors));
    this.name = 'ValidationError';
  }
}
