/*
 * How the callback page reports an ended consent to the page that opened its window (the
 * inspector, the connect page): over a BroadcastChannel, which only pages of this origin
 * share — the consent window has no `opener`, so the authorization server's pages cannot
 * reach the page that opened it — then it closes the window. A browser that keeps it open
 * (one that does not count it as opened by a script after the authorization server's
 * pages) gets a button: a click may close what a script alone may not.
 */
import { CALLBACK_CHANNEL } from './channel.js';

/** What the callback page says of the consent, from its `#outcome` element. */
export function outcomeOf(element: HTMLElement) {
  return {
    connection_id: element.dataset.connection,
    status: element.dataset.status,
    error: element.dataset.error ?? null,
  };
}

/** Tells the opening page over the channel, and closes this window. */
export function reportOverChannel(element: HTMLElement): void {
  const channel = new BroadcastChannel(CALLBACK_CHANNEL);
  channel.postMessage({ type: 'keyway-callback', ...outcomeOf(element) });
  channel.close();
  window.close();
  setTimeout(() => {
    if (window.closed) return;
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = 'Close this window';
    button.addEventListener('click', () => window.close());
    document.body.append(button);
  }, 500);
}
