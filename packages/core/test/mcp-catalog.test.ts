import { describe, expect, it } from 'vitest';
import {
  BUILT_IN_MCP_PROFILES,
  BUILT_IN_PROFILES,
  mcpCatalog,
  mcpProfileFor,
} from '../src/catalog/index.js';

describe('the mcp profiles of the catalog', () => {
  it('all parse, with ids of their own (none an oauth2 id) and their facts dated', () => {
    const catalog = mcpCatalog();
    expect([...catalog.keys()]).toEqual(BUILT_IN_MCP_PROFILES.map((profile) => profile.id));
    const oauth2 = new Set(BUILT_IN_PROFILES.map((profile) => profile.id));
    for (const profile of catalog.values()) {
      expect(oauth2.has(profile.id)).toBe(false);
      expect(profile.id.endsWith('-mcp')).toBe(true);
      expect(profile.checked).toBe('2026-11-28');
      expect(new URL(profile.docs_url).protocol).toBe('https:');
      expect(profile.notes.length).toBeGreaterThan(0);
    }
    // The servers without dynamic registration the issue names, each with custom credentials.
    expect(
      [
        'github-mcp',
        'hubspot-mcp',
        'asana-mcp',
        'atlassian-mcp',
        'slack-mcp',
        'google-bigquery-mcp',
      ].map((id) => catalog.get(id)?.credentials),
    ).toEqual(['custom', 'custom', 'custom', 'custom', 'custom', 'custom']);
    expect(catalog.get('hubspot-mcp')?.token_endpoint_auth_method).toBe('client_secret_post');
  });

  it('finds the profile of an endpoint with or without its trailing slash, and none for others', () => {
    expect(mcpProfileFor('https://api.githubcopilot.com/mcp')?.id).toBe('github-mcp');
    expect(mcpProfileFor('https://api.githubcopilot.com/mcp/')?.id).toBe('github-mcp');
    expect(mcpProfileFor('https://mcp.hubspot.com/')?.id).toBe('hubspot-mcp');
    expect(mcpProfileFor('https://mcp.asana.com/v2/mcp')?.id).toBe('asana-mcp');
    expect(mcpProfileFor('https://mcp.asana.com/sse')).toBeNull();
    expect(mcpProfileFor('http://mcp.hubspot.com/')).toBeNull();
    expect(mcpProfileFor('not a url')).toBeNull();
  });
});
