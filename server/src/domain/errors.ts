/**
 * Errors with stable codes (documented in README's error table). Validation
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

export class CanopyError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
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
