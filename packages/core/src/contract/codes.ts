/*
 * The codes and enums of the contract, one source each: error codes with their statuses,
 * connection error codes, event types, connection and delivery statuses. Everything else
 * (schemas, storage rows, types) derives from these lists. This module imports nothing, so
 * any module may import it without a cycle.
 */

/**
 * The error codes of the Keyway HTTP contract (docs/api.md §1.2) with the HTTP status each one
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
  credentials_not_exportable: 403,
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
  unavailable: 503,
  internal_error: 500,
} as const satisfies Record<string, number>;

/**
 * One of the stable error codes of docs/api.md §1.2. Public API: `switch (err.code)` narrows.
 *
 * @see [docs/api.md §1.2](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#12-errors) (the table of codes)
 */
export type KeywayErrorCode = keyof typeof ERROR_STATUS;

/**
 * The codes of a connection's or a callback outcome's `error` (docs/api.md §5): the
 * authorization server's OAuth error codes (RFC 6749 §4.1.2.1 and §5.2; RFC 8707's
 * `invalid_target`; OpenID Connect Core §3.1.2.6), then Keyway's own.
 */
export const CONNECTION_ERROR_CODES = [
  'invalid_request',
  'unauthorized_client',
  'access_denied',
  'unsupported_response_type',
  'invalid_scope',
  'server_error',
  'temporarily_unavailable',
  'invalid_client',
  'invalid_grant',
  'unsupported_grant_type',
  'invalid_target',
  'interaction_required',
  'login_required',
  'account_selection_required',
  'consent_required',
  'invalid_response',
  'server_unreachable',
  'token_expired',
  'reauthorization_required',
  'connection_deleted',
] as const;

/**
 * The `error.code` of a connection or a callback outcome: one of
 * {@link CONNECTION_ERROR_CODES}. A server's code outside the list is recorded as
 * `server_error`, its code kept in the description.
 *
 * @see [RFC 6749 §4.1.2.1](https://www.rfc-editor.org/rfc/rfc6749.html#section-4.1.2.1) and §5.2; OpenID Connect Core §3.1.2.6; [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections)
 */
export type ConnectionErrorCode = (typeof CONNECTION_ERROR_CODES)[number];

/**
 * The type of an event: every state change and every credential hand-out.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log)
 */
export const EVENT_TYPES = [
  'token.created',
  'token.narrowed',
  'token.deleted',
  'provider.created',
  'provider.updated',
  'provider.deleted',
  'secret.created',
  'secret.updated',
  'secret.deleted',
  'secret.read',
  'connection.created',
  'connection.authorized',
  'connection.refreshed',
  'connection.failed',
  'connection.reauthorization_required',
  'connection.expiring',
  'connection.updated',
  'connection.deleted',
  'credentials.issued',
  'grant.created',
  'grant.revoked',
  'tool.called',
  'connect_session.created',
  'connect_session.completed',
] as const;

/**
 * One of {@link EVENT_TYPES}.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log)
 */
export type KeywayEventType = (typeof EVENT_TYPES)[number];

/**
 * The states of a connection (docs/api.md §5): `pending` (never completed), `active`, `error`.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Connection view"
 */
export const CONNECTION_STATUSES = ['pending', 'active', 'error'] as const;

/**
 * One of {@link CONNECTION_STATUSES}.
 *
 * @see [docs/api.md §5](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#5-connections) "Connection view"
 */
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];

/**
 * The states of a webhook delivery (docs/api.md §11): waiting for an attempt, delivered (a
 * `2xx`), or failed for good.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log)
 */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

/**
 * One of {@link DELIVERY_STATUSES}.
 *
 * @see [docs/api.md §11](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#11-events-webhooks-audit-log)
 */
export type WebhookDeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** Most scopes one broker token may carry (SEED.md Limits). */
export const MAX_SCOPES = 32;
