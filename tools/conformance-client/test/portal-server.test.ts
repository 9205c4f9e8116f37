import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { type BrokerProcess, startBrokerProcess } from '@keyway/test-support/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixtureServer } from './fixture-server.js';
import { runSuiteCli, SUITES, type SuiteVersion } from './harness.js';

/*
 * The official MCP conformance suite's server scenarios, run against an MCP server of the
 * official SDK directly, then against Keyway's portal (docs/api.md §18) over that same
 * server: what the server does right, the portal must not lose. The scenarios that name a
 * tool or a prompt by the server's own name cannot pass through a portal, which names them
 * `<alias>__<name>`; they are listed below, each with the check that says so.
 */

const PREFIX = 'acme/users/conformance';
/** The portal over the v2 server, run with the 2026-07-28 scenarios. */
const MODERN_PREFIX = 'acme/users/conformance-2026';
const rootKey = 'conformance-portal-root-key-0123456789-abcdef';

/**
 * Scenarios the server passes and the portal cannot, by design: each names a tool or a
 * prompt the way the server wrote it (`test_simple_prompt`), where the portal lists
 * `fixture__test_simple_prompt`.
 */
const NAMESPACED: Record<string, string> = {
  'prompts-get-simple': 'gets the prompt `test_simple_prompt` by its server name',
  'prompts-get-with-args': 'gets the prompt `test_prompt_with_arguments` by its server name',
  'completion-complete': 'completes an argument of the prompt `test_prompt_with_arguments`',
  'tools-call-simple-text': 'calls the tool `test_simple_text` by its server name',
  'tools-call-error': 'calls the tool `test_error_handling` by its server name',
};

/** Scenarios the portal must pass on its own account, named so that none goes unnoticed. */
const THROUGH = [
  'resources-list',
  'resources-read-text',
  'resources-read-binary',
  'resources-templates-read',
  'resources-subscribe',
  'resources-unsubscribe',
  'prompts-list',
  'tools-list',
  'logging-set-level',
  'ping',
  // The portal's own check of `Origin`, through a hop that is the broker's public address.
  'dns-rebinding-protection',
];

/** The same for the 2026-07-28 scenarios (the suite's 0.2 line only has them). */
const THROUGH_2026 = [
  'server-sse-multiple-streams',
  'resources-list',
  'resources-read-text',
  'resources-read-binary',
  'resources-templates-read',
  'sep-2164-resource-not-found',
  'prompts-list',
  'tools-list',
  // Caching hints (SEP-2549) of the portal's own lists and reads.
  'caching',
  // `Mcp-Method` / `Mcp-Name` checked against the portal's names (SEP-2243).
  'http-header-validation',
  'input-required-result-unsupported-methods',
  'input-required-result-validate-input',
  'dns-rebinding-protection',
];

let directory: string;
let fixture: FixtureServer;
let modern: FixtureServer;
let broker: BrokerProcess;
let proxy: Server;
let proxyUrl: string;

/** The scenarios a run passed (every check a success, an info or skipped) and failed. */
interface Outcome {
  passed: string[];
  failed: Record<string, string[]>;
  output: string;
}

async function runSuite(
  version: SuiteVersion,
  url: string,
  spec: '2025-11-25' | '2026-07-28' = '2025-11-25',
): Promise<Outcome> {
  const outputDir = mkdtempSync(join(directory, 'run-'));
  // The 2026-07-28 scenarios are the suite's pending and draft ones still: all of them.
  const suite = spec === '2026-07-28' ? ['--suite', 'all'] : [];
  const run = await runSuiteCli(
    version,
    ['server', '--url', url, '--spec-version', spec, ...suite],
    outputDir,
  );
  const passed: string[] = [];
  const failed: Record<string, string[]> = {};
  for (const [file, checks] of run.checks) {
    // `server-<scenario>-<timestamp>/checks.json`
    const scenario = dirname(file)
      .replace(/^server-/, '')
      .replace(/-\d{4}-\d{2}-\d{2}T.*$/, '');
    const bad = checks.filter((check) => check.status === 'FAILURE' || check.status === 'WARNING');
    if (bad.length === 0) passed.push(scenario);
    else failed[scenario] = bad.map((check) => `${check.id}: ${check.description}`);
  }
  return { passed: passed.sort(), failed, output: run.output };
}

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), 'keyway-conformance-portal-'));
  fixture = new FixtureServer();
  await fixture.start();
  modern = new FixtureServer(true);
  await modern.start();
  // The suite sends no credential: this hop adds the broker token, as a configured client would.
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const headers: Record<string, string> = { authorization: `Bearer ${rootKey}` };
      const hop = new Set(['host', 'authorization', 'connection', 'content-length', 'keep-alive']);
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !hop.has(name)) {
          headers[name] = value;
        }
      }
      const body = Buffer.concat(chunks);
      const prefix = (req.url ?? '').startsWith('/modern/') ? MODERN_PREFIX : PREFIX;
      fetch(`${broker.url}/portal/${prefix}`, {
        method: req.method ?? 'GET',
        headers,
        ...(body.length > 0 ? { body } : {}),
      })
        .then((response) => {
          const answered = Object.fromEntries(response.headers);
          delete answered['transfer-encoding'];
          delete answered.connection;
          res.writeHead(response.status, answered);
          if (response.body === null) {
            res.end();
            return;
          }
          // The suite closes streams it is done with: the hop ends its side too.
          const body = Readable.fromWeb(response.body as never);
          body.on('error', () => res.destroy());
          res.on('close', () => body.destroy());
          body.pipe(res);
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}/mcp`;
  broker = await startBrokerProcess({
    KEYWAY_ROOT_KEY: rootKey,
    KEYWAY_DATABASE: join(directory, 'keyway.sqlite'),
    KEYWAY_ALLOWED_HOSTS: '127.0.0.1',
    // The hop is the broker's public address, as a reverse proxy's would be: a browser
    // page may call its MCP endpoints from that origin only.
    KEYWAY_BASE_URL: new URL(proxyUrl).origin,
    KEYWAY_INSPECTOR: 'false',
    KEYWAY_LOG_LEVEL: 'silent',
  });
  const admin = (method: string, path: string, body: unknown) =>
    fetch(`${broker.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${rootKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  for (const [name, server, prefix] of [
    ['fixture', fixture, PREFIX],
    ['fixture-2026', modern, MODERN_PREFIX],
  ] as const) {
    const put = await admin('PUT', `/api/admin/providers/acme/${name}`, {
      template: 'mcp',
      configuration: { resource_url: `${server.origin}/mcp` },
    });
    expect(put.status, await put.clone().text()).toBe(201);
    const started = await admin('POST', `/api/oauth/authorize/acme/${name}`, {
      connection_id: `${prefix}/fixture`,
    });
    const { authorization_url: consentUrl } = (await started.json()) as {
      authorization_url: string;
    };
    const back = new URL(server.world.consent(consentUrl));
    expect((await fetch(`${broker.url}${back.pathname}${back.search}`)).status).toBe(200);
  }
}, 120_000);

afterAll(async () => {
  proxy?.closeAllConnections();
  proxy?.close();
  await broker?.stop();
  await fixture?.stop();
  await modern?.stop();
  rmSync(directory, { recursive: true, force: true });
});

/**
 * Runs the suite against the server, then against the portal over it: the portal loses
 * exactly the scenarios that name the server's tools and prompts, and passes those named.
 */
async function compare(
  version: SuiteVersion,
  urls: { direct: string; portal: string },
  through: string[],
  spec: '2025-11-25' | '2026-07-28',
): Promise<void> {
  const direct = await runSuite(version, urls.direct, spec);
  const portal = await runSuite(version, urls.portal, spec);
  // The server itself passes the scenarios the fixture was written for.
  expect(direct.passed, direct.output).toEqual(
    expect.arrayContaining([...Object.keys(NAMESPACED), ...through]),
  );
  expect(portal.passed, JSON.stringify(portal.failed, null, 2)).toEqual(
    expect.arrayContaining(through),
  );
  const lost = direct.passed.filter((scenario) => !portal.passed.includes(scenario));
  expect(lost.sort(), JSON.stringify(portal.failed, null, 2)).toEqual(
    Object.keys(NAMESPACED).sort(),
  );
  console.log(
    `conformance ${version} (${spec}): ${direct.passed.length} scenarios pass directly, ` +
      `${portal.passed.length} through the portal: ${portal.passed.join(', ')}`,
  );
}

describe.each(Object.keys(SUITES) as SuiteVersion[])(
  'MCP conformance suite %s, server scenarios (2025-11-25) through the portal',
  (version) => {
    it('passes through the portal every scenario the server passes, but those that name the server’s own tools and prompts', {
      timeout: 240_000,
    }, async () => {
      await compare(
        version,
        { direct: `${fixture.origin}/open/mcp`, portal: proxyUrl },
        THROUGH,
        '2025-11-25',
      );
    });
  },
);

describe('MCP conformance suite 0.2, server scenarios of 2026-07-28 through the portal (v2 server)', () => {
  it('passes through the portal every scenario the server passes, but those that name the server’s own tools and prompts', {
    timeout: 240_000,
  }, async () => {
    await compare(
      '0.2.0-alpha.12',
      { direct: `${modern.origin}/open/mcp`, portal: proxyUrl.replace('/mcp', '/modern/mcp') },
      THROUGH_2026,
      '2026-07-28',
    );
  });
});
