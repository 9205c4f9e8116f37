import type { CallbackOutcome } from '@keyway/core';
import type { Reply } from './responses.js';

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** HTML-escapes text: nothing of a query is ever reflected unescaped. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/**
 * The page shows results only: no styles from elsewhere, no framing, and the callback URL
 * (with its code and state) never leaves as a Referer. With the inspector on, one script
 * of this origin reports the outcome to the inspector window that opened the consent.
 */
function headers(script: boolean): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'content-security-policy':
      `default-src 'none'; ${script ? "script-src 'self'; " : ''}style-src 'unsafe-inline'; ` +
      `frame-ancestors 'none'`,
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
  };
}

/** What the inspector's script on the callback page reports, and where that script is. */
export interface CallbackReport {
  /** The script's URL path, relative to the callback page. */
  script: string;
  outcome: { connection_id: string; status: string; error: string | null };
}

function page(status: number, title: string, message: string, report?: CallbackReport): Reply {
  const reported =
    report === undefined
      ? ''
      : `<div id="outcome" hidden data-connection="${escapeHtml(report.outcome.connection_id)}"` +
        ` data-status="${escapeHtml(report.outcome.status)}"` +
        (report.outcome.error === null ? '' : ` data-error="${escapeHtml(report.outcome.error)}"`) +
        `></div><script type="module" src="${escapeHtml(report.script)}"></script>`;
  const body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}</style></head>
<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>${reported}</body></html>
`;
  return { status, headers: headers(report !== undefined), body };
}

/** The answer to a finished callback: a redirect to `redirect_to`, or a small page. */
export function callbackReply(outcome: CallbackOutcome, inspectorScript?: string): Reply {
  const report =
    inspectorScript === undefined
      ? undefined
      : {
          script: inspectorScript,
          outcome: {
            connection_id: outcome.connection_id,
            status: outcome.status,
            error: outcome.error?.code ?? null,
          },
        };
  if (outcome.redirect_to !== null) {
    const target = new URL(outcome.redirect_to);
    target.searchParams.set('connection_id', outcome.connection_id);
    target.searchParams.set('status', outcome.status);
    if (outcome.flow_id !== undefined) target.searchParams.set('flow_id', outcome.flow_id);
    if (outcome.error !== null) target.searchParams.set('error', outcome.error.code);
    return {
      status: 302,
      headers: {
        location: target.href,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
      },
      body: null,
    };
  }
  if (outcome.status === 'verification_required') {
    // Never reached through the handler (verification needs a redirect_to), but a flow id
    // is not shown on a page: only the app that asked for verification may confirm it.
    return page(
      200,
      'Almost connected',
      `The connection ${outcome.connection_id} waits for the app to confirm it. You can close this window.`,
    );
  }
  if (outcome.error === null) {
    return page(
      200,
      'Connected',
      `The connection ${outcome.connection_id} is active. You can close this window.`,
      report,
    );
  }
  const kept =
    outcome.status === 'active' ? ' It stays active with its previous authorization.' : '';
  return page(
    200,
    'Not connected',
    `The connection ${outcome.connection_id} was not authorized: ${outcome.error.code} ` +
      `(${outcome.error.description}).${kept}`,
    report,
  );
}

/** The answer to an unknown, expired or replayed state. */
export function invalidCallbackReply(message: string): Reply {
  return page(400, 'This link has expired', `${message}. Start the connection again.`);
}
