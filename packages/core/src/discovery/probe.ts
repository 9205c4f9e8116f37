import * as oauth from 'oauth4webapi';
import type { OutboundFetch } from '../outbound/fetch.js';
import { oauthFetch } from '../outbound/oauth-fetch.js';
import { type DiscoveryStep, failureNote } from './trace.js';

/*
 * Step 1 of docs/api.md §6: probe the resource as an MCP client would, without credentials, and
 * read the `WWW-Authenticate` challenge (RFC 9728 §5.1, RFC 6750 §3).
 */

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'keyway-discovery', version: '1' },
  },
});

/** What the probe got: an answer without a challenge, a Bearer challenge, or a failure. */
export type ProbeAnswer =
  | { kind: 'open'; status: number }
  | { kind: 'challenge'; status: number; parameters: oauth.WWWAuthenticateChallengeParameters }
  | { kind: 'failed'; error: unknown };

/**
 * Sends the probe: an MCP `initialize` POST without any credential. A session the server
 * opens is closed again (best effort). oauth4webapi's https check is relaxed: the outbound
 * guard decides (https, or plain http only for allowed hosts).
 */
export async function probeRequest(
  outbound: OutboundFetch,
  resourceUrl: URL,
): Promise<ProbeAnswer> {
  const stripped = (url: string, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    headers.delete('authorization');
    return outbound(url, { ...init, headers });
  };
  try {
    const response = await oauth.protectedResourceRequest(
      'probe',
      'POST',
      resourceUrl,
      new Headers({
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      }),
      INITIALIZE,
      { [oauth.customFetch]: oauthFetch(stripped), [oauth.allowInsecureRequests]: true },
    );
    const session = response.headers.get('mcp-session-id');
    if (session !== null) {
      await stripped(resourceUrl.href, {
        method: 'DELETE',
        headers: { 'mcp-session-id': session },
      }).catch(() => {});
    }
    await response.body?.cancel().catch(() => {});
    return { kind: 'open', status: response.status };
  } catch (error) {
    if (error instanceof oauth.WWWAuthenticateChallengeError) {
      const bearer = error.cause.find((challenge) => challenge.scheme === 'bearer');
      return { kind: 'challenge', status: error.status, parameters: bearer?.parameters ?? {} };
    }
    return { kind: 'failed', error };
  }
}

/** The probe as a trace step, with the metadata URL and scope its challenge named. */
export function processProbeAnswer(
  resourceUrl: URL,
  answer: ProbeAnswer,
): { step: DiscoveryStep; metadataUrl: string | null; challengeScope: string | null } {
  const url = resourceUrl.href;
  if (answer.kind === 'failed') {
    return {
      step: { step: 'probe', url, status: null, ok: false, note: failureNote(answer.error) },
      metadataUrl: null,
      challengeScope: null,
    };
  }
  if (answer.kind === 'open') {
    return {
      step: {
        step: 'probe',
        url,
        status: answer.status,
        ok: true,
        note: 'no challenge: the server let initialize through; trying well-known metadata',
      },
      metadataUrl: null,
      challengeScope: null,
    };
  }
  const metadataUrl = answer.parameters.resource_metadata ?? null;
  const challengeScope = answer.parameters.scope ?? null;
  return {
    step: {
      step: 'probe',
      url,
      status: answer.status,
      ok: true,
      note: metadataUrl
        ? `challenge names the resource metadata${challengeScope ? ` and scope "${challengeScope}"` : ''}`
        : 'challenge without resource_metadata; trying well-known metadata',
    },
    metadataUrl,
    challengeScope,
  };
}
