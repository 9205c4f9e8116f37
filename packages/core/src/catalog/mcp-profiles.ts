import { z } from 'zod';

/*
 * Profiles of the `mcp` template (docs/api.md §15, docs/servers.md): hosted MCP servers
 * people connect to whose authorization bends the defaults — no dynamic registration, a
 * client authentication of their own, a refresh behaviour to know. Discovery still runs
 * for each (the server's metadata is the truth); a profile gives the endpoint, the
 * credentials that work, and what an operator should know, each fact from its `docs_url`
 * as read on the day `checked` says.
 */

const https = z.string().regex(/^https:\/\/[^\s?#@]+$/, 'an https URL without query or fragment');

export const McpProfileSchema = z.strictObject({
  id: z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'lower case letters, digits and `-`'),
  label: z.string().min(1).max(200),
  /** The provider's own documentation of the facts below. */
  docs_url: https,
  /** The day the facts were read at `docs_url` (YYYY-MM-DD). */
  checked: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a date, YYYY-MM-DD'),
  /** The MCP endpoint. */
  resource_url: https,
  /**
   * The credentials mode that works: `register` (the server registers Keyway itself) or
   * `custom` (an application registered by hand, its client id and secret given).
   */
  credentials: z.enum(['register', 'custom']),
  /** How a `custom` client authenticates at the token endpoint, when the server says. */
  token_endpoint_auth_method: z.enum(['client_secret_basic', 'client_secret_post']).optional(),
  /** Added to the authorization URL (Google's `access_type=offline`). */
  authorization_params: z.record(z.string(), z.string()).default({}),
  scopes_example: z.array(z.string().min(1)).default([]),
  /** `rotating`: a new refresh token each refresh; `unknown`: the docs do not say. */
  refresh: z.enum(['rotating', 'stable', 'none', 'unknown']),
  /** A refresh token's documented lifetime, days (Miro's 60). */
  refresh_token_lifetime_days: z.number().int().positive().optional(),
  /** What an operator should know, each fact from `docs_url`. */
  notes: z.array(z.string().min(1)).min(1),
});

/** An `mcp` profile, defaults filled. */
export type McpProfile = z.output<typeof McpProfileSchema>;
export type McpProfileInput = z.input<typeof McpProfileSchema>;

const CHECKED = '2026-11-28';

/** The built-in `mcp` profiles, as written. */
export const BUILT_IN_MCP_PROFILES: McpProfileInput[] = [
  {
    id: 'asana-mcp',
    label: 'Asana (MCP, V2)',
    docs_url: 'https://developers.asana.com/docs/integrating-with-asanas-mcp-server',
    checked: CHECKED,
    resource_url: 'https://mcp.asana.com/v2/mcp',
    credentials: 'custom',
    refresh: 'stable',
    notes: [
      'Create an "MCP app" in the Asana developer console and add the redirect URL; its client id and secret ' +
        'are the credentials. The V2 server registers no clients itself.',
      'Tokens of an MCP app work with the MCP server only, not with the REST API.',
      'The V1 beta endpoint https://mcp.asana.com/sse was shut down on 2026-05-11.',
    ],
  },
  {
    id: 'atlassian-mcp',
    label: 'Atlassian Rovo (MCP)',
    docs_url: 'https://developer.atlassian.com/cloud/rovo-mcp/guides/configuring-oauth-2-1/',
    checked: CHECKED,
    resource_url: 'https://mcp.atlassian.com/v1/mcp',
    credentials: 'custom',
    refresh: 'rotating',
    notes: [
      "An organization admin allows the client's domain (Atlassian Administration, Rovo MCP server " +
        "domains): add Keyway's public origin there.",
      'Refresh tokens rotate on every use and a spent one is refused ("Unknown or invalid refresh token"): ' +
        'Keyway refreshes once per expiry across instances.',
      'Tokens are consented for one site (cloud id); a request for another site is refused.',
    ],
  },
  {
    id: 'figma-mcp',
    label: 'Figma (MCP)',
    docs_url: 'https://developers.figma.com/docs/figma-mcp-server/remote-server-installation/',
    checked: CHECKED,
    resource_url: 'https://mcp.figma.com/mcp',
    credentials: 'register',
    scopes_example: ['mcp:connect'],
    refresh: 'unknown',
    notes: [
      'Registration is open only to the clients of Figma’s MCP catalog (https://www.figma.com/mcp-catalog/); ' +
        'others are answered 403. A client Figma approved registers under its approved name: set ' +
        'credentials.client_metadata.client_name.',
    ],
  },
  {
    id: 'github-mcp',
    label: 'GitHub (remote MCP server)',
    docs_url: 'https://github.com/github/github-mcp-server/blob/main/docs/host-integration.md',
    checked: CHECKED,
    resource_url: 'https://api.githubcopilot.com/mcp/',
    credentials: 'custom',
    scopes_example: ['repo', 'read:org'],
    refresh: 'stable',
    notes: [
      'No dynamic registration: create a GitHub OAuth app or GitHub App with Keyway’s callback as its ' +
        'callback URL and give its client id and secret.',
      'An OAuth app’s tokens do not expire; a GitHub App’s user tokens expire and come with a refresh token.',
      'An organization may restrict OAuth app access: its owners approve the app before its data is reachable.',
    ],
  },
  {
    id: 'google-bigquery-mcp',
    label: 'Google BigQuery (remote MCP)',
    docs_url: 'https://docs.cloud.google.com/bigquery/docs/use-bigquery-mcp',
    checked: CHECKED,
    resource_url: 'https://bigquery.googleapis.com/mcp',
    credentials: 'custom',
    authorization_params: { access_type: 'offline', prompt: 'consent' },
    scopes_example: ['https://www.googleapis.com/auth/bigquery'],
    refresh: 'stable',
    notes: [
      'Create an OAuth client (web application) in the Google Cloud console with Keyway’s callback as an ' +
        'authorized redirect URI.',
      'The user needs the IAM role roles/mcp.toolUser and BigQuery roles on the project; the MCP API is ' +
        'enabled per project.',
      'Google issues a refresh token only with access_type=offline, and again only with prompt=consent: both ' +
        'are sent.',
    ],
  },
  {
    id: 'hubspot-mcp',
    label: 'HubSpot (MCP)',
    docs_url:
      'https://developers.hubspot.com/docs/apps/developer-platform/build-apps/integrate-with-the-remote-hubspot-mcp-server',
    checked: CHECKED,
    resource_url: 'https://mcp.hubspot.com',
    credentials: 'custom',
    token_endpoint_auth_method: 'client_secret_post',
    refresh: 'stable',
    notes: [
      'Create an MCP auth app in the HubSpot account (Development) and give its client id and secret; PKCE ' +
        'is required.',
      'The token endpoint takes the client secret in the request body (client_secret_post).',
      'The server wants a user-level token: authorize as a user, not with a private app.',
    ],
  },
  {
    id: 'linear-mcp',
    label: 'Linear (MCP)',
    docs_url: 'https://linear.app/docs/oauth/authentication',
    checked: CHECKED,
    resource_url: 'https://mcp.linear.app/mcp',
    credentials: 'register',
    refresh: 'rotating',
    notes: [
      'Refresh tokens rotate; a spent one is refused with "Grant not found" once a short grace window ' +
        'has passed: Keyway refreshes once per expiry across instances.',
    ],
  },
  {
    id: 'miro-mcp',
    label: 'Miro (MCP)',
    docs_url: 'https://developers.miro.com/reference/get-new-access-token-using-refresh-token',
    checked: CHECKED,
    resource_url: 'https://mcp.miro.com/',
    credentials: 'register',
    refresh: 'rotating',
    refresh_token_lifetime_days: 60,
    notes: [
      'Refresh tokens rotate and end 60 days after their issue: a connection unused that long is refused ' +
        'at its next refresh. Refresh ahead keeps them rotating; connection.expiring says when one nears its end.',
      'The endpoint and its dynamic registration are from Miro’s MCP setup guide; the token lifetimes from ' +
        'its REST API reference at docs_url.',
    ],
  },
  {
    id: 'notion-mcp',
    label: 'Notion (MCP)',
    docs_url:
      'https://github.com/makenotion/notion-cookbook/blob/main/docs/mcp-client-integration.md',
    checked: CHECKED,
    resource_url: 'https://mcp.notion.com/mcp',
    credentials: 'register',
    refresh: 'rotating',
    notes: [
      'A spent refresh token presented again revokes the whole grant ("OAuth grant revoked"): the user ' +
        'authorizes again. Keyway never sends one twice.',
    ],
  },
  {
    id: 'sentry-mcp',
    label: 'Sentry (MCP)',
    docs_url: 'https://docs.sentry.io/product/sentry-mcp/',
    checked: CHECKED,
    resource_url: 'https://mcp.sentry.dev/mcp',
    credentials: 'register',
    refresh: 'unknown',
    notes: [
      'The authorization server takes the resource as its origin or its /mcp path; Keyway sends the one the ' +
        'protected-resource metadata publishes, unchanged.',
    ],
  },
  {
    id: 'slack-mcp',
    label: 'Slack (MCP)',
    docs_url: 'https://api.slack.com/authentication/oauth-v2',
    checked: CHECKED,
    resource_url: 'https://mcp.slack.com/mcp',
    credentials: 'custom',
    scopes_example: ['search:read.public', 'channels:history', 'chat:write'],
    refresh: 'rotating',
    notes: [
      'No dynamic registration: a Slack app with Model Context Protocol turned on (Agents & AI Apps), ' +
        'published in the Marketplace or internal to the organization; its client id and secret.',
      'The tools act with a user token: request user scopes. With token rotation turned on, tokens expire ' +
        'and come with a refresh token.',
      'The MCP setup facts are from integration guides of MCP hosts (MCP Manager, Nango) read on the day ' +
        'checked; the OAuth flow is Slack’s OAuth v2 at docs_url.',
    ],
  },
];

let builtIn: ReadonlyMap<string, McpProfile> | undefined;

/**
 * The built-in `mcp` profiles by id, checked once.
 *
 * @throws {TypeError} naming the profile and its field, for a profile that breaks a rule.
 */
export function mcpCatalog(): ReadonlyMap<string, McpProfile> {
  builtIn ??= new Map(
    BUILT_IN_MCP_PROFILES.map((input) => {
      const parsed = McpProfileSchema.safeParse(input);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new TypeError(
          `built-in mcp profile ${JSON.stringify(input.id)}: "${issue?.path.join('.')}": ${issue?.message}`,
        );
      }
      return [parsed.data.id, parsed.data];
    }),
  );
  return builtIn;
}

/**
 * The profile whose MCP endpoint a resource URL is: the same origin, and the same path but
 * for one trailing `/`.
 */
export function mcpProfileFor(resourceUrl: string): McpProfile | null {
  let url: URL;
  try {
    url = new URL(resourceUrl);
  } catch {
    return null;
  }
  const path = (text: string) => text.replace(/\/$/, '');
  for (const profile of mcpCatalog().values()) {
    const known = new URL(profile.resource_url);
    if (known.origin === url.origin && path(known.pathname) === path(url.pathname)) return profile;
  }
  return null;
}
