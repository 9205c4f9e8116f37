/*
 * Starting an authorization, and hearing how its consent ended. The consent window is opened
 * with `noopener`: the authorization server's pages get no handle on the inspector. The
 * callback page reports back over a BroadcastChannel, which only pages of this origin share.
 */
import { api, encodePath, type Json } from './api.js';
import { CALLBACK_CHANNEL } from './channel.js';

/** How an authorize call went: a consent window opened, or (no consent page) connected. */
export type Started =
  | { kind: 'consent'; scopes: string; url: string }
  | { kind: 'connected'; view: Json };

/** Authorizations waiting for their consent, by connection id. */
const waiting = new Set<string>();
const listeners = new Set<(connectionId: string, status: string) => void>();

// Only pages of this same origin can post to a BroadcastChannel of it: the callback page.
new BroadcastChannel(CALLBACK_CHANNEL).addEventListener('message', (event) => {
  const data = event.data as Json | null;
  if (data?.type !== 'keyway-callback' || typeof data.connection_id !== 'string') return;
  if (!waiting.delete(data.connection_id)) return;
  for (const listener of listeners) listener(data.connection_id, String(data.status));
});

/** Calls `listener` when a consent this page started ends; answers how to stop listening. */
export function onConsent(listener: (connectionId: string, status: string) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * `POST /api/oauth/authorize/<provider>`, then the consent in a new window. A provider
 * without a consent page (docs/api.md §14) answers the active connection instead.
 */
export async function startAuthorization(
  provider: string,
  connection: string,
  scopes: string[],
  subjectToken?: string,
): Promise<Started> {
  const answer = await api('POST', `/api/oauth/authorize/${encodePath(provider)}`, {
    connection_id: connection,
    ...(scopes.length > 0 ? { scopes } : {}),
    ...(subjectToken ? { subject_token: subjectToken } : {}),
  });
  if (typeof answer.authorization_url !== 'string') return { kind: 'connected', view: answer };
  const url = new URL(answer.authorization_url);
  waiting.add(connection);
  window.open(url.href, '_blank', 'noopener,popup,width=520,height=720');
  return { kind: 'consent', scopes: url.searchParams.get('scope') ?? '(none)', url: url.href };
}
