import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/server';
import { parseResourcePath } from '../auth/resource-path.js';
import { isKeywayError } from '../contract/errors.js';
import { toBase64Url } from '../platform/bytes.js';
import type { PortalSessionLike as PortalSession } from './caller.js';
import type { PortalHub } from './hub.js';

/*
 * The portal's own tools (docs/api.md §18): `keyway__connections` says what is connected
 * under the portal, `keyway__connect` starts a connection and answers its consent URL.
 */

export const BUILT_IN_TOOLS: Tool[] = [
  {
    name: 'keyway__connections',
    title: 'Connections',
    description:
      'The MCP servers connected at this portal: each connection’s alias (its tools are named ' +
      '<alias>__<tool>), provider and status (active, pending, error).',
    inputSchema: { type: 'object', properties: {} },
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'keyway__connect',
    title: 'Connect a server',
    description:
      'Starts connecting a provider (an MCP server registered with Keyway) under this portal and answers ' +
      'the URL where the user gives consent.',
    inputSchema: {
      type: 'object',
      properties: {
        provider_id: { type: 'string', description: 'The provider to connect, e.g. acme/linear.' },
        name: {
          type: 'string',
          description:
            'The connection’s name under the portal (default: the provider’s last segment).',
        },
      },
      required: ['provider_id'],
    },
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  },
];

function text(value: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text: value }], ...(isError ? { isError: true } : {}) };
}

/** Answers a call of a built-in tool. */
export async function builtInCall(
  hub: PortalHub,
  session: PortalSession,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  if (name === 'keyway__connections') {
    const { connections } = await hub.connections(session);
    const listed = connections.map(({ record, alias }) => ({
      alias,
      connection_id: record.id,
      provider_id: record.providerId,
      status: record.status,
    }));
    return {
      content: [{ type: 'text', text: JSON.stringify(listed) }],
      structuredContent: { connections: listed },
    };
  }
  const { provider_id: providerId, name: wanted } = args;
  if (typeof providerId !== 'string' || (wanted !== undefined && typeof wanted !== 'string')) {
    return text('"provider_id" must be a string, and "name" a string when given', true);
  }
  const { prefix } = session.caller;
  try {
    const provider = parseResourcePath(providerId, 'provider_id');
    const segment = wanted ?? provider.slice(provider.lastIndexOf('/') + 1);
    const connectionId = parseResourcePath(`${prefix}/${segment}`, 'name');
    const started = await hub.authorize(session.caller.principal, provider, {
      connection_id: connectionId,
    });
    const message = `Open the link to connect ${provider} as ${connectionId}.`;
    // As a URL elicitation where the client takes one (MCP 2025-11-25), else as text.
    if (session.server.getClientCapabilities()?.elicitation?.url !== undefined) {
      throw new UrlElicitationRequiredError(
        [
          {
            mode: 'url',
            elicitationId: toBase64Url(hub.randomBytes(16)),
            url: started.authorization_url,
            message,
          },
        ],
        message,
      );
    }
    return {
      content: [{ type: 'text', text: `${message}\n${started.authorization_url}` }],
      structuredContent: {
        connection_id: connectionId,
        authorization_url: started.authorization_url,
        expires_at: started.expires_at,
      },
    };
  } catch (error) {
    if (isKeywayError(error)) return text(`${error.code}: ${error.message}`, true);
    throw error;
  }
}
