import { createBroker, rootPrincipal } from '@keyway/core';
import { memoryStorage } from '@keyway/store-memory';
import { expect, it } from 'vitest';
import { createTestWorld } from '../src/index.js';

// The example of docs/providers.md, "Unit-testing with @keyway/testing", as written there.
it('runs the documented example', async () => {
  const world = createTestWorld({
    challengeScope: 'read',
    tokenEndpointAuthMethods: ['client_secret_post'],
  });
  const broker = createBroker({
    rootKey: 'a-root-key-of-at-least-32-characters!',
    storage: memoryStorage(),
    vaultKeys: ['AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8'],
    baseUrl: 'https://keyway.example.test',
    providerManagement: true,
    fetch: world.fetch,
  });

  const { provider } = await broker.providers.put(rootPrincipal(), 'linear', {
    template: 'mcp',
    configuration: { resource_url: world.resourceUrl },
  });
  expect(provider.credentials.token_endpoint_auth_method).toBe('client_secret_post');
  expect(world.stats.registrations).toBe(1);
  await broker.close();
});
