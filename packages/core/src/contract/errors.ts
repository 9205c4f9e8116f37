/**
 * The error codes of the Keyway HTTP contract (API.md §1.2) with the HTTP status each one
 * answers with. This table is the only place a status is decided.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  invalid_path: 400,
  invalid_scope: 400,
  invalid_lifetime: 400,
  invalid_name: 400,
  invalid_redirect: 400,
  registration_unsupported: 400,
  invalid_token: 401,
  insufficient_scope: 403,
  delegation_denied: 403,
  provider_management_disabled: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  connection_not_active: 409,
  reauthorization_required: 409,
  refresh_unavailable: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unsupported_authorization_server: 422,
  rate_limited: 429,
  discovery_failed: 502,
  registration_failed: 502,
  upstream_error: 502,
  internal_error: 500,
} as const satisfies Record<string, number>;

/**
 * One of the stable error codes of API.md §1.2. Public API: `switch (err.code)` narrows.
 *
 * @see API.md §1.2 (the table of codes)
 */
export type KeywayErrorCode = keyof typeof ERROR_STATUS;

/**
 * One entry of an error's `details`, e.g. `{ path: 'scopes.3', message: '…' }`.
 *
 * @see API.md §1.2 ("details")
 */
export interface KeywayErrorDetail {
  path?: string;
  message?: string;
  [key: string]: unknown;
}

/** Options of {@link KeywayError}. */
export interface KeywayErrorOptions {
  /** Structured details that are safe to show to the caller (never a secret). */
  details?: KeywayErrorDetail[];
  /** The internal cause. Never serialized to the wire. */
  cause?: unknown;
  /** With `rate_limited`: seconds until a retry can succeed (the `Retry-After` header). */
  retryAfter?: number;
}

/**
 * The one error type Keyway throws for anything a caller can act on. `code` is one of the
 * API.md codes and `status` the HTTP status that belongs to it; `message` is the
 * human-readable `error_description` and never contains a secret.
 *
 * @example
 * try {
 *   await broker.tokens.mint(principal, { name: 'ci', scopes: ['acme'] });
 * } catch (err) {
 *   if (err instanceof KeywayError && err.code === 'conflict') console.log('name taken');
 * }
 *
 * @see API.md §1.2
 */
export class KeywayError extends Error {
  override readonly name = 'KeywayError';
  readonly code: KeywayErrorCode;
  readonly details: KeywayErrorDetail[] | undefined;
  /** With `rate_limited`: seconds until a retry can succeed (the `Retry-After` header). */
  readonly retryAfter: number | undefined;

  constructor(code: KeywayErrorCode, message: string, options: KeywayErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
    this.retryAfter = options.retryAfter;
  }

  /** The HTTP status of this error's code. */
  get status(): number {
    return ERROR_STATUS[this.code];
  }

  /** The wire body of API.md §1.2. */
  toJSON(): { error: KeywayErrorCode; error_description: string; details?: KeywayErrorDetail[] } {
    return this.details === undefined
      ? { error: this.code, error_description: this.message }
      : { error: this.code, error_description: this.message, details: this.details };
  }
}

/**
 * True when `err` is a {@link KeywayError}, optionally with the given code.
 *
 * @see API.md §1.2
 */
export function isKeywayError(err: unknown, code?: KeywayErrorCode): err is KeywayError {
  return err instanceof KeywayError && (code === undefined || err.code === code);
}
