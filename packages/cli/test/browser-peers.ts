import { createServer } from 'node:http';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { close, listen, oidcProvider, serveMcp } from './peers.js';

/* The real servers and the real consent of the browser tests (the inspector, the connect page). */

/** An authorization server (oidc-provider) and an MCP server (the SDK) that trusts it. */
export async function startAuthorizedMcp(name: string) {
  const asServer = createServer();
  const issuer = await listen(asServer);
  const mcpServer = createServer();
  const resourceUrl = `${await listen(mcpServer)}/mcp`;
  asServer.on(
    'request',
    oidcProvider(issuer, () => resourceUrl, {
      accessTokenTTL: 600,
      accessTokenFormat: 'jwt',
    }).callback(),
  );
  serveMcp(mcpServer, { issuer, resourceUrl, name, version: '3.1.4', echo: (text) => text });
  return {
    issuer,
    resourceUrl,
    close: async () => {
      await close(mcpServer);
      await close(asServer);
    },
  };
}

/**
 * Signs in and consents in the oidc-provider popup `start` opens, however many pages it
 * shows — or, with `decline`, cancels at its first page (`access_denied`). The callback
 * page then reports and closes the popup.
 */
export async function consentInPopup(
  page: Page,
  start: () => Promise<void>,
  options: { decline?: boolean } = {},
): Promise<void> {
  const opened = page.context().waitForEvent('page');
  await start();
  const popup = await opened;
  // A page may open its popup blank and send it on (so that it has no handle back); a
  // server that consents at once may have sent it back, and the popup closed, by now.
  const arrived = await popup
    .waitForURL((url) => url.protocol !== 'about:')
    .then(() => popup.waitForLoadState())
    .then(
      () => true,
      (error: unknown) => {
        if (popup.isClosed()) return false;
        throw error;
      },
    );
  if (arrived && options.decline === true) {
    await popup.getByRole('link', { name: '[ Cancel ]' }).click();
  } else if (arrived) {
    await fillConsent(popup);
  }
  // The callback page told the page that opened it over its BroadcastChannel, then closed.
  await expect.poll(() => popup.isClosed(), { timeout: 10_000 }).toBe(true);
}

/** Goes through oidc-provider's sign-in and consent pages in `page` (alice, any password). */
export async function fillConsent(page: Page): Promise<void> {
  for (let step = 0; step < 6 && !page.isClosed(); step++) {
    const login = page.locator('input[name=login]');
    if ((await login.count()) > 0) {
      await login.fill('alice');
      await page.locator('input[name=password]').fill('any');
    }
    const submit = page.locator('button[type=submit]');
    if ((await submit.count()) === 0) break;
    await submit.first().click();
    await page.waitForLoadState().catch(() => {});
  }
}
