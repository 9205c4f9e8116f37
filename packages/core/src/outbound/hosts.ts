/* Host names as the allow list and the guard compare them. */

/** A host name in the form allow lists and the guard compare: lower case, no brackets. */
export function normalizeHost(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
}

/** The allowed hosts of the configuration, normalized for {@link assertOutboundUrl}. */
export function allowedHostSet(hosts: readonly string[] = []): ReadonlySet<string> {
  return new Set(hosts.map(normalizeHost));
}
