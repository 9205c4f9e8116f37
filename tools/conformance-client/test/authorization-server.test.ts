import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchChromium } from '@keyway/test-support/browser';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Check, runSuiteCli } from './harness.js';

/*
 * The official MCP conformance suite's authorization-server scenarios, run against Keyway
 * as the authorization server of its MCP endpoints (docs/api.md §17): its metadata, and the
 * authorization code grant with PKCE, the user played in Debian's Chromium (the suite prints
 * the authorization URL and waits at its callback). The newest pre-release has them; the
 * latest release has none yet.
 */

const SUITE = '0.2.0-alpha.12';

/** A free loopback port, for the suite's callback server. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let directory: string;
let broker: BrokerProcess;
const rootKey = 'conformance-as-root-key-0123456789-abcdefghij';

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), 'keyway-conformance-as-'));
  // The issuer is the URL the suite is given: the base URL, on the port the broker listens at.
  const port = await freePort();
  broker = await startBrokerProcess({
    PORT: String(port),
    KEYWAY_BASE_URL: `http://127.0.0.1:${port}`,
    KEYWAY_ROOT_KEY: rootKey,
    KEYWAY_DATABASE: join(directory, 'keyway.sqlite'),
    KEYWAY_SIGN_IN: 'token',
    KEYWAY_INSPECTOR: 'false',
    KEYWAY_LOG_LEVEL: 'silent',
  });
}, 120_000);

afterAll(async () => {
  await broker?.stop();
  rmSync(directory, { recursive: true, force: true });
});

/** Runs the suite's authorization-server scenarios (`args` may name one), `play` acting on its output. */
async function runScenario(
  args: string[],
  play?: (authorizationUrl: string) => Promise<void>,
): Promise<{ exitCode: number; checks: Check[]; output: string }> {
  const outputDir = mkdtempSync(join(directory, 'run-'));
  let played: Promise<void> | undefined;
  const run = await runSuiteCli(
    SUITE,
    ['authorization', '--url', broker.url, ...args],
    outputDir,
    (output) => {
      const url = output.match(/^(https?:\/\/\S+\/oauth\/authorize\?\S+)$/m)?.[1];
      if (url !== undefined && played === undefined && play !== undefined) played = play(url);
    },
  );
  await played;
  const { exitCode, output } = run;
  const checks = run.checks.flatMap(([, recorded]) => recorded);
  return { exitCode, checks, output };
}

describe(`MCP conformance suite ${SUITE}, authorization-server scenarios against keyway serve`, () => {
  it('authorization-server-metadata-endpoint alone', { timeout: 60_000 }, async () => {
    const result = await runScenario(['--scenario', 'authorization-server-metadata-endpoint']);
    expect(
      result.checks.map((check) => `${check.status} ${check.id}`),
      result.output,
    ).toEqual([
      'SUCCESS authorization-server-metadata',
      'SUCCESS authorization-server-metadata-cimd',
    ]);
    expect(result.exitCode).toBe(0);
  });

  it('every scenario, the authorization code grant’s user signing in and allowing in Chromium', {
    timeout: 120_000,
  }, async () => {
    const mint = await fetch(`${broker.url}/api/admin/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rootKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'conformance', scopes: ['acme/users/conformance'] }),
    });
    const { access_token: token } = (await mint.json()) as { access_token: string };
    const port = await freePort();
    // A public client registered for the suite's loopback callback (any port matches).
    const registered = await fetch(`${broker.url}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Conformance suite',
        redirect_uris: ['http://127.0.0.1/callback'],
      }),
    });
    expect(registered.status).toBe(201);
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    const browser = await launchChromium();
    try {
      const result = await runScenario(
        [
          '--client-id',
          clientId,
          '--resource',
          `${broker.url}/mcp/acme/users/conformance/linear`,
          '--port',
          String(port),
        ],
        async (url) => {
          const page = await browser.newPage();
          await page.goto(url);
          await page.getByLabel('Your broker token').fill(token);
          await page.getByRole('button', { name: 'Sign in' }).click();
          await page.getByRole('button', { name: 'Allow' }).click();
          await page.waitForURL((target) =>
            target.href.startsWith(`http://127.0.0.1:${port}/callback`),
          );
          await page.close();
        },
      );
      // Each scenario writes its own checks.json, read in the order the directory lists them.
      expect(
        result.checks.map((check) => `${check.status} ${check.id}`).sort(),
        result.output,
      ).toEqual([
        'SUCCESS authorization-code-grant',
        'SUCCESS authorization-server-metadata',
        'SUCCESS authorization-server-metadata-cimd',
      ]);
      expect(result.exitCode).toBe(0);
    } finally {
      await browser.close();
    }
  });
});
