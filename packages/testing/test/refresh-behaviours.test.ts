import { describe, expect, it } from 'vitest';
import { createTestWorld, type TestWorld, type TestWorldOptions } from '../src/index.js';
import { s256 } from './pkce.js';

/*
 * The refresh behaviours of the servers people use, as switches of the world: a family
 * revoked on reuse (Notion, Atlassian), rotation with a grace window (Linear), a refresh
 * token refused at its first use once old (Miro). Driven here at the token endpoint itself;
 * packages/cli/test/server-quirks.test.ts shows what Keyway does with each.
 */

const REDIRECT = 'https://app.example/callback';

/** A world on a clock of its own, and a grant of it: registration, consent, code exchange. */
async function grantIn(options: TestWorldOptions) {
  const clock = { now: 1_800_000_000_000 };
  const world = createTestWorld({ now: () => clock.now, ...options });
  const registered = await world.fetch(`${world.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }),
  });
  const client = (await registered.json()) as { client_id: string };
  const verifier = 'v'.repeat(43);
  const challenge = await s256(verifier);
  const authorize = new URL(`${world.issuer}/oauth/authorize`);
  const params = {
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: REDIRECT,
    state: 's',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    resource: world.resourceUrl,
  };
  for (const [name, value] of Object.entries(params)) authorize.searchParams.set(name, value);
  const code = new URL(world.consent(authorize.href)).searchParams.get('code') ?? '';
  const token = (form: Record<string, string>) =>
    tokenCall(world, { client_id: client.client_id, ...form });
  const first = await token({
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT,
    code_verifier: verifier,
    resource: world.resourceUrl,
  });
  const refresh = (refreshToken: string) =>
    token({ grant_type: 'refresh_token', refresh_token: refreshToken });
  return { world, clock, first: first.body as { refresh_token: string }, refresh };
}

async function tokenCall(world: TestWorld, form: Record<string, string>) {
  const response = await world.fetch(`${world.issuer}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: response.status, body: (await response.json()) as Record<string, string> };
}

describe('refresh behaviours of the servers people use', () => {
  it('revokes the whole family when a rotated refresh token comes back (Notion)', async () => {
    const { world, first, refresh } = await grantIn({
      refreshTokenReuse: 'revoke-family',
      invalidGrantDescription: 'OAuth grant revoked',
    });
    const second = await refresh(first.refresh_token);
    expect(second.status).toBe(200);
    const replay = await refresh(first.refresh_token);
    expect([replay.status, replay.body]).toEqual([
      400,
      { error: 'invalid_grant', error_description: 'OAuth grant revoked' },
    ]);
    // The current token of the family is gone too.
    const current = await refresh(second.body.refresh_token ?? '');
    expect([current.status, current.body.error]).toEqual([400, 'invalid_grant']);
    expect(world.stats.refreshTokenReuses).toBe(1);
  });

  it('takes a rotated refresh token once more within its grace window, then says "Grant not found" (Linear)', async () => {
    const { world, clock, first, refresh } = await grantIn({
      refreshTokenReuseGraceSeconds: 30,
      invalidGrantDescription: 'Grant not found',
    });
    const second = await refresh(first.refresh_token);
    clock.now += 10_000;
    // A retry whose first answer was lost: within the window it rotates again.
    const retried = await refresh(first.refresh_token);
    expect(retried.status).toBe(200);
    expect(retried.body.refresh_token).not.toBe(second.body.refresh_token);
    const next = await refresh(retried.body.refresh_token ?? '');
    expect(next.status).toBe(200);
    clock.now += 31_000;
    const late = await refresh(first.refresh_token);
    expect([late.status, late.body]).toEqual([
      400,
      { error: 'invalid_grant', error_description: 'Grant not found' },
    ]);
    expect(world.stats.refreshTokenReuses).toBe(2);
  });

  it('refuses a refresh token at its first use once it is older than its unused lifetime (Miro)', async () => {
    const { world, clock, first, refresh } = await grantIn({
      refreshTokenUnusedLifetimeSeconds: 3600,
    });
    clock.now += 3_600_000;
    const refused = await refresh(first.refresh_token);
    expect([refused.status, refused.body.error]).toEqual([400, 'invalid_grant']);
    expect(world.stats.refreshTokensExpiredUnused).toBe(1);
    // A token used in time rotates, and its successor's lifetime starts then.
    const fresh = await grantIn({ refreshTokenUnusedLifetimeSeconds: 3600 });
    fresh.clock.now += 3_000_000;
    const used = await fresh.refresh(fresh.first.refresh_token);
    expect(used.status).toBe(200);
    fresh.clock.now += 3_000_000;
    expect((await fresh.refresh(used.body.refresh_token ?? '')).status).toBe(200);
  });
});
