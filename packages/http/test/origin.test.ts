import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { originAllowed } from '../src/origin.js';
import { Harness, harnessPerTest, initializeMessage } from './harness.js';

/*
 * DNS rebinding protection of the MCP endpoints (docs/api.md §13, §18): a page of
 * `evil.example.com`, whose name was pointed at the broker, calls `/mcp/…` or `/portal/…`
 * from the victim's browser. The browser sends the page's `Origin`; the broker refuses it
 * before it reads a credential or a body.
 */

const INITIALIZE = initializeMessage('origin-test');

const REFUSAL = (origin: string) => ({
  jsonrpc: '2.0',
  error: {
    code: -32000,
    message:
      `Origin ${JSON.stringify(origin)} is not this server's: a browser page may call an MCP ` +
      "endpoint only from the broker's own origin",
  },
  id: null,
});

/** The JSON-RPC answer of an event stream of one message. */
function answerOf(text: string): { result: { serverInfo: { name: string } } } {
  const data = text.split('\n').find((line) => line.startsWith('data: '));
  if (data === undefined) throw new Error(`no message in ${text}`);
  return JSON.parse(data.slice('data: '.length));
}

describe('the MCP endpoints refuse a browser page of another origin', () => {
  const slot = harnessPerTest();

  function harness(baseUrl: string | undefined): Harness {
    const h = new Harness(memoryStorage(), baseUrl === undefined ? {} : { baseUrl });
    slot.h = h;
    return h;
  }

  const post = (h: Harness, path: string, headers: Record<string, string>) =>
    h.call('POST', path, {
      body: INITIALIZE,
      headers: { accept: 'application/json, text/event-stream', ...headers },
    });

  it('answers 403 with a JSON-RPC error to a rebinding page, with a valid credential, on every method', async () => {
    const h = harness('http://localhost:8787');
    for (const path of ['/portal/acme/users/alice', '/mcp/acme/users/alice/linear']) {
      const reply = await post(h, path, {
        origin: 'http://evil.example.com',
        host: 'evil.example.com',
      });
      expect(reply.status).toBe(403);
      expect(reply.headers.get('content-type')).toBe('application/json');
      expect(reply.body).toEqual(REFUSAL('http://evil.example.com'));
      for (const method of ['GET', 'DELETE']) {
        const other = await h.call(method, path, {
          headers: { origin: 'http://evil.example.com' },
        });
        expect(other.status).toBe(403);
        expect(other.body).toEqual(REFUSAL('http://evil.example.com'));
      }
    }
    // Without a credential too: the refusal comes first.
    const anonymous = await h.call('POST', '/portal/acme', {
      token: null,
      body: INITIALIZE,
      headers: { origin: 'https://localhost.evil.example.com' },
    });
    expect(anonymous.status).toBe(403);
    expect(anonymous.body).toEqual(REFUSAL('https://localhost.evil.example.com'));
  });

  it('refuses an opaque origin (`null`), a loopback name on another port, and another scheme', async () => {
    const h = harness('http://localhost:8787');
    for (const origin of ['null', 'http://127.0.0.1:9999', 'https://localhost:8787', 'not a url']) {
      const reply = await post(h, '/portal/acme', { origin });
      expect(reply.status, origin).toBe(403);
      expect(reply.body).toEqual(REFUSAL(origin));
    }
  });

  it('serves the broker’s own origin, its loopback aliases, and a client that sends no Origin', async () => {
    const h = harness('http://localhost:8787');
    for (const origin of ['http://localhost:8787', 'http://127.0.0.1:8787', 'http://[::1]:8787']) {
      const portal = await post(h, '/portal/acme', { origin });
      expect(portal.status, origin).toBe(200);
      expect(answerOf(portal.text).result.serverInfo.name).toBe('keyway-portal');
      // Past the check, the gateway looks the connection up.
      const gateway = await post(h, '/mcp/acme/users/alice/linear', { origin });
      expect(gateway.status, origin).toBe(404);
      expect((gateway.body as { error: string }).error).toBe('not_found');
    }
    const none = await post(h, '/portal/acme', {});
    expect(none.status).toBe(200);
    // The rest of the API is not an MCP endpoint: no such check there.
    const tokens = await h.call('GET', '/api/admin/tokens', {
      headers: { origin: 'http://evil.example.com' },
    });
    expect(tokens.status).toBe(200);
  });

  it('takes a public base URL’s origin exactly, with no loopback alias', async () => {
    const h = harness('https://keyway.example.com/base');
    const own = await post(h, '/portal/acme', { origin: 'https://keyway.example.com' });
    expect(own.status).toBe(200);
    for (const origin of ['http://keyway.example.com', 'http://localhost', 'https://example.com']) {
      const reply = await post(h, '/portal/acme', { origin });
      expect(reply.status, origin).toBe(403);
    }
  });

  it('without a configured base URL, takes the request’s own origin', async () => {
    const h = harness(undefined);
    // The harness sends its requests to http://keyway.test.
    expect((await post(h, '/portal/acme', { origin: 'http://keyway.test' })).status).toBe(200);
    const foreign = await post(h, '/portal/acme', { origin: 'http://evil.example.com' });
    expect(foreign.status).toBe(403);
  });

  it('originAllowed: loopback names are one server only at the same scheme and port', () => {
    expect(originAllowed(null, 'http://localhost:8787')).toBe(true);
    expect(originAllowed('http://127.0.0.5:8787', 'http://localhost:8787')).toBe(true);
    expect(originAllowed('http://localhost', 'http://127.0.0.1')).toBe(true);
    expect(originAllowed('http://localhost:80', 'http://127.0.0.1')).toBe(true);
    expect(originAllowed('http://localhost:8788', 'http://127.0.0.1:8787')).toBe(false);
    expect(originAllowed('http://localhost.:8787', 'http://127.0.0.1:8787')).toBe(false);
    expect(originAllowed('http://evil.example.com', 'http://evil.example.com:8787')).toBe(false);
    expect(originAllowed('https://a.example:443', 'https://a.example')).toBe(true);
  });
});
