import { ERROR_STATUS, type KeywayErrorCode } from './codes.js';

export { ERROR_STATUS, type KeywayErrorCode } from './codes.js';

/**
 * One entry of an error's `details`, e.g. `{ path: 'scopes.3', message: '…' }`.
 *
 * @see [docs/api.md §1.2](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-errors) ("details")
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
 * docs/api.md §1.2 codes and `status` the HTTP status that belongs to it; `message` is the
 * human-readable `error_description` and never contains a secret.
 *
 * @example
 * try {
 *   await broker.tokens.mint(principal, { name: 'ci', scopes: ['acme'] });
 * } catch (err) {
 *   if (err instanceof KeywayError && err.code === 'conflict') console.log('name taken');
 * }
 *
 * @see [docs/api.md §1.2](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-errors)
 */
export class KeywayError extends Error {
  override readonly name: string = 'KeywayError';
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

  /** The wire body of docs/api.md §1.2. */
  toJSON(): { error: KeywayErrorCode; error_description: string; details?: KeywayErrorDetail[] } {
    return this.details === undefined
      ? { error: this.code, error_description: this.message }
      : { error: this.code, error_description: this.message, details: this.details };
  }
}

/**
 * True when `err` is a {@link KeywayError}, optionally with the given code.
 *
 * @see [docs/api.md §1.2](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-errors)
 */
export function isKeywayError(err: unknown, code?: KeywayErrorCode): err is KeywayError {
  return err instanceof KeywayError && (code === undefined || err.code === code);
}

/**
 * Why an outbound request was refused or failed.
 *
 * @see docs/security.md "Outbound requests"
 */
export type OutboundFailure =
  | 'invalid_url'
  | 'insecure_scheme'
  | 'blocked_address'
  | 'redirect'
  | 'timeout'
  | 'too_large'
  | 'network';

/**
 * An outbound request that the guard refused or that failed on the way: a
 * {@link KeywayError} `upstream_error` (502) whose `failure` says why. The message names the
 * URL's origin and the reason, never a credential; callers turn it into the step of a
 * discovery trace or a `502` with `details`.
 *
 * @example
 * try {
 *   await outbound('https://10.0.0.1/');
 * } catch (err) {
 *   if (err instanceof OutboundError && err.failure === 'blocked_address') console.log('refused');
 * }
 *
 * @see docs/security.md "Outbound requests"; [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery) (502 details)
 */
export class OutboundError extends KeywayError {
  override readonly name = 'OutboundError';
  /** Why the request was refused or failed. */
  readonly failure: OutboundFailure;

  constructor(failure: OutboundFailure, message: string, options?: { cause?: unknown }) {
    super('upstream_error', message, options);
    this.failure = failure;
  }
}
