import * as oauth from 'oauth4webapi';
import { KeywayError } from '../contract/errors.js';
import { OutboundError } from '../outbound/network-failure.js';
import type { AuthorizationServerInfo, ResourceInfo } from '../storage/states.js';

/**
 * One step of a discovery trace, as `POST /api/admin/discover` shows it.
 *
 * @see [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery) steps 1–5; [RFC 9728 §3](https://www.rfc-editor.org/rfc/rfc9728.html#section-3); [RFC 8414 §3](https://www.rfc-editor.org/rfc/rfc8414.html#section-3)
 */
export interface DiscoveryStep {
  /**
   * `probe`, `resource_metadata`, `resource_match`, `authorization_server_metadata`,
   * `requirements`; `legacy` for the 2025-03-26 fallback (docs/api.md §6 item 9).
   */
  step: string;
  url: string | null;
  /** HTTP status, when there was an answer. */
  status: number | null;
  ok: boolean;
  note: string;
  /**
   * The public document this step read, as the server sent it (protected-resource or
   * authorization-server metadata); only on the step that found it. Never stored.
   */
  document?: Record<string, unknown>;
}

/**
 * The outcome of a discovery run: a trace, and the results when it succeeded.
 *
 * @see [docs/api.md §6](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#6-mcp-discovery); [RFC 9728](https://www.rfc-editor.org/rfc/rfc9728.html); [RFC 8414](https://www.rfc-editor.org/rfc/rfc8414.html)
 */
export interface DiscoveryTrace {
  ok: boolean;
  steps: DiscoveryStep[];
  resource: ResourceInfo | null;
  authorization_server: AuthorizationServerInfo | null;
  /** The `scope` of the 401 challenge, when there was one. */
  challenge_scope: string | null;
  /** Scopes to request, chosen per docs/api.md §6 step 5. */
  scopes: string[];
  /** The server is of the 2025-03-26 revision: found by the fallback of docs/api.md §6 item 9. */
  legacy: boolean;
  /** When not ok: the docs/api.md §1.2 code the failure answers with. */
  error: 'discovery_failed' | 'unsupported_authorization_server' | null;
}

/** A successful discovery. */
export interface Discovery extends DiscoveryTrace {
  ok: true;
  resource: ResourceInfo;
  authorization_server: AuthorizationServerInfo;
  error: null;
}

/** An empty trace: nothing found yet. */
export function emptyTrace(): DiscoveryTrace {
  return {
    ok: false,
    steps: [],
    resource: null,
    authorization_server: null,
    challenge_scope: null,
    scopes: [],
    legacy: false,
    error: 'discovery_failed',
  };
}

/** What went wrong with a request, in words for a trace: never a body, never a secret. */
export function failureNote(error: unknown): string {
  if (error instanceof OutboundError) return error.message;
  if (error instanceof oauth.OperationProcessingError) return error.message;
  if (error instanceof oauth.ResponseBodyError)
    return `${error.error}: ${error.error_description ?? ''}`.trim();
  if (error instanceof SyntaxError) return 'the answer is not valid JSON';
  return error instanceof Error ? error.message : 'the request failed';
}

/** Quotes a value from a remote document for a trace note or an error, shortened. */
export function quoted(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The value when it is an array of strings, else `null`. */
export function stringArray(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : null;
}

/**
 * Whether discovery stopped because the metadata's `resource` names something else (step
 * 3): a definitive answer, unlike a server that could not be reached.
 */
export function resourceMismatched(trace: DiscoveryTrace): boolean {
  return trace.steps.some((step) => step.step === 'resource_match' && !step.ok);
}

/**
 * A successful trace as a {@link Discovery}; otherwise the error it answers with.
 *
 * @throws {KeywayError} `discovery_failed` (502) or `unsupported_authorization_server` (422),
 *   with the trace in `details`.
 */
export function throwUnlessDiscovered(trace: DiscoveryTrace): Discovery {
  const { resource, authorization_server: server } = trace;
  if (trace.ok && resource !== null && server !== null) {
    return { ...trace, ok: true, resource, authorization_server: server, error: null };
  }
  const failed = [...trace.steps].reverse().find((step) => !step.ok);
  const code = trace.error ?? 'discovery_failed';
  const summary =
    code === 'unsupported_authorization_server'
      ? `the authorization server does not meet what Keyway requires (${failed?.note ?? 'unknown'})`
      : `discovery failed at ${failed?.step ?? 'an unknown step'}: ${failed?.note ?? 'no details'}`;
  throw new KeywayError(code, summary, {
    // The documents stay out of an error: its steps say what failed and why.
    details: trace.steps.map(({ document: _, ...step }) => step),
  });
}
