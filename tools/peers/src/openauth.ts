import type { Server } from 'node:http';
import { serveFetch } from '@keyway/test-support/peers';
import { issuer as openAuthIssuer } from '@openauthjs/openauth';
import { MemoryStorage } from '@openauthjs/openauth/storage/memory';
import { createSubjects } from '@openauthjs/openauth/subject';
import { z } from 'zod';

/** The one kind of subject the issuer signs in: a user by id. */
const subjects = createSubjects({ user: z.object({ id: z.string() }) });

/**
 * OpenAuth (`@openauthjs/openauth`, the most used standalone TypeScript OAuth server) as a
 * deployment writes it: an `issuer` with in-memory storage and one sign-in provider. The
 * provider is ours and signs `alice` in without a page (OpenAuth's own providers need an
 * email or an upstream account); everything the issuer does with the result (codes, PKCE,
 * JWT access tokens, rotating refresh tokens, its metadata) is OpenAuth's own. Its metadata
 * does not advertise `code_challenge_methods_supported` although it checks S256, and its
 * token answers carry no `token_type`: the behaviours that broke connections in the field.
 */
export async function startOpenAuth(): Promise<{ issuer: string; server: Server }> {
  const app = openAuthIssuer({
    subjects,
    storage: MemoryStorage(),
    providers: {
      alice: {
        type: 'alice',
        init(route, ctx) {
          route.get('/authorize', async (c) => ctx.success(c, { id: 'alice' }));
        },
      },
    },
    success: async (response, input) => response.subject('user', { id: String(input.id) }),
  });
  const { server, origin } = await serveFetch((request) => app.fetch(request));
  return { issuer: origin, server };
}
