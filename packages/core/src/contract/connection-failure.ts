import { CONNECTION_ERROR_CODES, type ConnectionErrorCode } from './codes.js';

/* Why a connection failed, as its view shows it, with a code of the contract's list. */

/**
 * Why a connection failed, as its view shows it.
 *
 * @see API.md §5 "Connection view"
 */
export interface ConnectionFailure {
  code: ConnectionErrorCode;
  description: string;
}

const KNOWN_CODES: ReadonlySet<string> = new Set(CONNECTION_ERROR_CODES);
const isConnectionErrorCode = (code: string): code is ConnectionErrorCode => KNOWN_CODES.has(code);

/** A failure with a code from {@link ConnectionErrorCode}; another code is kept in words. */
export function connectionFailure(failure: {
  code: string;
  description: string;
}): ConnectionFailure {
  if (isConnectionErrorCode(failure.code)) {
    return { code: failure.code, description: failure.description };
  }
  return {
    code: 'server_error',
    description: `${JSON.stringify(failure.code.slice(0, 64))}: ${failure.description}`,
  };
}
