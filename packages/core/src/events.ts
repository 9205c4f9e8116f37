/**
 * What happened, as the `onEvent` hook receives it.
 *
 * @see API.md §11
 */
export type KeywayEventType =
  | 'token.created'
  | 'token.narrowed'
  | 'token.deleted'
  | 'provider.created'
  | 'provider.updated'
  | 'provider.deleted'
  | 'secret.written'
  | 'secret.deleted'
  | 'connection.created'
  | 'connection.authorization_started'
  | 'connection.authorized'
  | 'connection.authorization_failed'
  | 'connection.refreshed'
  | 'connection.refresh_failed'
  | 'connection.reauthorization_required'
  | 'connection.deleted';

/**
 * An event: what happened, when, who did it, and to which resource path (or token name).
 * Never a secret: no token, key, client secret, verifier or state.
 *
 * @see API.md §11
 */
export interface KeywayEvent {
  type: KeywayEventType;
  /** ISO 8601 UTC with milliseconds. */
  at: string;
  /** `root`, `token:<name>`, or `system` for what the broker did on its own (callback, refresh). */
  actor: string;
  /** The connection, provider or secret path, or the token name. */
  resource: string;
}

/** Emits an event; the time is added. */
export type EmitEvent = (event: Omit<KeywayEvent, 'at'>) => void;

/**
 * Wraps the `onEvent` hook so that a hook that throws, or whose promise rejects, never
 * breaks the request that caused the event; its errors go to `onError`.
 */
export function createEmitter(
  onEvent: ((event: KeywayEvent) => void | Promise<void>) | undefined,
  now: () => number,
  onError: (error: unknown) => void,
): EmitEvent {
  if (onEvent === undefined) return () => {};
  return (event) => {
    try {
      const result = onEvent({ ...event, at: new Date(now()).toISOString() });
      if (result instanceof Promise) result.catch(onError);
    } catch (error) {
      onError(error);
    }
  };
}
