import { memoryStorage } from '@keyway/store-memory';
import { describe, expect, it } from 'vitest';
import { BASE, brokerPerTest } from '../support/spec.js';

/*
 * Clients whose `client_id` is the URL of their metadata document (docs/api.md §17): Keyway
 * reads it through the guarded fetch and trusts it only when it names itself, comes from
 * that URL without a redirect, and is small. The documents here come from a transport of
 * the test's own.
 */

const DOCUMENT = 'https://assistant.example.test/oauth/client.json';

describe('client ID metadata documents', () => {
  const spec = brokerPerTest();

  /** A broker whose outbound requests reach `serve`; `reads` counts them. */
  function brokerServing(serve: (url: string) => Response) {
    const seen = { reads: 0 };
    const broker = spec.open(memoryStorage(), {
      signIn: { methods: ['token'] },
      fetch: async (input) => {
        seen.reads++;
        return serve(String(input));
      },
    });
    return { broker, seen };
  }

  const request = (clientId: string, redirectUri = 'https://assistant.example.test/callback') =>
    new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirectUri,
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      resource: `${BASE}/mcp/acme/users/alice/linear`,
    });

  const document = (fields: Record<string, unknown> = {}) =>
    Response.json({
      client_id: DOCUMENT,
      client_name: 'Assistant',
      redirect_uris: ['https://assistant.example.test/callback'],
      token_endpoint_auth_method: 'none',
      ...fields,
    });

  it('trusts a document that names itself, shows the host it proves, and reads it again only after a while', async () => {
    const { broker, seen } = brokerServing(() => document());
    const first = await broker.signIn.authorize(request(DOCUMENT), null);
    expect(first.step).toMatchObject({
      kind: 'sign_in',
      client: {
        client_id: DOCUMENT,
        name: 'Assistant',
        verified_host: 'assistant.example.test',
        returns_to: 'assistant.example.test',
      },
    });
    await broker.signIn.authorize(request(DOCUMENT), null);
    expect(seen.reads).toBe(1);
    spec.now += 5 * 60 * 1000 + 1;
    await broker.signIn.authorize(request(DOCUMENT), null);
    expect(seen.reads).toBe(2);
  });

  it.each([
    [
      'names another client_id',
      () => document({ client_id: 'https://other.example.test/client.json' }),
      "the client's metadata document does not name its own URL as client_id.",
    ],
    [
      'answers a redirect',
      () =>
        new Response(null, {
          status: 302,
          headers: { location: 'https://assistant.example.test/elsewhere.json' },
        }),
      "the client's metadata document could not be read: https://assistant.example.test: the answer was a redirect.",
    ],
    [
      'answers 404',
      () => new Response('not found', { status: 404 }),
      "the client's metadata document answered HTTP 404.",
    ],
    [
      'is not JSON',
      () => new Response('<html>', { status: 200 }),
      "the client's metadata document is not a JSON object.",
    ],
    [
      'is larger than 16 KiB',
      () => document({ client_name: 'x'.repeat(17_000) }),
      "the client's metadata document is larger than 16384 bytes.",
    ],
    [
      'authenticates with a secret',
      () => document({ token_endpoint_auth_method: 'client_secret_basic' }),
      'the client authenticates with "client_secret_basic"; Keyway takes public clients ("none").',
    ],
    [
      'names a javascript: redirect URI',
      () => document({ redirect_uris: ['javascript:alert(1)'] }),
      "the client's metadata document: redirect_uris[0] must not use the javascript: scheme.",
    ],
  ])('answers a page, never a redirect, for a document that %s', async (_, serve, message) => {
    const { broker } = brokerServing(serve);
    const answer = await broker.signIn.authorize(request(DOCUMENT), null);
    expect(answer.step).toEqual({ kind: 'error', title: 'This client cannot sign in', message });
  });

  it.each([
    [
      'http://assistant.example.test/client.json',
      'This client cannot sign in',
      'the client is unknown (it may have been forgotten after 30 days unused).',
    ],
    [
      'https://assistant.example.test',
      'This client cannot sign in',
      'the client_id URL has no path.',
    ],
    [
      'https://assistant.example.test/a/../client.json',
      'This client cannot sign in',
      'the client_id URL is not in its normal form.',
    ],
    [
      'https://user@assistant.example.test/client.json',
      'This client cannot sign in',
      'the client_id URL contains user info.',
    ],
  ])('refuses %s as a client_id without reading anything', async (clientId, title, message) => {
    const { broker, seen } = brokerServing(() => document());
    const answer = await broker.signIn.authorize(request(clientId), null);
    expect(answer.step).toEqual({ kind: 'error', title, message });
    expect(seen.reads).toBe(0);
  });

  it('keeps the document’s redirect URIs: another one gets a page', async () => {
    const { broker } = brokerServing(() => document());
    const answer = await broker.signIn.authorize(
      request(DOCUMENT, 'https://attacker.example.test/callback'),
      null,
    );
    expect(answer.step).toMatchObject({
      kind: 'error',
      title: 'The redirect URI is not the client’s',
    });
  });
});
