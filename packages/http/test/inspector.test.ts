import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createBroker } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { createTestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { createHandler } from '../src/index.js';
import { CALLBACK_SCRIPT, INSPECTOR_ASSETS } from '../src/inspector-assets.generated.js';
import { connectThroughConsent, Harness, putProvider, START } from './harness.js';

const ROOT_KEY = 'inspector-test-root-key-0123456789-abcdef';
const root = fileURLToPath(new URL('../../..', import.meta.url));

const handlerWith = (inspector?: boolean) =>
  createHandler(
    createBroker({ rootKey: ROOT_KEY, storage: memoryStorage(), purgeIntervalMs: false }),
    { basePath: '/keyway', ...(inspector === undefined ? {} : { inspector }) },
  );
const get = (handler: ReturnType<typeof handlerWith>, path: string) =>
  handler(new Request(`http://keyway.test${path}`));

describe('the inspector page (docs/api.md §9)', () => {
  it('is off by default in the library', async () => {
    expect((await get(handlerWith(), '/keyway/inspector')).status).toBe(401);
    expect((await get(handlerWith(false), '/keyway/inspector')).status).toBe(401);
  });

  it('is served without a credential, under a CSP that allows this origin only', async () => {
    const page = await get(handlerWith(true), '/keyway/inspector');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('cache-control')).toBe('no-store');
    // No window it opens, or that opened it, gets a handle on it.
    expect(page.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const html = await page.text();
    // No inline script, and every asset from this origin, by a relative path.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)/);
    expect(html).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
    const assets = [...html.matchAll(/(?:src|href)="(inspector\/assets\/[^"]+)"/g)].map(
      (m) => m[1],
    );
    expect(assets).toHaveLength(2);
    for (const asset of assets) {
      const answer = await get(handlerWith(true), `/keyway/${asset}`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(answer.headers.get('content-type')).toMatch(/^text\/(javascript|css); charset=utf-8$/);
    }
    expect((await get(handlerWith(true), '/keyway/inspector/assets/nope.js')).status).toBe(404);
  });

  it('names each asset by its content', async () => {
    const { createHash } = await import('node:crypto');
    for (const [name, asset] of Object.entries(INSPECTOR_ASSETS)) {
      const hash = createHash('sha256').update(asset.body).digest('hex').slice(0, 12);
      expect(name).toMatch(new RegExp(`\\.${hash}\\.(js|css)$`));
    }
  });

  it('is built from packages/http/inspector as committed (node scripts/build-inspector.mjs)', async () => {
    const result = await promisify(execFile)(
      process.execPath,
      ['scripts/build-inspector.mjs', '--check'],
      {
        cwd: root,
      },
    ).catch((error: { code: number; stderr: string }) => error);
    expect('code' in result ? result.stderr : '').toBe('');
  }, 60_000);

  it('writes no markup from values: no HTML sink in its sources, no storage of any kind', async () => {
    const { files, found } = await sinksIn('packages/http/inspector', [
      ...HTML_SINKS,
      'sessionStorage',
    ]);
    expect(files.length).toBeGreaterThan(10);
    expect(found).toEqual([]);
  });

  it('has a connect page that writes no markup from values and keeps its secret in its tab only', async () => {
    // sessionStorage only: the secret and a consent's outcome stay in this tab.
    const { files, found } = await sinksIn('packages/http/connect-page', HTML_SINKS);
    expect(files.sort()).toEqual(['callback.ts', 'main.tsx', 'return.ts', 'strings.ts']);
    expect(found).toEqual([]);
  });
});

/** What no page's source may hold: markup written from values, storage beyond the tab. */
const HTML_SINKS = [
  'innerHTML',
  'outerHTML',
  'insertAdjacentHTML',
  'dangerouslySetInnerHTML',
  'document.write',
  'localStorage',
  'document.cookie',
  'indexedDB',
  'eval(',
];

/** The TypeScript sources below a folder of the repository, and which sinks each holds. */
async function sinksIn(folder: string, sinks: string[]) {
  const { readdirSync, readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const source = join(root, folder);
  const files = readdirSync(source, { recursive: true, encoding: 'utf8' }).filter((file) =>
    /\.tsx?$/.test(file),
  );
  const found: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(source, file), 'utf8');
    for (const sink of sinks) if (text.includes(sink)) found.push(`${file}: ${sink}`);
  }
  return { files, found };
}

describe('the callback page with the inspector on', () => {
  it('reports the outcome to the opener through a script of this origin, escaped', async () => {
    let h!: Harness;
    const world = createTestWorld({ now: () => h?.now ?? START });
    h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: 'https://keyway.example.test',
      providerManagement: true,
    });
    h.handler = createHandler(h.broker, { inspector: true });
    await putProvider(h, world);
    const reply = await connectThroughConsent(h, world, 'acme/<alice>/linear');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    );
    expect(reply.headers.get('cross-origin-opener-policy')).toBe('same-origin');
    // The script reports over a BroadcastChannel of this origin, never to window.opener.
    const script = INSPECTOR_ASSETS[CALLBACK_SCRIPT]?.body ?? '';
    expect(script).toContain('BroadcastChannel');
    expect(script).not.toContain('opener');
    expect(reply.text).toContain(
      '<div id="outcome" hidden data-connection="acme/&lt;alice&gt;/linear" data-status="active"></div>',
    );
    // The server's own callback is one segment deeper than the shared one.
    expect(reply.text).toContain(
      `<script type="module" src="../../../inspector/assets/${CALLBACK_SCRIPT}"></script>`,
    );
  });

  it('has no script at all with the inspector off', async () => {
    let h!: Harness;
    const world = createTestWorld({ now: () => h?.now ?? START });
    h = new Harness(memoryStorage(), {
      fetch: world.fetch,
      baseUrl: 'https://keyway.example.test',
      providerManagement: true,
    });
    await putProvider(h, world);
    const reply = await connectThroughConsent(h, world, 'acme/alice/linear');
    expect(reply.text).not.toContain('<script');
    expect(reply.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    );
  });
});
