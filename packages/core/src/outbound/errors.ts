/* The failures of outbound requests: their codes, and the error that carries one. */

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
 * An outbound request that the guard refused or that failed on the way. The message names
 * the URL's origin and the reason, never a credential; callers turn it into the step of a
 * discovery trace or a `502` with `details`.
 *
 * @see docs/security.md "Outbound requests"; [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery) (502 details)
 */
export class OutboundError extends Error {
  override readonly name = 'OutboundError';
  /** Why the request was refused or failed, as {@link KeywayError.code} is for API errors. */
  readonly code: OutboundFailure;

  constructor(code: OutboundFailure, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** The shape of every Keyway error body (docs/api.md §1.2): code and description. */
  toJSON(): { error: OutboundFailure; error_description: string } {
    return { error: this.code, error_description: this.message };
  }
}
