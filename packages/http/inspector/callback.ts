/*
 * Runs on the OAuth callback page: tells the inspector that opened the consent window how
 * the authorization ended, over a BroadcastChannel (which only pages of this origin share:
 * the consent window has no `opener`, so the authorization server's pages cannot reach the
 * inspector), then closes the window. A browser that keeps it open (one that does not count
 * it as opened by a script after the authorization server's pages) gets a button: a click
 * may close what a script alone may not.
 */
import { CALLBACK_CHANNEL } from './channel.js';

const outcome = document.getElementById('outcome');
if (outcome !== null) {
  const channel = new BroadcastChannel(CALLBACK_CHANNEL);
  channel.postMessage({
    type: 'keyway-callback',
    connection_id: outcome.dataset.connection,
    status: outcome.dataset.status,
    error: outcome.dataset.error ?? null,
  });
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
