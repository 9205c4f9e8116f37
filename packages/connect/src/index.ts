/*
 * @keyway/connect: opens Keyway's hosted connect page (docs/api.md §19) from a web app and
 * resolves with how it went. The page tells the window that opened it, at the app's origin
 * only; this module listens to that page alone (its origin and its window), and to nothing
 * else. No dependency, no global state beyond the one window it opens.
 */

/** How a connect page ended. */
export type ConnectOutcome =
  | {
      /** The user connected an account: the connection is active. */
      outcome: 'connected';
      provider_id: string;
      connection_id: string;
    }
  | {
      /** The user said no at the provider's consent page. */
      outcome: 'declined';
      provider_id: string;
      connection_id: string | null;
      /** The provider's error code (`access_denied`). */
      error: string | null;
    }
  | {
      /** The provider, or Keyway, refused: `error` says why. */
      outcome: 'error';
      provider_id: string | null;
      connection_id: string | null;
      error: string;
    }
  | {
      /** The user disconnected an account (a session with `allow_disconnect`). */
      outcome: 'disconnected';
      provider_id: string;
      connection_id: string;
    }
  | {
      /** The window was closed before anything was connected. */
      outcome: 'closed';
    };

/** What {@link openConnect} takes. */
export interface OpenConnectOptions {
  /** The session's `url`, as `POST /api/admin/connect-sessions` answered it. */
  url: string;
  /** The popup's size; default 480 × 720. */
  width?: number;
  height?: number;
  /** Ends the wait: the window is closed and the promise resolves with `closed`. */
  signal?: AbortSignal;
  /**
   * Keeps the page open after a `disconnected` outcome (default true): the user may go on
   * connecting. Every other outcome resolves at once.
   */
  continueAfterDisconnect?: boolean;
  /** The window to open from (default `window`): for tests and frames. */
  window?: Window;
}

/** The message the connect page posts to its opener. */
interface PageMessage {
  type: 'keyway-connect';
  outcome: 'connected' | 'declined' | 'error' | 'disconnected';
  provider_id: string | null;
  connection_id: string | null;
  error: string | null;
}

function isPageMessage(data: unknown): data is PageMessage {
  if (typeof data !== 'object' || data === null) return false;
  const message = data as Record<string, unknown>;
  return (
    message.type === 'keyway-connect' &&
    ['connected', 'declined', 'error', 'disconnected'].includes(String(message.outcome))
  );
}

function outcomeOf(message: PageMessage): ConnectOutcome {
  const provider = message.provider_id ?? '';
  const connection = message.connection_id ?? '';
  switch (message.outcome) {
    case 'connected':
      return { outcome: 'connected', provider_id: provider, connection_id: connection };
    case 'disconnected':
      return { outcome: 'disconnected', provider_id: provider, connection_id: connection };
    case 'declined':
      return {
        outcome: 'declined',
        provider_id: provider,
        connection_id: message.connection_id,
        error: message.error,
      };
    default:
      return {
        outcome: 'error',
        provider_id: message.provider_id,
        connection_id: message.connection_id,
        error: message.error ?? 'error',
      };
  }
}

/**
 * Opens the connect page in a popup and resolves with how it ended: `connected`, `declined`,
 * `error`, `closed` (the user closed it first, or `signal` aborted), or `disconnected`
 * (with `continueAfterDisconnect: false`). Call it from a click: browsers block a popup
 * opened otherwise.
 *
 * @example
 * const { url } = await (await fetch('/my-backend/connect-session', { method: 'POST' })).json();
 * const result = await openConnect({ url });
 * if (result.outcome === 'connected') showConnected(result.connection_id);
 *
 * @throws {TypeError} for a `url` that is not an http(s) URL with a fragment, or when the
 *   browser blocked the popup.
 * @see [docs/api.md §19](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#19-connect-sessions-and-the-hosted-connect-page)
 */
export function openConnect(options: OpenConnectOptions): Promise<ConnectOutcome> {
  const host = options.window ?? window;
  let page: URL;
  try {
    page = new URL(options.url);
  } catch {
    throw new TypeError('openConnect: "url" must be the connect session\'s url');
  }
  if (!/^https?:$/.test(page.protocol) || page.hash.length < 2) {
    throw new TypeError(
      'openConnect: "url" must be the connect session\'s url ({base}/connect#<secret>)',
    );
  }
  const width = options.width ?? 480;
  const height = options.height ?? 720;
  const left = Math.max(0, Math.round(host.screenX + (host.outerWidth - width) / 2));
  const top = Math.max(0, Math.round(host.screenY + (host.outerHeight - height) / 2));
  const popup = host.open(
    page.href,
    'keyway-connect',
    `popup,width=${width},height=${height},left=${left},top=${top}`,
  );
  if (popup === null) {
    throw new TypeError(
      'openConnect: the browser blocked the connect window; call openConnect from a click',
    );
  }
  return new Promise<ConnectOutcome>((resolve) => {
    let done = false;
    const finish = (outcome: ConnectOutcome, close: boolean) => {
      if (done) return;
      done = true;
      host.removeEventListener('message', onMessage);
      host.clearInterval(watch);
      options.signal?.removeEventListener('abort', onAbort);
      if (close && !popup.closed) popup.close();
      resolve(outcome);
    };
    const onMessage = (event: MessageEvent) => {
      // The connect page only: its origin, and the window this call opened.
      if (event.origin !== page.origin || event.source !== popup) return;
      if (!isPageMessage(event.data)) return;
      const outcome = outcomeOf(event.data);
      if (outcome.outcome === 'disconnected' && options.continueAfterDisconnect !== false) return;
      finish(outcome, true);
    };
    const onAbort = () => finish({ outcome: 'closed' }, true);
    host.addEventListener('message', onMessage);
    const watch = host.setInterval(() => {
      if (popup.closed) finish({ outcome: 'closed' }, false);
    }, 400);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort);
  });
}
