import type { ProfileInput } from '../schema.js';

/* Profiles of CRM, commerce, payments, accounting and media APIs. Facts from `docs_url`. */

export const BUSINESS_PROFILES: ProfileInput[] = [
  {
    id: 'salesforce',
    label: 'Salesforce',
    docs_url:
      'https://help.salesforce.com/s/articleView?id=sf.remoteaccess_oauth_web_server_flow.htm',
    params: [
      {
        name: 'login',
        description: 'login for production, test for sandboxes',
        pattern: 'login|test',
        default: 'login',
      },
    ],
    authorization_endpoint: 'https://{login}.salesforce.com/services/oauth2/authorize',
    token_endpoint: 'https://{login}.salesforce.com/services/oauth2/token',
    revocation_endpoint: 'https://{login}.salesforce.com/services/oauth2/revoke',
    scopes_example: ['api', 'refresh_token'],
    token_response: { extra: { instance_url: 'instance_url', id: 'id' } },
    api_base_url: 'https://{instance_url}/services/data',
    connection_values: [
      {
        name: 'instance_url',
        kind: 'origin',
        description: "the org's instance, an https origin under salesforce.com",
        pattern: '([a-z0-9-]+\\.)+salesforce\\.com',
      },
    ],
    refresh: 'stable',
    notes: [
      "The API lives at the connection's own `instance_url` (from the token answer, kept in its metadata): the proxy " +
        'forwards to `<instance_url>/services/data/<rest>`, so a path begins with the API version ' +
        '(`v62.0/query?q=…`).',
      'The token answer has no `expires_in`: the session lasts as the org configures it.',
      '`refresh_token` must be among the scopes for a refresh token to be issued.',
    ],
  },
  {
    id: 'hubspot',
    label: 'HubSpot',
    docs_url: 'https://developers.hubspot.com/docs/api-reference/auth-oauth-v3/guide',
    authorization_endpoint: 'https://app.hubspot.com/oauth/authorize',
    token_endpoint: 'https://api.hubapi.com/oauth/v3/token',
    scopes_example: ['oauth', 'crm.objects.contacts.read'],
    api_base_url: 'https://api.hubapi.com',
    refresh: 'stable',
    notes: [
      'Access tokens last 30 minutes; the refresh token does not change.',
      'Tokens come from `/oauth/v3/token`; `/oauth/v1/token` is the legacy endpoint.',
    ],
  },
  {
    id: 'shopify',
    label: 'Shopify',
    docs_url:
      'https://shopify.dev/docs/apps/build/authentication-authorization/access-tokens/offline-access-tokens',
    params: [
      {
        name: 'shop',
        description: 'the store: <shop>.myshopify.com',
        pattern: '[a-z0-9][a-z0-9-]{0,62}',
      },
    ],
    authorization_endpoint: 'https://{shop}.myshopify.com/admin/oauth/authorize',
    token_endpoint: 'https://{shop}.myshopify.com/admin/oauth/access_token',
    scopes_example: ['read_products', 'read_orders'],
    scope_separator: ',',
    token_params: { expiring: '1' },
    redirect_params: ['shop'],
    api_base_url: 'https://{shop}.myshopify.com/admin/api',
    refresh: 'rotating',
    notes: [
      'Scopes are comma-separated.',
      'Token requests carry `expiring=1`: the offline access token then lasts an hour and comes with a refresh token ' +
        '(90 days) that each refresh replaces. Shopify refuses non-expiring tokens to public apps created since ' +
        'April 2026; a new expiring token revokes the earlier ones for the shop.',
      'The redirect back also carries `hmac`, `host` and `timestamp`; Keyway relies on its single-use `state`, and ' +
        'keeps `shop`.',
    ],
  },
  {
    id: 'stripe',
    label: 'Stripe Connect',
    docs_url: 'https://docs.stripe.com/connect/oauth-reference',
    authorization_endpoint: 'https://connect.stripe.com/oauth/authorize',
    token_endpoint: 'https://connect.stripe.com/oauth/token',
    scopes_example: ['read_write'],
    token_response: { extra: { stripe_user_id: 'stripe_user_id' } },
    api_base_url: 'https://api.stripe.com/v1',
    refresh: 'stable',
    notes: [
      "The client secret is the platform's secret API key. The connected account's id is kept as `stripe_user_id`.",
    ],
  },
  {
    id: 'quickbooks',
    label: 'QuickBooks Online (Intuit)',
    docs_url:
      'https://developer.intuit.com/app/developer/qbo/docs/develop/authentication-and-authorization/oauth-2.0',
    issuer: 'https://oauth.platform.intuit.com/op/v1',
    params: [
      {
        name: 'api_host',
        description: 'quickbooks for production companies, sandbox-quickbooks for sandbox ones',
        pattern: 'quickbooks|sandbox-quickbooks',
        default: 'quickbooks',
      },
    ],
    authorization_endpoint: 'https://appcenter.intuit.com/connect/oauth2',
    token_endpoint: 'https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer',
    revocation_endpoint: 'https://developer.api.intuit.com/v2/oauth2/tokens/revoke',
    scopes_example: ['com.intuit.quickbooks.accounting'],
    token_endpoint_auth_method: 'client_secret_basic',
    redirect_params: ['realmId'],
    api_base_url: 'https://{api_host}.api.intuit.com/v3/company/{realmId}',
    connection_values: [
      {
        name: 'realmId',
        description: 'the company id, digits, from the redirect back',
        pattern: '[0-9]{1,32}',
      },
    ],
    refresh: 'rotating',
    notes: [
      "The company id comes as `realmId` on the redirect back and is kept in the connection's metadata; the proxy " +
        "forwards to that company's API (`/v3/company/<realmId>/<rest>`).",
      'Always use the latest refresh token: Intuit rotates them.',
    ],
  },
  {
    id: 'spotify',
    label: 'Spotify',
    docs_url: 'https://developer.spotify.com/documentation/web-api/tutorials/code-flow',
    authorization_endpoint: 'https://accounts.spotify.com/authorize',
    token_endpoint: 'https://accounts.spotify.com/api/token',
    scopes_example: ['user-read-email', 'playlist-read-private'],
    token_endpoint_auth_method: 'client_secret_basic',
    api_base_url: 'https://api.spotify.com/v1',
    refresh: 'rotating',
    notes: ['A refresh may answer a new refresh token; when it does not, the old one stays valid.'],
  },
  {
    id: 'x',
    label: 'X (Twitter)',
    docs_url:
      'https://docs.x.com/resources/fundamentals/authentication/oauth-2-0/authorization-code',
    authorization_endpoint: 'https://x.com/i/oauth2/authorize',
    token_endpoint: 'https://api.x.com/2/oauth2/token',
    revocation_endpoint: 'https://api.x.com/2/oauth2/revoke',
    scopes_example: ['tweet.read', 'users.read'],
    scopes_always: ['offline.access'],
    token_endpoint_auth_method: 'client_secret_basic',
    api_base_url: 'https://api.x.com/2',
    refresh: 'rotating',
    notes: ['PKCE is required. `offline.access` is always asked for: without it no refresh token.'],
  },
];
