/*
 * What a broker reports of its work for metrics (docs/api.md §16): counts by kind and
 * outcome, never a secret, never a value a caller chose except a provider id. The broker
 * calls `observe` (BrokerConfig); `@keyway/http/metrics` turns the calls into Prometheus
 * counters.
 */

/** How a presented credential fared. */
export type TokenCheckOutcome = 'root' | 'token' | 'refused' | 'limited';

/**
 * How a refresh ended: new tokens stored; none needed or possible while the token is still
 * valid (`kept`: no refresh token, or a transient failure); a newer authorization won
 * (`superseded`); the connection needs the user again (`reauthorization_required`); or it
 * failed and the token is no longer valid (`failed`).
 */
export type RefreshOutcome =
  | 'refreshed'
  | 'kept'
  | 'superseded'
  | 'reauthorization_required'
  | 'failed';

/** How one webhook delivery attempt ended: delivered, to be retried, or given up. */
export type WebhookDeliveryOutcome = 'delivered' | 'retrying' | 'failed';

/**
 * The host of an outbound request: one of `allowedHosts` (development and tests: loopback
 * or private addresses, plain http) or any other, public host.
 */
export type HostClass = 'allowed' | 'public';

/**
 * One thing a broker did, as metrics count it: what `observe` of `createBroker` receives.
 *
 * @see [docs/api.md §16](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#16-health-metrics-logs-shutdown)
 */
export type Observation =
  | { kind: 'token_check'; outcome: TokenCheckOutcome }
  | { kind: 'refresh'; provider: string; outcome: RefreshOutcome }
  | { kind: 'webhook_delivery'; outcome: WebhookDeliveryOutcome }
  | {
      kind: 'outbound';
      hostClass: HostClass;
      /** `2xx` … `5xx`, or why no answer came (`timeout`, `network`, `blocked_address`, …). */
      outcome: string;
    }
  | { kind: 'rate_limited'; limit: 'auth' | 'mint' | 'discover' | 'register' }
  | {
      kind: 'gateway';
      provider: string;
      /**
       * `2xx` … `5xx` (the upstream's answer), `step_up` (its `403 insufficient_scope`),
       * `consent_required` (a `-32042` answered), or `upstream_error`.
       */
      outcome: string;
    }
  | { kind: 'gateway_streams' /** Upstream requests of the gateway open now. */; open: number }
  | {
      kind: 'portal_call';
      /** The connection's alias in the portal (docs/api.md §18). */
      alias: string;
      /** `ok`, `tool_error`, `input_required`, `consent_required`, `error`. */
      outcome: string;
    }
  | { kind: 'portal_sessions' /** Portal sessions open now (2025-11-25 wire). */; open: number }
  /** A provider was deleted: series labelled with its id may go. */
  | { kind: 'provider_deleted'; provider: string };

/** Receives observations; see {@link Observation}. */
export type Observer = (observation: Observation) => void;

/**
 * The observer of a broker given no `observe` hook: ignores every observation. A hot path
 * compares with it to skip making the observation at all.
 */
export const NO_OBSERVER: Observer = () => {};

/** An observer that never throws into the work it watches: its errors go to `onError`. */
export function safeObserver(
  observe: Observer | undefined,
  onError: (error: unknown) => void,
): Observer {
  if (observe === undefined) return NO_OBSERVER;
  return (observation) => {
    try {
      observe(observation);
    } catch (error) {
      onError(error);
    }
  };
}
