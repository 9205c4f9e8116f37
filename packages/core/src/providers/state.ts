import { KeywayError } from '../contract/errors.js';
import { isoTime, isoTimeOrNull } from '../contract/time.js';
import type { ProviderRecord } from '../storage/record-types.js';
import {
  type AuthorizationServerInfo,
  HandOutSchema,
  type ProviderState,
  ProviderStateSchema,
  readStored,
  type StoredRegistration,
} from '../storage/states.js';
import { currentParty, providerKeepsParty } from './party.js';
import { type ClientProfile, redirectUriOf } from './registration.js';

/** Vault kinds of the secrets Keyway keeps for providers. */
export const CLIENT_SECRET_KIND = 'client_secret';
export const REGISTRATION_TOKEN_KIND = 'registration_access_token';
/** The vault kind of an `enterprise` provider's client secret at its identity provider. */
export const IDP_SECRET_KIND = 'idp_client_secret';

/** The vault key of a provider's secrets at one issuer. */
export const secretKey = (providerId: string, issuer: string): string => `${providerId} ${issuer}`;

/**
 * The provider view every provider endpoint answers with (docs/api.md §4). Never a secret.
 *
 * @see [docs/api.md §4](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#4-providers) "Provider view"
 */
export interface ProviderView {
  id: string;
  template: 'mcp' | 'oauth2';
  /** Its catalog profile (docs/api.md §15); `null` when written without one. */
  profile: string | null;
  label: string;
  /**
   * `false`: inject-only — `GET /api/oauth/credentials/…` answers `403
   * credentials_not_exportable`; the gateway and the proxy use the tokens (docs/api.md §13).
   */
  hand_out: boolean;
  /** Whether its connections' tokens are DPoP-bound whatever the server advertises. */
  dpop: boolean;
  configuration: {
    /** `mcp`: the MCP endpoint. */
    resource_url?: string;
    scopes: string[];
    /** `oauth2`: the values of its profile's placeholders; absent when it has none. */
    params?: Record<string, string>;
    /** Added to the authorization URL (docs/api.md §4); absent when none. */
    authorization_params?: Record<string, string>;
    /** Added to every token request; absent when none. */
    token_params?: Record<string, string>;
    /** `assume_s256`: S256 sent to a server that does not advertise it (docs/api.md §6 item 4). */
    pkce?: 'assume_s256';
  };
  credentials: {
    /** `client_credentials`, `jwt_bearer`: the client gets its own tokens (docs/api.md §14). */
    mode: 'register' | 'custom' | 'client_credentials' | 'jwt_bearer' | 'enterprise';
    /** `enterprise`: the identity provider, and whether Keyway holds a secret there. */
    identity_provider?: {
      issuer: string;
      token_endpoint: string;
      client_id: string;
      client_secret_set: boolean;
    };
    /** `jwt_bearer`: the configured source its assertions are read from, and its file. */
    assertion_source?: string;
    assertion_file?: string;
    /** Mode `register`: the client metadata the operator set for registration; absent when none. */
    client_metadata?: Record<string, string | string[]>;
    client_id: string;
    registration: StoredRegistration['registration'];
    token_endpoint_auth_method: StoredRegistration['token_endpoint_auth_method'];
    client_secret_set: boolean;
    client_secret_expires_at: string | null;
    /**
     * Dynamic registration: the server's answer (RFC 7591 §3.2.1) with `client_secret` and
     * `registration_access_token` masked; `null` for other clients.
     */
    registration_response: Record<string, unknown> | null;
    /**
     * The redirect URI the client uses, for an operator to register with a `custom` client:
     * the shared callback, or the server's own (docs/api.md §5 "Mix-up defense"). `null` on a
     * broker without a base URL.
     */
    redirect_uri: string | null;
  };
  /** `mcp`: the protected resource; `null` for `oauth2`. */
  resource: {
    resource: string;
    resource_metadata_url: string | null;
    scopes_supported: string[] | null;
  } | null;
  /** `oauth2`: where the API proxy forwards (docs/api.md §13); `null` when none, and for `mcp`. */
  api_base_url: string | null;
  authorization_server: Pick<
    AuthorizationServerInfo,
    | 'issuer'
    | 'authorization_endpoint'
    | 'token_endpoint'
    | 'registration_endpoint'
    | 'revocation_endpoint'
    | 'scopes_supported'
  >;
  /**
   * The last time the provider moved to another authorization server or client, and how
   * many active connections that put in `error` with `reauthorization_required` (their
   * tokens belong to the previous party and are never sent to the new one); `null` when it
   * never moved.
   */
  last_party_change: {
    at: string;
    previous_issuer: string;
    previous_client_id: string;
    /** `null` for a change recorded before the resource was part of the party. */
    previous_resource_url: string | null;
    connections_reauthorization_required: number;
  } | null;
  created_at: string;
  updated_at: string;
}

/** A provider ready for use by connections: its state and the client at its current server. */
export interface ResolvedProvider {
  id: string;
  state: ProviderState;
  client: StoredRegistration;
}

/** The error of a provider that does not exist. */
export function providerNotFound(id: string): KeywayError {
  return new KeywayError('not_found', `no provider ${JSON.stringify(id)}`);
}

/** The state of a provider record, checked. @throws {KeywayError} `internal_error`. */
export function providerState(record: ProviderRecord): ProviderState {
  return readStored(ProviderStateSchema, record.state, `state of provider ${record.id}`);
}

/**
 * Whether a provider's tokens may be handed out (`hand_out`, docs/api.md §13): the one field
 * a hand-out needs, validated on its own (a hand-out does not pay for the validation of the
 * provider's discovery and registrations, which it does not use).
 *
 * @throws {KeywayError} `internal_error` for a stored `hand_out` that is not a boolean.
 */
export function handsOut(record: ProviderRecord): boolean {
  return (
    readStored(HandOutSchema, record.state, `state of provider ${record.id}`).hand_out !== false
  );
}

/**
 * {@link handsOut} of the `hand_out` member alone, as storage answers it with a hand-out's
 * reads (`readForHandOut`): its JSON text, `null` when the state has none.
 *
 * @throws {KeywayError} `internal_error` for a stored `hand_out` that is not a boolean.
 */
export function handOutMember(providerId: string, text: string | null): boolean {
  if (text === null || text === 'true') return true;
  if (text === 'false') return false;
  let value: unknown = text;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON: refused below as what was stored.
  }
  return (
    readStored(HandOutSchema, { hand_out: value }, `state of provider ${providerId}`).hand_out !==
    false
  );
}

/** The client of a state at its current server. @throws {KeywayError} `internal_error`. */
export function currentClient(id: string, state: ProviderState): StoredRegistration {
  return readStored(
    ProviderStateSchema.shape.registrations.valueType,
    state.registrations[state.authorization_server.issuer],
    `client of provider ${id} at its authorization server`,
  );
}

/** @param profile The deployment as servers see it (`null` without a base URL). */
export function providerView(record: ProviderRecord, profile: ClientProfile | null): ProviderView {
  const state = providerState(record);
  const client = currentClient(record.id, state);
  const server = state.authorization_server;
  const change = state.last_party_change;
  return {
    id: record.id,
    template: state.template ?? 'mcp',
    profile: state.oauth2?.profile ?? state.profile ?? null,
    label: state.label,
    hand_out: state.hand_out !== false,
    dpop: state.dpop === true,
    configuration: {
      ...state.configuration,
      ...(state.oauth2 !== undefined && Object.keys(state.oauth2.params).length > 0
        ? { params: state.oauth2.params }
        : {}),
    },
    credentials: {
      mode: state.grant ?? state.mode,
      ...(state.identity_provider === undefined
        ? {}
        : { identity_provider: { ...state.identity_provider } }),
      ...(state.assertion === undefined
        ? {}
        : {
            assertion_source: state.assertion.source,
            ...(state.assertion.file === undefined ? {} : { assertion_file: state.assertion.file }),
          }),
      ...(state.client_metadata === undefined
        ? {}
        : { client_metadata: { ...state.client_metadata } }),
      client_id: client.client_id,
      registration: client.registration,
      token_endpoint_auth_method: client.token_endpoint_auth_method,
      client_secret_set: client.client_secret_set,
      client_secret_expires_at: isoTimeOrNull(client.client_secret_expires_at),
      registration_response: client.response === undefined ? null : { ...client.response },
      redirect_uri:
        profile === null
          ? null
          : redirectUriOf(profile, server.issuer, client.callback ?? 'shared'),
    },
    resource:
      state.resource === null
        ? null
        : {
            resource: state.resource.resource,
            resource_metadata_url: state.resource.resource_metadata_url,
            scopes_supported: state.resource.scopes_supported,
          },
    api_base_url: state.oauth2?.api_base_url ?? null,
    authorization_server: {
      issuer: server.issuer,
      authorization_endpoint: server.authorization_endpoint,
      token_endpoint: server.token_endpoint,
      registration_endpoint: server.registration_endpoint,
      revocation_endpoint: server.revocation_endpoint,
      scopes_supported: server.scopes_supported,
    },
    last_party_change:
      change === undefined || change === null
        ? null
        : {
            ...change,
            at: isoTime(change.at),
            previous_resource_url: change.previous_resource_url ?? null,
          },
    created_at: isoTime(record.createdAt),
    updated_at: isoTime(record.updatedAt),
  };
}

/**
 * What moved when a provider left the party of its connections: the MCP endpoint alone
 * (`resource`), or the authorization server or client (`server`).
 */
export type PartyMove = 'resource' | 'server';

/**
 * Records on `next` that the provider moved to another resource, authorization server or
 * client since `previous`, when it did.
 *
 * @returns what moved (its connections then need authorizing again), or `null`.
 */
export function notePartyChange(
  previous: ProviderState | null,
  next: ProviderState,
  now: number,
): PartyMove | null {
  const before = previous === null ? null : currentParty(previous);
  if (before === null || providerKeepsParty(next, before)) return null;
  next.last_party_change = {
    at: now,
    previous_issuer: before.issuer,
    previous_client_id: before.client_id,
    previous_resource_url:
      before.resource_url ?? before.api_base_url ?? before.resource ?? undefined,
    connections_reauthorization_required: 0,
  };
  const issuer = next.authorization_server.issuer;
  const sameServer =
    issuer === before.issuer && next.registrations[issuer]?.client_id === before.client_id;
  return sameServer ? 'resource' : 'server';
}

/**
 * Whether a registered client can still be used: it is not a client the server forgot,
 * and its secret (if it expires) has not expired. A manual client is always used as is.
 */
export function registrationUsable(registration: StoredRegistration, now: number): boolean {
  if (registration.registration === 'manual') return true;
  if (registration.stale === true) return false;
  return (
    registration.client_secret_expires_at === null || registration.client_secret_expires_at > now
  );
}

/** The error of an operation that needs the OAuth callback on a broker without `baseUrl`. */
export function noBaseUrl(): KeywayError {
  return new KeywayError(
    'internal_error',
    'the broker has no baseUrl, so it has no OAuth callback',
  );
}
