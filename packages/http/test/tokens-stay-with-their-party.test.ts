import type { TestWorld } from '@keyway/testing';
import { describe, expect, it } from 'vitest';
import { storageFactories } from './harness.js';
import {
  APP,
  CALLBACK,
  EVIL_MCP,
  type ProviderState,
  probePerTest,
  twoWorlds,
  VICTIM,
} from './probe-support.js';

/*
 * A connection's tokens go only to the party they were issued for (docs/security.md): its
 * refresh, revocation and probe follow the authorization that issued them, not where its
 * provider points now, and a re-pointed provider sends nothing anywhere.
 */

describe.each(storageFactories)(
  'a token goes only to the party it was issued for ($name storage)',
  (factory) => {
    const suite = probePerTest(factory, { allowedRedirects: [APP] });

    describe('refresh and revocation follow the connection, not the provider', () => {
      it('never sends a connection’s refresh token to a server the provider was re-pointed at by a provider-scoped token', async () => {
        const worlds = twoWorlds(() => suite.h.now);
        await suite.harness(worlds.fetch);
        const created = await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
        });
        expect(created.status).toBe(201);
        expect((await suite.connect(worlds.legit, VICTIM)).status).toBe(200);
        const victimTokens = await suite.h.storedTokens(VICTIM);
        const legitSecret = worlds.legit.clients.get(victimTokens.party.client_id)?.client_secret;

        // A token that manages only the provider, and cannot read the victim's connection.
        const attacker = await suite.h.mint('mallory', ['linear']);
        expect(
          (await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`, { token: attacker }))
            .status,
        ).toBe(403);
        const repointed = await suite.h.call('PUT', '/api/admin/providers/linear', {
          token: attacker,
          body: { template: 'mcp', configuration: { resource_url: worlds.evil.resourceUrl } },
        });
        expect(repointed.status).toBe(200);
        expect(repointed.body.authorization_server.issuer).toBe('https://auth.evil.example.test');
        expect(repointed.body.last_party_change).toEqual({
          at: new Date(suite.h.now).toISOString(),
          previous_issuer: 'https://auth.example.test',
          previous_client_id: victimTokens.party.client_id,
          previous_resource_url: worlds.legit.resourceUrl,
          connections_reauthorization_required: 1,
        });
        expect(suite.events.map((e) => `${e.type} ${e.resource}`)).toContain(
          `connection.reauthorization_required ${VICTIM}`,
        );

        // The victim's app asks for a fresh token: nothing goes anywhere, the connection
        // must be authorized again.
        const refreshed = await suite.h.call(
          'GET',
          `/api/oauth/credentials/${VICTIM}?force_refresh=true`,
        );
        expect(refreshed.status).toBe(409);
        expect(refreshed.body.error).toBe('connection_not_active');
        const view = await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`);
        expect(view.body.status).toBe('error');
        expect(view.body.error).toEqual({
          code: 'reauthorization_required',
          description:
            'the provider moved to another authorization server or client since this connection was authorized: authorize again',
        });
        expect(worlds.evil.stats.refreshes).toBe(0);
        expect(worlds.legit.stats.refreshes).toBe(0);

        // Deleting the connection revokes at the server the tokens came from, never the new one.
        expect((await suite.h.call('DELETE', `/api/oauth/connections/${VICTIM}`)).status).toBe(204);
        expect(worlds.evil.stats.revocations).toBe(0);
        expect(worlds.legit.stats.revocations).toBe(2);
        expect(worlds.legit.isValidAccessToken(victimTokens.access_token)).toBe(false);

        // Nothing of the victim's grant or the old client ever reached the attacker's servers.
        const carried = JSON.stringify(worlds.toEvil);
        for (const secret of [
          victimTokens.refresh_token as string,
          victimTokens.access_token,
          victimTokens.party.client_id,
          legitSecret as string,
        ]) {
          expect(carried).not.toContain(secret);
        }
        expect(worlds.toEvil.some((sent) => /\/oauth\/(token|revoke)$/.test(sent.url))).toBe(false);
      });

      it('refuses to refresh when the provider’s client changed behind the connection’s back, sending nothing', async () => {
        const worlds = twoWorlds(() => suite.h.now);
        await suite.harness(worlds.fetch);
        await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
        });
        await suite.connect(worlds.legit, VICTIM);
        // Another instance (or an older version) swapped the client without marking anything.
        const record = await suite.h.storage.getProvider('linear');
        const state = structuredClone(record?.state) as unknown as ProviderState;
        (state.registrations['https://auth.example.test'] as { client_id: string }).client_id =
          'someone-else';
        expect(
          await suite.h.storage.compareAndSetProvider(
            { ...(record as NonNullable<typeof record>), state: state as never, version: 99 },
            record?.version as number,
          ),
        ).toBe(true);
        const requestsBefore = worlds.legit.requests.length;
        const refreshed = await suite.h.call(
          'GET',
          `/api/oauth/credentials/${VICTIM}?force_refresh=true`,
        );
        expect(refreshed.status).toBe(409);
        expect(refreshed.body.error).toBe('reauthorization_required');
        expect(worlds.legit.requests.length).toBe(requestsBefore);
        expect(
          (await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.error.code,
        ).toBe('reauthorization_required');
      });

      it('does not exchange a code at a server the provider moved to between consent and callback', async () => {
        const worlds = twoWorlds(() => suite.h.now);
        await suite.harness(worlds.fetch);
        await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
        });
        const started = await suite.h.call('POST', '/api/oauth/authorize/linear', {
          body: { connection_id: VICTIM },
        });
        const back = new URL(worlds.legit.consent(started.body.authorization_url));
        await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: { template: 'mcp', configuration: { resource_url: worlds.evil.resourceUrl } },
        });
        const reply = await suite.h.call('GET', `${back.pathname}${back.search}`, { token: null });
        expect(reply.status).toBe(200);
        expect(reply.text).toContain('Not connected');
        expect(worlds.legit.stats.codeExchanges).toBe(0);
        expect(worlds.toEvil.some((sent) => sent.url.endsWith('/oauth/token'))).toBe(false);
        expect((await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe(
          'error',
        );
      });

      it('keeps refreshing at the same server after a PUT that changes neither server nor client', async () => {
        const worlds = twoWorlds(() => suite.h.now);
        await suite.harness(worlds.fetch);
        await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: { template: 'mcp', configuration: { resource_url: worlds.legit.resourceUrl } },
        });
        await suite.connect(worlds.legit, VICTIM);
        const again = await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: {
            template: 'mcp',
            label: 'Renamed',
            configuration: { resource_url: worlds.legit.resourceUrl },
          },
        });
        expect(again.body.last_party_change).toBeNull();
        const refreshed = await suite.h.call(
          'GET',
          `/api/oauth/credentials/${VICTIM}?force_refresh=true`,
        );
        expect(refreshed.status).toBe(200);
        expect(worlds.legit.stats.refreshes).toBe(1);
      });
    });

    describe('the probe sends a token only to the resource it was authorized for', () => {
      /** What each registration mode's provider body is, for the honest server and the attacker. */
      const modes = {
        custom: (world: TestWorld, resourceUrl: string, withSecret: boolean) => {
          const client = world.clients.get('operator-client');
          return {
            template: 'mcp',
            configuration: { resource_url: resourceUrl },
            credentials: {
              mode: 'custom',
              client_id: 'operator-client',
              // The attacker omits the secret: Keyway keeps the stored one for the same client.
              ...(withSecret ? { client_secret: client?.client_secret } : {}),
            },
          };
        },
        metadata_document: (_world: TestWorld, resourceUrl: string) => ({
          template: 'mcp',
          configuration: { resource_url: resourceUrl },
        }),
      } as const;

      it.each(['custom', 'metadata_document'] as const)(
        'puts the connections of a provider re-pointed at another MCP server (same issuer, same %s client) in reauthorization_required, and the probe sends nothing there',
        async (mode) => {
          const { world, evil, fetch } = suite.worldWithEvilResource({
            clientIdMetadataDocuments: mode === 'metadata_document',
            dynamicRegistration: mode !== 'metadata_document',
          });
          await suite.harness(fetch);
          world.preregister({
            client_id: 'operator-client',
            client_secret: 'operator-secret-0123456789',
            token_endpoint_auth_method: 'client_secret_basic',
            redirect_uris: [CALLBACK],
          });
          const created = await suite.h.call('PUT', '/api/admin/providers/linear', {
            body: modes[mode](world, world.resourceUrl, true),
          });
          expect(created.status).toBe(201);
          expect(created.body.credentials.registration).toBe(
            mode === 'custom' ? 'manual' : 'metadata_document',
          );
          expect((await suite.connect(world, VICTIM)).status).toBe(200);
          const victim = await suite.h.storedTokens(VICTIM);
          expect(victim.party.resource_url).toBe(world.resourceUrl);

          // A token that manages only the provider re-points it at its own MCP server, which
          // names the same authorization server: issuer and client stay the same.
          const attacker = await suite.h.mint('mallory', ['linear']);
          const repointed = await suite.h.call('PUT', '/api/admin/providers/linear', {
            token: attacker,
            body: modes[mode](world, EVIL_MCP, false),
          });
          expect(repointed.status).toBe(200);
          expect(repointed.body.authorization_server.issuer).toBe(world.issuer);
          expect(repointed.body.credentials.client_id).toBe(victim.party.client_id);
          expect(repointed.body.last_party_change).toEqual({
            at: new Date(suite.h.now).toISOString(),
            previous_issuer: world.issuer,
            previous_client_id: victim.party.client_id,
            previous_resource_url: world.resourceUrl,
            connections_reauthorization_required: 1,
          });
          expect(suite.events.map((e) => `${e.type} ${e.resource}`)).toContain(
            `connection.reauthorization_required ${VICTIM}`,
          );
          const view = await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`);
          expect(view.body.status).toBe('error');
          expect(view.body.error).toEqual({
            code: 'reauthorization_required',
            description:
              'the provider was re-pointed at another MCP endpoint since this connection was authorized: authorize again',
          });

          const probe = await suite.h.call('POST', `/api/oauth/probe/${VICTIM}`);
          expect(probe.status).toBe(409);
          expect(probe.body.error).toBe('connection_not_active');
          const carried = JSON.stringify(evil.received);
          expect(carried).not.toContain(victim.access_token);
          expect(evil.received.every((sent) => sent.authorization === null)).toBe(true);
        },
      );

      it('probes the endpoint of the authorization even when the provider was re-pointed behind the connection’s back', async () => {
        const { world, evil, fetch } = suite.worldWithEvilResource();
        await suite.harness(fetch);
        expect(
          (
            await suite.h.call('PUT', '/api/admin/providers/linear', {
              body: { template: 'mcp', configuration: { resource_url: world.resourceUrl } },
            })
          ).status,
        ).toBe(201);
        expect((await suite.connect(world, VICTIM)).status).toBe(200);
        const victim = await suite.h.storedTokens(VICTIM);
        // Another instance (or an older version) re-pointed the provider without marking its
        // connections: the stored state names the attacker's server.
        const record = await suite.h.storage.getProvider('linear');
        if (record === null) throw new Error('no provider');
        const state = structuredClone(record.state) as { configuration: { resource_url: string } };
        state.configuration.resource_url = EVIL_MCP;
        expect(
          await suite.h.storage.compareAndSetProvider(
            { ...record, state, version: record.version + 1 },
            record.version,
          ),
        ).toBe(true);

        const probe = await suite.h.call('POST', `/api/oauth/probe/${VICTIM}`);
        expect(probe.status).toBe(200);
        expect(probe.body.ok).toBe(true);
        expect(world.stats.mcpCalls).toBeGreaterThan(0);
        expect(evil.received).toEqual([]);
        expect(JSON.stringify(probe.body)).not.toContain(victim.access_token);
      });

      it('keeps the connections of a PUT that changes neither resource, server nor client', async () => {
        const { world, fetch } = suite.worldWithEvilResource();
        await suite.harness(fetch);
        const body = { template: 'mcp', configuration: { resource_url: world.resourceUrl } };
        await suite.h.call('PUT', '/api/admin/providers/linear', { body });
        await suite.connect(world, VICTIM);
        const again = await suite.h.call('PUT', '/api/admin/providers/linear', {
          body: { ...body, label: 'Renamed' },
        });
        expect(again.body.last_party_change).toBeNull();
        expect((await suite.h.call('GET', `/api/oauth/connections/${VICTIM}`)).body.status).toBe(
          'active',
        );
        expect((await suite.h.call('POST', `/api/oauth/probe/${VICTIM}`)).body.ok).toBe(true);
      });
    });
  },
);
