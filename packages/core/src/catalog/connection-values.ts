import { type ConnectionValue, PLACEHOLDER, UNSAFE_VALUE } from './schema.js';

/*
 * The API base of one connection (docs/api.md §15): a profile's `api_base_url` whose
 * connection values — Salesforce's `instance_url`, QuickBooks' `realmId`, Atlassian's cloud
 * id — are filled from the connection's metadata. Those values come from the provider's
 * answers, not from the operator, so each is matched in full against its pattern before a
 * token is sent where it points.
 */

/** Why a connection has no API base: a value missing, or one its pattern refuses. */
export interface ConnectionValueProblem {
  name: string;
  description: string;
  missing: boolean;
}

/** The text that fills a value's place, or `null` when the value is not one it accepts. */
function placed(value: ConnectionValue, text: string): string | null {
  const pattern = new RegExp(`^(?:${value.pattern})$`, 'u');
  if (value.kind === 'segment') {
    const safe = text !== '.' && text !== '..' && text !== '' && !UNSAFE_VALUE.test(text);
    return safe && pattern.test(text) ? text : null;
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  const bare =
    url.protocol === 'https:' &&
    url.username === '' &&
    url.password === '' &&
    url.port === '' &&
    url.pathname === '/' &&
    url.search === '' &&
    url.hash === '' &&
    (text === url.origin || text === `${url.origin}/`);
  return bare && pattern.test(url.hostname) ? url.hostname : null;
}

/**
 * The API base of a connection: `template`'s placeholders filled from `metadata`, or the
 * first value missing or refused.
 */
export function connectionApiBase(
  template: string,
  values: readonly ConnectionValue[],
  metadata: Readonly<Record<string, string>> | undefined,
): { base: string } | { problem: ConnectionValueProblem } {
  const filled = new Map<string, string>();
  for (const value of values) {
    const text = metadata?.[value.name];
    const place = text === undefined ? null : placed(value, text);
    if (place === null) {
      const { name, description } = value;
      return { problem: { name, description, missing: text === undefined } };
    }
    filled.set(value.name, place);
  }
  return {
    base: template.replace(PLACEHOLDER, (whole, name: string) => filled.get(name) ?? whole),
  };
}
