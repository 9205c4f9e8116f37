import type { McpProfile } from './mcp-profiles.js';
import { BUSINESS_PROFILES } from './profiles/business.js';
import { DEVELOPER_PROFILES } from './profiles/developer.js';
import { WORKPLACE_PROFILES } from './profiles/workplace.js';
import { checkProfile, ProfileProblem } from './resolve.js';
import type { Profile } from './schema.js';

/*
 * The catalog of the `oauth2` template (docs/api.md §15): the built-in profiles and an
 * app's own (`createBroker({ profiles })`), each checked once, by id.
 */

/** The built-in profiles, as written. */
export const BUILT_IN_PROFILES = [
  ...DEVELOPER_PROFILES,
  ...WORKPLACE_PROFILES,
  ...BUSINESS_PROFILES,
];

let builtIn: Map<string, Profile> | undefined;

/**
 * The catalog: the built-in profiles, then the app's own, checked.
 *
 * @throws {TypeError} naming the profile and its field at fault, or an id given twice.
 */
export function catalogOf(own: readonly unknown[] = []): ReadonlyMap<string, Profile> {
  builtIn ??= new Map(BUILT_IN_PROFILES.map((input) => [input.id, checked(input, 'built-in')]));
  if (own.length === 0) return builtIn;
  const catalog = new Map(builtIn);
  own.forEach((input, index) => {
    const profile = checked(input, `profiles[${index}]`);
    if (catalog.has(profile.id)) {
      const where = builtIn?.has(profile.id) ? 'a built-in profile' : 'another of "profiles"';
      throw new TypeError(
        `invalid broker configuration: profiles[${index}] has the id ${JSON.stringify(profile.id)} of ${where}; ` +
          `choose another id`,
      );
    }
    catalog.set(profile.id, profile);
  });
  return catalog;
}

function checked(input: unknown, where: string): Profile {
  try {
    return checkProfile(input);
  } catch (error) {
    if (!(error instanceof ProfileProblem)) throw error;
    const id =
      typeof input === 'object' && input !== null && 'id' in input
        ? ` (${JSON.stringify(input.id)})`
        : '';
    throw new TypeError(
      `invalid broker configuration: ${where} profile${id}: ${error.path ? `"${error.path}": ` : ''}${error.message}`,
    );
  }
}

/**
 * A profile as `GET /api/admin/profiles` lists it (docs/api.md §15).
 *
 * @see [docs/api.md §15](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#15-provider-catalog)
 */
export interface ProfileView {
  id: string;
  /** `oauth2`: a classic API; `mcp`: a hosted MCP server (docs/servers.md). */
  template: 'oauth2' | 'mcp';
  label: string;
  docs_url: string;
  /** `mcp`: the day its facts were read at `docs_url`; `null` for `oauth2`. */
  checked: string | null;
  /** `mcp`: the MCP endpoint; `null` for `oauth2`. */
  resource_url: string | null;
  /** The credentials mode that works: `custom` needs an application registered by hand. */
  credentials: 'register' | 'custom';
  scopes_example: string[];
  /** The names of its parameters (`configuration.params`). */
  params: string[];
  api_base_url: string | null;
  refresh: Profile['refresh'] | 'unknown';
  /** What an operator should know, from `docs_url`. */
  notes: string[];
}

export function profileView(profile: Profile): ProfileView {
  return {
    id: profile.id,
    template: 'oauth2',
    label: profile.label,
    docs_url: profile.docs_url,
    checked: null,
    resource_url: null,
    credentials: 'custom',
    scopes_example: profile.scopes_example,
    params: profile.params.map((param) => param.name),
    api_base_url: profile.api_base_url,
    refresh: profile.refresh,
    notes: profile.notes,
  };
}

/** An `mcp` profile as `GET /api/admin/profiles` lists it. */
export function mcpProfileView(profile: McpProfile): ProfileView {
  return {
    id: profile.id,
    template: 'mcp',
    label: profile.label,
    docs_url: profile.docs_url,
    checked: profile.checked,
    resource_url: profile.resource_url,
    credentials: profile.credentials,
    scopes_example: profile.scopes_example,
    params: [],
    api_base_url: null,
    refresh: profile.refresh,
    notes: profile.notes,
  };
}
