import { json } from './http.js';
import type { WorldState } from './state.js';

/**
 * The world's MCP resource server: the 401 challenge (RFC 9728 §5.1), its protected-resource
 * metadata (RFC 9728 §3), and a Streamable HTTP endpoint with one tool that may need a
 * scope (403 `insufficient_scope`, RFC 6750 §3.1).
 */
export function createResourceServer(
  world: WorldState,
  isValidAccessToken: (token: string) => boolean,
) {
  const { resourceUrl, issuerString, stats, accessTokens, prmUrl, challengeNamesMetadata } = world;

  function challenge(extra: string): Response {
    const parts = ['Bearer realm="mcp"'];
    if (challengeNamesMetadata()) parts.push(`resource_metadata="${prmUrl()}"`);
    if (world.options.challengeScope !== undefined)
      parts.push(`scope="${world.options.challengeScope}"`);
    if (extra) parts.push(extra);
    return json(401, { error: 'unauthorized' }, { 'www-authenticate': parts.join(', ') });
  }

  function resourceMetadata(): Response {
    return json(200, {
      resource: world.options.metadataResource ?? resourceUrl.href,
      authorization_servers: [
        issuerString,
        ...(world.options.extraAuthorizationServer ? [world.options.extraAuthorizationServer] : []),
      ],
      bearer_methods_supported: ['header'],
      ...(world.options.resourceScopesSupported
        ? { scopes_supported: world.options.resourceScopesSupported }
        : {}),
    });
  }

  async function mcp(request: Request): Promise<Response> {
    const header = request.headers.get('authorization');
    if (header === null) {
      stats.probes++;
      return challenge('');
    }
    stats.mcpCalls++;
    const presented = header.replace(/^bearer\s+/i, '');
    if (!isValidAccessToken(presented)) return challenge('error="invalid_token"');
    const message = (await request.json().catch(() => null)) as {
      id?: unknown;
      method?: string;
      params?: { arguments?: unknown };
    } | null;
    // A notification (no id) gets 202 and no body (Streamable HTTP).
    if (message !== null && message.id === undefined) return new Response(null, { status: 202 });
    const required = world.options.toolScope;
    if (message?.method === 'tools/call' && required !== undefined) {
      const granted = (accessTokens.get(presented)?.scope ?? '').split(' ').filter(Boolean);
      if (!granted.includes(required)) {
        return json(
          403,
          { error: 'insufficient_scope' },
          {
            'www-authenticate':
              `Bearer error="insufficient_scope", scope="${[...granted, required].join(' ')}", ` +
              `resource_metadata="${prmUrl()}"`,
          },
        );
      }
    }
    const result =
      message?.method === 'initialize'
        ? {
            protocolVersion: '2025-06-18',
            capabilities: { tools: {} },
            serverInfo: { name: 'keyway-test-world', version: '1' },
          }
        : message?.method === 'tools/list'
          ? {
              tools: [
                {
                  name: 'echo',
                  description: 'Echoes its arguments',
                  inputSchema: { type: 'object' },
                },
              ],
            }
          : message?.method === 'tools/call'
            ? {
                content: [
                  { type: 'text', text: JSON.stringify(message.params?.arguments ?? null) },
                ],
              }
            : null;
    if (result === null)
      return json(200, {
        jsonrpc: '2.0',
        id: message?.id ?? null,
        error: { code: -32601, message: 'Method not found' },
      });
    return json(200, { jsonrpc: '2.0', id: message?.id ?? null, result });
  }

  return { resourceMetadata, mcp };
}
