/**
 * Classification of IP addresses for the server-side request forgery guard. Pure: no DNS,
 * no sockets. A host name is checked by resolving it elsewhere (see `createNodeFetch` in
 * `@keyway/http`) and passing every address here.
 */

/** Why an address is not publicly routable, or `public`. */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared' // 100.64.0.0/10, carrier-grade NAT (RFC 6598)
  | 'link-local'
  | 'unique-local' // fc00::/7 (RFC 4193)
  | 'multicast'
  | 'reserved' // documentation, benchmarking, protocol assignments, future use, broadcast
  | 'invalid';

/** The four octets of a dotted-quad IPv4 address, or `null`. */
function parseIPv4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const octets = parts.map((part) => (/^(0|[1-9][0-9]{0,2})$/.test(part) ? Number(part) : -1));
  return octets.every((octet) => octet >= 0 && octet <= 255) ? octets : null;
}

/** The eight 16-bit groups of an IPv6 address (brackets and zone removed), or `null`. */
function parseIPv6(text: string): number[] | null {
  let body = text.replace(/^\[|\]$/g, '').split('%')[0] as string;
  const groups: number[] = [];
  // An embedded IPv4 tail (::ffff:127.0.0.1) becomes two groups.
  const tail = body.match(/^(.*:)(\d+\.\d+\.\d+\.\d+)$/);
  let extra: number[] = [];
  if (tail) {
    const v4 = parseIPv4(tail[2] as string);
    if (v4 === null) return null;
    extra = [
      ((v4[0] as number) << 8) | (v4[1] as number),
      ((v4[2] as number) << 8) | (v4[3] as number),
    ];
    body = (tail[1] as string).endsWith('::')
      ? (tail[1] as string)
      : (tail[1] as string).slice(0, -1);
  }
  const halves = body.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string) =>
    part === ''
      ? []
      : part.split(':').map((group) => (/^[0-9a-f]{1,4}$/i.test(group) ? parseInt(group, 16) : -1));
  const head = parse(halves[0] as string);
  const rest = halves.length === 2 ? parse(halves[1] as string) : [];
  if ([...head, ...rest].some((group) => group < 0)) return null;
  const known = head.length + rest.length + extra.length;
  if (halves.length === 2) {
    if (known > 7) return null;
    groups.push(...head, ...new Array<number>(8 - known).fill(0), ...rest, ...extra);
  } else {
    if (known !== 8) return null;
    groups.push(...head, ...extra);
  }
  return groups;
}

type Rule = readonly [cidr: string, kind: AddressClass | 'embedded'];

/**
 * The IANA IPv4 Special-Purpose Address Registry (RFC 6890 and later), entries that are not
 * globally reachable. Reachable ones (192.31.196.0/24 AS112, 192.52.193.0/24 AMT,
 * 192.175.48.0/24 AS112 direct delegation) stay public; the whole 192.0.0.0/24 is refused,
 * including its anycast /32s, where no OAuth server lives.
 */
const IPV4_RULES: readonly Rule[] = [
  ['0.0.0.0/8', 'unspecified'], // "this network"
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared'], // carrier-grade NAT (RFC 6598)
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'], // IETF protocol assignments (DS-Lite, NAT64 discovery, …)
  ['192.0.2.0/24', 'reserved'], // TEST-NET-1
  ['192.88.99.0/24', 'reserved'], // deprecated 6to4 relay anycast (RFC 7526)
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'], // benchmarking
  ['198.51.100.0/24', 'reserved'], // TEST-NET-2
  ['203.0.113.0/24', 'reserved'], // TEST-NET-3
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'], // future use, and 255.255.255.255 broadcast
];

/**
 * The IANA IPv6 Special-Purpose Address Registry, plus the rule that a public address is
 * global unicast (2000::/3): anything else not named here is refused as `reserved`.
 * `embedded`: the address carries an IPv4 address that is what a socket reaches, and that
 * decides (IPv4-mapped, IPv4-compatible, NAT64 well-known prefix, 6to4).
 */
const IPV6_RULES: readonly Rule[] = [
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::ffff:0:0/96', 'embedded'], // IPv4-mapped
  ['::ffff:0:0:0/96', 'reserved'], // IPv4-translated (RFC 6145)
  ['::/96', 'embedded'], // deprecated IPv4-compatible
  ['64:ff9b::/96', 'embedded'], // NAT64 well-known prefix (RFC 6052)
  ['64:ff9b:1::/48', 'private'], // local-use IPv4/IPv6 translation (RFC 8215)
  ['100::/64', 'reserved'], // discard-only (RFC 6666)
  ['100:0:0:1::/64', 'reserved'], // dummy prefix (RFC 9780)
  ['2001::/23', 'reserved'], // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHIDv2, …
  ['2001:db8::/32', 'reserved'], // documentation
  ['2002::/16', 'embedded'], // 6to4
  ['3fff::/20', 'reserved'], // documentation (RFC 9637)
  ['5f00::/16', 'reserved'], // SRv6 SIDs (RFC 9602)
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'link-local'], // deprecated site-local
  ['ff00::/8', 'multicast'],
];

/** An address as a number, of 32 (IPv4) or 128 (IPv6) bits. */
function ipv4Value(octets: readonly number[]): bigint {
  return octets.reduce((value, octet) => (value << 8n) | BigInt(octet), 0n);
}

function ipv6Value(groups: readonly number[]): bigint {
  return groups.reduce((value, group) => (value << 16n) | BigInt(group), 0n);
}

interface CompiledRule {
  network: bigint;
  mask: bigint;
  kind: AddressClass | 'embedded';
}

function compile(rules: readonly Rule[], bits: 32 | 128): CompiledRule[] {
  const full = (1n << BigInt(bits)) - 1n;
  return rules.map(([cidr, kind]) => {
    const [address, length] = cidr.split('/') as [string, string];
    const value =
      bits === 32
        ? ipv4Value(parseIPv4(address) as number[])
        : ipv6Value(parseIPv6(address) as number[]);
    const mask = full ^ ((1n << BigInt(bits - Number(length))) - 1n);
    return { network: value & mask, mask, kind };
  });
}

const IPV4 = compile(IPV4_RULES, 32);
const IPV6 = compile(IPV6_RULES, 128);

function matching(rules: readonly CompiledRule[], value: bigint): CompiledRule | undefined {
  return rules.find((rule) => (value & rule.mask) === rule.network);
}

function classifyIPv4(octets: number[]): AddressClass {
  const rule = matching(IPV4, ipv4Value(octets));
  return rule === undefined || rule.kind === 'embedded' ? 'public' : rule.kind;
}

function embeddedIPv4(value: bigint, shift: bigint): number[] {
  const v4 = Number((value >> shift) & 0xffffffffn);
  return [v4 >>> 24, (v4 >>> 16) & 0xff, (v4 >>> 8) & 0xff, v4 & 0xff];
}

function classifyIPv6(groups: number[]): AddressClass {
  const value = ipv6Value(groups);
  const rule = matching(IPV6, value);
  if (rule?.kind === 'embedded') {
    // 6to4 carries the IPv4 address in bits 16–47; the others in the last 32 bits.
    return classifyIPv4(embeddedIPv4(value, groups[0] === 0x2002 ? 80n : 0n));
  }
  if (rule !== undefined) return rule.kind;
  // Only 2000::/3 is allocated as global unicast.
  return (groups[0] as number) >> 13 === 1 ? 'public' : 'reserved';
}

/** A parsed IP address: four octets, or eight 16-bit groups. */
export type ParsedAddress = { version: 4; octets: number[] } | { version: 6; groups: number[] };

/** Parses an IPv4 dotted quad or an IPv6 address (brackets and zone allowed), or `null`. */
export function parseIpAddress(text: string): ParsedAddress | null {
  const octets = parseIPv4(text);
  if (octets !== null) return { version: 4, octets };
  const groups = text.includes(':') ? parseIPv6(text) : null;
  return groups === null ? null : { version: 6, groups };
}

/** Whether a string is an IP literal (IPv4 dotted quad or IPv6, brackets allowed). */
export function isIpLiteral(host: string): boolean {
  return parseIPv4(host) !== null || (host.includes(':') && parseIPv6(host) !== null);
}

/**
 * Classifies an IP address. Anything other than `public` is refused by the outbound guard
 * unless its host is explicitly allowed.
 *
 * @example
 * classifyAddress('169.254.169.254'); // 'link-local' (cloud metadata services)
 * classifyAddress('[::ffff:127.0.0.1]'); // 'loopback'
 * classifyAddress('93.184.215.14'); // 'public'
 */
export function classifyAddress(address: string): AddressClass {
  const v4 = parseIPv4(address);
  if (v4 !== null) return classifyIPv4(v4);
  const v6 = address.includes(':') ? parseIPv6(address) : null;
  return v6 === null ? 'invalid' : classifyIPv6(v6);
}
