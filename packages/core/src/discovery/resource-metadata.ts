import * as oauth from 'oauth4webapi';
import type { OutboundFetch } from '../outbound/fetch.js';
import { type DiscoveryStep, failureNote, quoted } from './trace.js';

/*
 * Steps 2 and 3 of docs/api.md §6: the protected-resource metadata (RFC 9728 §3) and the check
 * that its `resource` names the resource URL.
 */

/**
 * Whether protected-resource metadata's `resource` names the resource URL: the same origin,
 * and a path equal to, or a segment-wise prefix of, the resource URL's path (one trailing
 * `/` ignored). docs/api.md §6 step 3.
 */
export function resourceMatches(metadataResource: string, resourceUrl: URL): boolean {
  let declared: URL;
  try {
    declared = new URL(metadataResource);
  } catch {
    return false;
  }
  if (declared.origin !== resourceUrl.origin || declared.search !== '' || declared.hash !== '')
    return false;
  const trim = (path: string) => (path.endsWith('/') ? path.slice(0, -1) : path);
  const prefix = trim(declared.pathname);
  const path = trim(resourceUrl.pathname);
  return path === prefix || path.startsWith(`${prefix}/`);
}

/** The RFC 9728 well-known URLs of a resource: path-inserted (when it has a path), then root. */
export function resourceMetadataUrls(resourceUrl: URL): string[] {
  const path = resourceUrl.pathname.replace(/\/$/, '');
  const root = `${resourceUrl.origin}/.well-known/oauth-protected-resource`;
  return path === '' ? [root] : [`${root}${path}`, root];
}

/** Fetches one candidate URL of the protected-resource metadata. */
export function resourceMetadataRequest(outbound: OutboundFetch, url: string): Promise<Response> {
  return outbound(url, { headers: { accept: 'application/json' } });
}

/** What one candidate answered, as trace steps and an outcome. */
export type ResourceMetadataResult =
  /** Valid metadata whose `resource` names the resource URL. */
  | { outcome: 'found'; steps: DiscoveryStep[]; metadata: oauth.ResourceServer }
  /** Metadata for another resource: discovery stops (a definitive answer). */
  | { outcome: 'mismatch'; steps: DiscoveryStep[] }
  /** Not there (`notFound`: HTTP 404) or not usable: try the next candidate. */
  | { outcome: 'next'; steps: DiscoveryStep[]; notFound: boolean };

/**
 * Reads a candidate's answer. Step 3 comes before oauth4webapi's processing, which compares
 * `resource` for equality with what it is given: docs/api.md §6 item 3 also allows a segment-wise prefix.
 */
export async function processResourceMetadataResponse(
  url: string,
  resourceUrl: URL,
  response: Response,
): Promise<ResourceMetadataResult> {
  if (response.status !== 200) {
    await response.body?.cancel().catch(() => {});
    const note = `HTTP ${response.status}`;
    return {
      outcome: 'next',
      steps: [{ step: 'resource_metadata', url, status: response.status, ok: false, note }],
      notFound: response.status === 404,
    };
  }
  try {
    const body: unknown = await response.clone().json();
    const declared =
      typeof body === 'object' && body !== null && 'resource' in body ? body.resource : undefined;
    if (typeof declared !== 'string' || !resourceMatches(declared, resourceUrl)) {
      return {
        outcome: 'mismatch',
        steps: [
          { step: 'resource_metadata', url, status: 200, ok: true, note: 'fetched' },
          {
            step: 'resource_match',
            url,
            status: null,
            ok: false,
            note: `metadata resource ${quoted(declared ?? '')} does not match ${resourceUrl.href}`,
          },
        ],
      };
    }
    const metadata = await oauth.processResourceDiscoveryResponse(new URL(declared), response);
    return {
      outcome: 'found',
      metadata,
      steps: [
        { step: 'resource_metadata', url, status: 200, ok: true, note: 'fetched and valid' },
        {
          step: 'resource_match',
          url,
          status: null,
          ok: true,
          note: `resource ${metadata.resource}`,
        },
      ],
    };
  } catch (error) {
    return {
      outcome: 'next',
      steps: [
        { step: 'resource_metadata', url, status: null, ok: false, note: failureNote(error) },
      ],
      notFound: false,
    };
  }
}
