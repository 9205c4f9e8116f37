import * as oauth from 'oauth4webapi';
import type { OutboundFetch } from '../outbound/fetch.js';
import { type DiscoveryStep, failureNote, quoted } from './trace.js';

/*
 * Step 4 of docs/api.md §6: the authorization server's metadata (RFC 8414 §3, OpenID Connect
 * Discovery), its `issuer` exactly the server's URL (RFC 8414 §3.3).
 */

/**
 * The authorization-server metadata URLs to try, in the MCP specification's order: for an
 * issuer with a path, RFC 8414 path-inserted, OpenID path-inserted, OpenID appended; for
 * one without, RFC 8414 and OpenID at the root.
 */
export function authorizationServerMetadataUrls(issuer: URL): string[] {
  const path = issuer.pathname.replace(/\/$/, '');
  const origin = issuer.origin;
  if (path === '') {
    return [
      `${origin}/.well-known/oauth-authorization-server`,
      `${origin}/.well-known/openid-configuration`,
    ];
  }
  return [
    `${origin}/.well-known/oauth-authorization-server${path}`,
    `${origin}/.well-known/openid-configuration${path}`,
    `${origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * Whether a metadata `issuer` is the authorization-server URL exactly (RFC 8414 §3.3; an
 * empty path with or without one `/`). For a 2025-03-26 server (`legacy`), which had no
 * issuer to compare with, any issuer on the server URL's own origin: servers of that time
 * publish one with a path (`…/oauth`) at their origin's metadata.
 */
export function issuerAccepted(published: unknown, serverUrl: string, legacy = false): boolean {
  if (typeof published !== 'string') return false;
  if (published === serverUrl) return true;
  if (!URL.canParse(published) || !URL.canParse(serverUrl)) return false;
  const url = new URL(serverUrl);
  if (legacy) return new URL(published).origin === url.origin;
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') return false;
  const bare = serverUrl.endsWith('/') ? serverUrl.slice(0, -1) : serverUrl;
  return published === bare || published === `${bare}/`;
}

/** The default endpoints of a 2025-03-26 server without metadata, at its origin. */
export function legacyDefaults(origin: string): oauth.AuthorizationServer {
  return {
    issuer: origin,
    authorization_endpoint: `${origin}/authorize`,
    token_endpoint: `${origin}/token`,
    registration_endpoint: `${origin}/register`,
    // That revision requires PKCE of every client; S256 is what Keyway sends.
    code_challenge_methods_supported: ['S256'],
  };
}

/** Fetches one candidate URL of the authorization server's metadata. */
export function serverMetadataRequest(outbound: OutboundFetch, url: string): Promise<Response> {
  return outbound(url, { headers: { accept: 'application/json' } });
}

/** What one candidate answered, as a trace step and an outcome. */
export type ServerMetadataResult =
  | { outcome: 'found'; step: DiscoveryStep; server: oauth.AuthorizationServer }
  /** A wrong issuer: an attack or a misconfiguration, never a reason to look elsewhere. */
  | { outcome: 'refused'; step: DiscoveryStep }
  | { outcome: 'next'; step: DiscoveryStep; notFound: boolean };

/** Reads a candidate's answer; the issuer is kept as published (`iss` is compared with it). */
export async function processServerMetadataResponse(
  url: string,
  serverUrl: string,
  legacy: boolean,
  response: Response,
): Promise<ServerMetadataResult> {
  const name = legacy ? 'legacy' : 'authorization_server_metadata';
  const { status } = response;
  if (status !== 200) {
    await response.body?.cancel().catch(() => {});
    const step = { step: name, url, status, ok: false, note: `HTTP ${status}` };
    return { outcome: 'next', step, notFound: status === 404 };
  }
  try {
    const body: unknown = await response.clone().json();
    const published =
      typeof body === 'object' && body !== null && 'issuer' in body ? body.issuer : undefined;
    if (typeof published !== 'string' || !issuerAccepted(published, serverUrl, legacy)) {
      const note =
        `the metadata's "issuer" is ${quoted(published)}, not ${quoted(serverUrl)} exactly: refused (RFC ` +
        `8414 §3.3)`;
      return { outcome: 'refused', step: { step: name, url, status, ok: false, note } };
    }
    const server = await oauth.processDiscoveryResponse(new URL(published), response);
    const step = { step: name, url, status, ok: true, note: `issuer ${server.issuer}` };
    return { outcome: 'found', step, server };
  } catch (error) {
    const step = { step: name, url, status, ok: false, note: failureNote(error) };
    return { outcome: 'next', step, notFound: false };
  }
}
