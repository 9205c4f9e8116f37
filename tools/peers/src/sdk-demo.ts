import { createServer, type Server } from 'node:http';
import { listen, type VerifiedToken } from '@keyway/test-support/peers';
import { DemoInMemoryAuthProvider } from '@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js';
import { mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import express from 'express';

/**
 * The official MCP SDK's demo authorization server: its `DemoInMemoryAuthProvider` behind
 * the SDK's `mcpAuthRouter` (metadata, dynamic registration, authorize, token), as the SDK's
 * `setupAuthServer` example wires them, with strict resource checking on. Only the server
 * lifecycle is ours (the example listens on a fixed port and never closes). It signs the
 * user in without a page and issues no refresh tokens, which is what it is.
 */
export async function startSdkDemoProvider(resourceUrl: () => string): Promise<{
  issuer: string;
  verify: (token: string) => Promise<VerifiedToken | null>;
  server: Server;
}> {
  const provider = new DemoInMemoryAuthProvider(
    (resource) => resource?.toString() === resourceUrl(),
  );
  const app = express();
  const server = createServer(app);
  // The router needs the issuer, which needs the port: routes are added once it listens.
  const issuer = await listen(server);
  app.use(mcpAuthRouter({ provider, issuerUrl: new URL(issuer), scopesSupported: ['mcp:tools'] }));
  return {
    issuer,
    server,
    // The resource server and the demo share its memory: what its `/introspect` reads.
    async verify(token) {
      try {
        const info = await provider.verifyAccessToken(token);
        return info.resource?.toString() === resourceUrl() ? { scopes: info.scopes } : null;
      } catch {
        return null;
      }
    },
  };
}
