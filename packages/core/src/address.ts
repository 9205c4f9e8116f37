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

function classifyIPv4([a, b, c]: number[]): AddressClass {
  const x = a as number;
  const y = b as number;
  if (x === 0) return 'unspecified'; // 0.0.0.0/8, "this network"
  if (x === 127) return 'loopback';
  if (x === 10 || (x === 172 && y >= 16 && y <= 31) || (x === 192 && y === 168)) return 'private';
  if (x === 100 && y >= 64 && y <= 127) return 'shared';
  if (x === 169 && y === 254) return 'link-local';
  if (x >= 224 && x <= 239) return 'multicast';
  if (
    x >= 240 || // future use and 255.255.255.255
    (x === 192 && y === 0 && (c === 0 || c === 2)) || // protocol assignments, TEST-NET-1
    (x === 198 && (y === 18 || y === 19)) || // benchmarking
    (x === 198 && y === 51 && c === 100) || // TEST-NET-2
    (x === 203 && y === 0 && c === 113) // TEST-NET-3
  ) {
    return 'reserved';
  }
  return 'public';
}

function embeddedIPv4(groups: number[], from: number): number[] {
  const hi = groups[from] as number;
  const lo = groups[from + 1] as number;
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff];
}

function classifyIPv6(groups: number[]): AddressClass {
  const [g0, g1, g2, g3, g4, g5] = groups as [number, number, number, number, number, number];
  const zeroTo = (n: number) => groups.slice(0, n).every((group) => group === 0);
  if (zeroTo(8)) return 'unspecified';
  if (zeroTo(7) && groups[7] === 1) return 'loopback';
  // IPv4-mapped ::ffff:a.b.c.d and the deprecated IPv4-compatible ::a.b.c.d: the IPv4
  // address is what a socket reaches, so it decides.
  if (zeroTo(5) && g5 === 0xffff) return classifyIPv4(embeddedIPv4(groups, 6));
  if (zeroTo(6)) return classifyIPv4(embeddedIPv4(groups, 6));
  // NAT64 64:ff9b::/96 and 6to4 2002::/16 reach the embedded IPv4 address too.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return classifyIPv4(embeddedIPv4(groups, 6));
  }
  if (g0 === 0x2002) return classifyIPv4(embeddedIPv4(groups, 1));
  if ((g0 & 0xfe00) === 0xfc00) return 'unique-local';
  if ((g0 & 0xffc0) === 0xfe80 || (g0 & 0xffc0) === 0xfec0) return 'link-local';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  if ((g0 === 0x2001 && g1 === 0xdb8) || (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0)) {
    return 'reserved'; // documentation, discard-only
  }
  return 'public';
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
