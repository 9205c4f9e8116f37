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

const TOOLS_LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });

/**
 * What the probe got: an answer without a challenge, a Bearer challenge (to `initialize`,
 * or to `tools/list` from a server that lets `initialize` through), or a failure.
 */
export type ProbeAnswer =
  | { kind: 'open'; status: number }
  | {
      kind: 'challenge';
      status: number;
      parameters: oauth.WWWAuthenticateChallengeParameters;
      method?: 'tools/list';
    }
  | { kind: 'failed'; error: unknown };

/**
 * Sends the probe: an MCP `initialize` POST without any credential. A server that answers
 * it without a challenge (it lets `initialize` through, or speaks only the 2026-07-28 wire)
 * is asked `tools/list` too, the first call an
 * agent makes, for the challenge (and scope) a client would meet. A session the server
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
  const post = async (body: string, session: string | null) => {
    const headers = new Headers({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    });
    if (session !== null) {
      headers.set('mcp-session-id', session);
      headers.set('mcp-protocol-version', '2025-06-18');
    }
    try {
      const response = await oauth.protectedResourceRequest(
        'probe',
        'POST',
        resourceUrl,
        headers,
        body,
        {
          [oauth.customFetch]: oauthFetch(stripped),
          [oauth.allowInsecureRequests]: true,
        },
      );
      await response.body?.cancel().catch(() => {});
      return { response, answer: { kind: 'open', status: response.status } as ProbeAnswer };
    } catch (error) {
      if (error instanceof oauth.WWWAuthenticateChallengeError) {
        await error.response.body?.cancel().catch(() => {});
        const bearer = error.cause.find((challenge) => challenge.scheme === 'bearer');
        const parameters = bearer?.parameters ?? {};
        return {
          response: null,
          answer: { kind: 'challenge', status: error.status, parameters } as ProbeAnswer,
        };
      }
      return { response: null, answer: { kind: 'failed', error } as ProbeAnswer };
    }
  };
  const first = await post(INITIALIZE, null);
  // A failing server (5xx) is not asked again: its answer to anything would say the same.
  if (first.response === null || first.response.status >= 500) return first.answer;
  const session = first.response.ok ? first.response.headers.get('mcp-session-id') : null;
  const second = await post(TOOLS_LIST, session);
  if (session !== null) {
    await stripped(resourceUrl.href, {
      method: 'DELETE',
      headers: { 'mcp-session-id': session },
    }).catch(() => {});
  }
  return second.answer.kind === 'challenge'
    ? { ...second.answer, method: 'tools/list' }
    : first.answer;
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
      note: `${answer.method === undefined ? '' : 'initialize was let through; tools/list: '}${
        metadataUrl
          ? `challenge names the resource metadata${challengeScope ? ` and scope "${challengeScope}"` : ''}`
          : 'challenge without resource_metadata; trying well-known metadata'
      }`,
    },
    metadataUrl,
    challengeScope,
  };
}
