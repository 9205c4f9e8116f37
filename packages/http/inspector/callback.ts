/*
 * Runs on the OAuth callback page: tells the inspector that opened the consent window how
 * the authorization ended, by postMessage to this page's own origin only, then closes.
 */
const outcome = document.getElementById('outcome');
if (outcome !== null && window.opener !== null) {
  (window.opener as Window).postMessage(
    {
      type: 'keyway-callback',
      connection_id: outcome.dataset.connection,
      status: outcome.dataset.status,
      error: outcome.dataset.error ?? null,
    },
    location.origin,
  );
}

export {};
