/*
 * The hosted connect page (docs/api.md §19). Its session secret arrives in the URL's
 * fragment (never sent to a server), is kept in this tab's sessionStorage only (the consent
 * may take the tab away and back) and removed from the address bar; every call sends it as
 * the Bearer credential of the page's three routes, which is all it opens.
 *
 * A consent opens in a popup without a handle on this page; on a narrow screen (when no app
 * window opened this page), or when the popup is blocked, in this tab. The callback page tells this page how it ended (over a
 * BroadcastChannel of this origin, or through sessionStorage when it came back in this tab).
 * The outcome then goes to the app: a message to the window that opened this page, only to
 * the app's origins, or a return to its `redirect_uri`.
 */
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { CALLBACK_CHANNEL } from '../inspector/channel.js';
import { OUTCOME_KEY, RETURN_KEY } from './return.js';
import { say } from './strings.js';

interface Provider {
  provider_id: string;
  label: string;
  connection_id: string;
  status: 'pending' | 'active' | 'error' | null;
  account: string | null;
  signs_in_at: string;
  error: { code: string; description: string } | null;
}

interface View {
  branding: { name?: string; logo_url?: string; accent?: string };
  end_user: { name: string } | null;
  expires_at: string;
  allow_disconnect: boolean;
  redirect_uri: string | null;
  opener_origins: string[];
  providers: Provider[];
}

/** How a consent ended, as the page tells the app. */
type Outcome = 'connected' | 'declined' | 'error';

interface Notice {
  kind: 'info' | 'success' | 'error';
  text: string;
  /** A failed or declined consent: the provider to try again. */
  retry?: string;
  /** Where "back to the app" goes, with this outcome. */
  back?: string;
}

const SECRET_KEY = 'keyway-connect-secret';
const base = location.pathname.replace(/\/connect\/?$/, '');

/** The secret: from the fragment (then out of the address bar), or kept from before. */
function secretOfPage(): string | null {
  const fromHash = location.hash.slice(1);
  if (fromHash !== '') {
    sessionStorage.setItem(SECRET_KEY, fromHash);
    history.replaceState(null, '', location.pathname + location.search);
    return fromHash;
  }
  return sessionStorage.getItem(SECRET_KEY);
}

const secret = secretOfPage();

class Refused extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(`${base}/connect/api/${path}`, {
      method,
      headers: {
        authorization: `Bearer ${secret ?? ''}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new Refused(0, 'unreachable', say('unreachable'));
  }
  if (response.status === 204) return {} as T;
  const answer = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok) {
    throw new Refused(
      response.status,
      String(answer.error ?? 'error'),
      String(answer.error_description ?? `HTTP ${response.status}`),
    );
  }
  return answer as T;
}

/** Black or white text on the accent, whichever reads better (WCAG relative luminance). */
function textOn(accent: string): string {
  const hex = accent.length === 4 ? accent.replace(/\w/g, (c) => c + c) : accent;
  const [r, g, b] = [1, 3, 5].map((at) => {
    const channel = Number.parseInt(hex.slice(at, at + 2), 16) / 255;
    return channel <= 0.04045 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return (luminance + 0.05) / 0.05 > 1.05 / (luminance + 0.05) ? '#111111' : '#ffffff';
}

/** The app's `redirect_uri` with how it went. */
function returnUrl(view: View, provider: Provider | null, status: string): string | null {
  if (view.redirect_uri === null) return null;
  const url = new URL(view.redirect_uri);
  if (provider !== null) url.searchParams.set('connection_id', provider.connection_id);
  url.searchParams.set('status', status);
  return url.href;
}

/** Tells the app's window that opened this page, at the app's origins only. */
function tellOpener(view: View, message: Record<string, unknown>): boolean {
  const opener = window.opener as Window | null;
  if (opener === null || opener.closed) return false;
  for (const origin of view.opener_origins) {
    try {
      opener.postMessage({ type: 'keyway-connect', ...message }, origin);
    } catch {
      // An origin the browser cannot target: the others are still told.
    }
  }
  return true;
}

function App() {
  const [view, setView] = useState<View | null>(null);
  const [phase, setPhase] = useState<'loading' | 'ready' | 'expired' | 'unreachable'>(
    secret === null ? 'expired' : 'loading',
  );
  const [notice, setNotice] = useState<Notice | null>(null);
  const [waiting, setWaiting] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const viewRef = useRef<View | null>(null);
  const waitingRef = useRef<{ provider: string; wasActive: boolean } | null>(null);

  const load = async (): Promise<View | null> => {
    try {
      const next = await call<View>('GET', 'session');
      viewRef.current = next;
      setView(next);
      setPhase('ready');
      return next;
    } catch (error) {
      if (error instanceof Refused && error.status === 401) setPhase('expired');
      else if (viewRef.current === null) setPhase('unreachable');
      return null;
    }
  };

  const finish = async (providerId: string, outcome: Outcome, code: string | null) => {
    waitingRef.current = null;
    setWaiting(null);
    const current = (await load()) ?? viewRef.current;
    if (current === null) return;
    const provider = current.providers.find((p) => p.provider_id === providerId) ?? null;
    const name = provider?.label ?? providerId;
    const status = outcome === 'connected' ? 'active' : outcome;
    const description =
      provider?.error?.code === code && provider?.error !== null
        ? provider.error.description
        : (code ?? '');
    const told = tellOpener(current, {
      outcome,
      provider_id: providerId,
      connection_id: provider?.connection_id ?? null,
      error: outcome === 'connected' ? null : code,
    });
    const back = returnUrl(current, provider, status) ?? undefined;
    if (outcome === 'connected') {
      setNotice({ kind: 'success', text: say('connected', { provider: name }), back });
      // One provider offered, connected: back to the app at once.
      if (!told && back !== undefined && current.providers.length === 1) location.assign(back);
    } else if (outcome === 'declined') {
      setNotice({
        kind: 'info',
        text: say('declined', { provider: name }),
        retry: providerId,
        back,
      });
    } else {
      setNotice({
        kind: 'error',
        text: say('failed', { provider: name, error: description }),
        retry: providerId,
        back,
      });
    }
  };

  const outcomeOf = (status: string, error: string | null): Outcome =>
    status === 'active' && error === null
      ? 'connected'
      : error === 'access_denied'
        ? 'declined'
        : 'error';

  useEffect(() => {
    if (secret === null) return;
    void load().then((loaded) => {
      // Back in this tab from a consent: how it ended, as the callback page left it.
      const left = sessionStorage.getItem(OUTCOME_KEY);
      sessionStorage.removeItem(OUTCOME_KEY);
      sessionStorage.removeItem(RETURN_KEY);
      if (left === null || loaded === null) return;
      const ended = JSON.parse(left) as {
        connection_id: string;
        status: string;
        error: string | null;
      };
      const provider = loaded.providers.find((p) => p.connection_id === ended.connection_id);
      if (provider !== undefined) {
        void finish(provider.provider_id, outcomeOf(ended.status, ended.error), ended.error);
      }
    });
    const channel = new BroadcastChannel(CALLBACK_CHANNEL);
    channel.addEventListener('message', (event) => {
      const data = event.data as {
        type?: string;
        connection_id?: string;
        status?: string;
        error?: string | null;
      };
      const current = viewRef.current;
      const wait = waitingRef.current;
      if (data?.type !== 'keyway-callback' || current === null || wait === null) return;
      const provider = current.providers.find((p) => p.provider_id === wait.provider);
      if (provider === undefined || provider.connection_id !== data.connection_id) return;
      void finish(
        provider.provider_id,
        outcomeOf(String(data.status), data.error ?? null),
        data.error ?? null,
      );
    });
    // A consent confirmed by the app (verify) comes back there, not here: the status says it.
    const timer = setInterval(async () => {
      const wait = waitingRef.current;
      if (wait === null) return;
      const next = await load();
      const provider = next?.providers.find((p) => p.provider_id === wait.provider);
      if (provider?.status === 'active' && !wait.wasActive) {
        void finish(wait.provider, 'connected', null);
      }
    }, 3000);
    return () => {
      channel.close();
      clearInterval(timer);
    };
  }, []);

  const start = async (provider: Provider) => {
    setNotice(null);
    setConfirming(null);
    let url: string;
    try {
      url = (
        await call<{ authorization_url: string }>('POST', 'authorize', {
          provider_id: provider.provider_id,
        })
      ).authorization_url;
    } catch (error) {
      if (error instanceof Refused && error.status === 401) setPhase('expired');
      else
        setNotice({ kind: 'error', text: (error as Error).message, retry: provider.provider_id });
      return;
    }
    const sameTab = () => {
      sessionStorage.setItem(RETURN_KEY, location.pathname);
      location.assign(url);
    };
    // A narrow screen takes the consent in this tab — unless an app's window opened this
    // page (@keyway/connect): leaving for another origin would cut this page off from it.
    if (matchMedia('(max-width: 600px)').matches && window.opener === null) return sameTab();
    const popup = window.open('', 'keyway-consent', 'popup,width=520,height=720');
    if (popup === null) {
      setNotice({ kind: 'info', text: say('popupBlocked') });
      return sameTab();
    }
    // The authorization server's pages get no handle on this one.
    popup.opener = null;
    popup.location.href = url;
    waitingRef.current = {
      provider: provider.provider_id,
      wasActive: provider.status === 'active',
    };
    setWaiting(provider.provider_id);
  };

  const disconnect = async (provider: Provider) => {
    if (confirming !== provider.provider_id) {
      setConfirming(provider.provider_id);
      return;
    }
    setConfirming(null);
    try {
      await call(
        'DELETE',
        `providers/${provider.provider_id.split('/').map(encodeURIComponent).join('/')}`,
      );
      await load();
      setNotice({ kind: 'info', text: say('disconnected', { provider: provider.label }) });
      if (viewRef.current !== null) {
        tellOpener(viewRef.current, {
          outcome: 'disconnected',
          provider_id: provider.provider_id,
          connection_id: provider.connection_id,
          error: null,
        });
      }
    } catch (error) {
      if (error instanceof Refused && error.status === 401) setPhase('expired');
      else setNotice({ kind: 'error', text: (error as Error).message });
    }
  };

  const app = view?.branding.name ?? say('defaultApp');
  const accent = view?.branding.accent;
  useEffect(() => {
    if (accent === undefined) return;
    document.documentElement.style.setProperty('--accent', accent);
    document.documentElement.style.setProperty('--on-accent', textOn(accent));
  }, [accent]);

  return (
    <>
      <header class="brand">
        {view?.branding.logo_url !== undefined && (
          <img src={view.branding.logo_url} alt={say('logoAlt', { app })} class="logo" />
        )}
        <h1>{say('title')}</h1>
        <p class="subtitle">{say('subtitle', { app })}</p>
        {view?.end_user != null && (
          <p class="hint">{say('greeting', { app, user: view.end_user.name })}</p>
        )}
      </header>
      <div role="status" aria-live="polite" class={`notice ${notice?.kind ?? ''}`}>
        {notice !== null && (
          <>
            <p>{notice.text}</p>
            {(notice.retry !== undefined || notice.back !== undefined) && (
              <p class="actions">
                {notice.retry !== undefined && view !== null && (
                  <button
                    type="button"
                    onClick={() => {
                      const again = view.providers.find((p) => p.provider_id === notice.retry);
                      if (again !== undefined) void start(again);
                    }}
                  >
                    {say('retry')}
                  </button>
                )}
                {notice.back !== undefined && (
                  <a class="button secondary" href={notice.back}>
                    {say(notice.kind === 'success' ? 'continueTo' : 'backTo', { app })}
                  </a>
                )}
              </p>
            )}
          </>
        )}
      </div>
      {phase === 'loading' && <p>{say('loading')}</p>}
      {phase === 'expired' && (
        <p class="notice error" role="alert">
          {say('expired', { app })}
        </p>
      )}
      {phase === 'unreachable' && (
        <p class="notice error" role="alert">
          {say('unreachable')}
        </p>
      )}
      {phase === 'ready' && view !== null && (
        <section aria-labelledby="providers-title">
          <h2 id="providers-title" class="visually-hidden">
            {say('providersLabel')}
          </h2>
          {view.providers.length === 0 && <p>{say('noProviders')}</p>}
          <ul class="providers">
            {view.providers.map((provider) => (
              <li
                key={provider.provider_id}
                class="provider"
                data-status={provider.status ?? 'none'}
              >
                <div class="about">
                  <h3>{provider.label}</h3>
                  <p class="status">
                    {provider.status === 'active'
                      ? provider.account === null
                        ? say('statusActive')
                        : say('statusActiveAs', { account: provider.account })
                      : provider.status === 'error'
                        ? say('statusError', { error: provider.error?.description ?? '' })
                        : provider.status === 'pending' && waiting === provider.provider_id
                          ? say('statusPending')
                          : say('statusNone')}
                  </p>
                  <p class="hint">{say('signsInAt', { host: provider.signs_in_at })}</p>
                  {waiting === provider.provider_id && (
                    <p class="hint">{say('waiting', { provider: provider.label })}</p>
                  )}
                </div>
                <div class="buttons">
                  <button
                    type="button"
                    class={provider.status === 'active' ? 'secondary' : ''}
                    onClick={() => void start(provider)}
                  >
                    {provider.status === 'active' || provider.status === 'error'
                      ? say('reconnect')
                      : say('connect')}
                    <span class="visually-hidden"> {provider.label}</span>
                  </button>
                  {view.allow_disconnect && provider.status !== null && (
                    <button
                      type="button"
                      class="secondary danger"
                      onClick={() => void disconnect(provider)}
                    >
                      {confirming === provider.provider_id ? (
                        say('confirmDisconnect', { provider: provider.label })
                      ) : (
                        <>
                          {say('disconnect')}
                          <span class="visually-hidden"> {provider.label}</span>
                        </>
                      )}
                    </button>
                  )}
                  {confirming === provider.provider_id && (
                    <button type="button" class="secondary" onClick={() => setConfirming(null)}>
                      {say('cancel')}
                    </button>
                  )}
                </div>
              </li>
            ))}
          </ul>
          {view.redirect_uri !== null && (
            <p class="done">
              <a class="button secondary" href={returnUrl(view, null, 'done') ?? undefined}>
                {say('backTo', { app })}
              </a>
            </p>
          )}
        </section>
      )}
    </>
  );
}

const root = document.getElementById('app');
if (root !== null) {
  root.replaceChildren();
  render(<App />, root);
}
