import { describe, expect, it } from 'vitest';
import { classifyAddress, isIpLiteral } from '../src/platform/address.js';

describe('classifyAddress()', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['[::1]', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['[::]', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['[::ffff:127.0.0.1]', 'loopback'],
    ['[::ffff:7f00:1]', 'loopback'],
    ['[::ffff:10.1.2.3]', 'private'],
    ['[::ffff:169.254.169.254]', 'link-local'],
    ['[::127.0.0.1]', 'loopback'],
    ['[64:ff9b::a00:1]', 'private'],
    ['[2002:7f00:1::]', 'loopback'],
    ['[2002:a9fe:a9fe::1]', 'link-local'],
    ['[fc00::1]', 'unique-local'],
    ['[fd12:3456::1]', 'unique-local'],
    ['[fe80::1]', 'link-local'],
    ['[fe80::1%eth0]', 'link-local'],
    ['[ff02::1]', 'multicast'],
    ['[2001:db8::1]', 'reserved'],
    ['8.8.8.8', 'public'],
    ['172.32.0.1', 'public'],
    ['100.128.0.1', 'public'],
    ['[2606:4700:4700::1111]', 'public'],
    ['[::ffff:8.8.8.8]', 'public'],
    ['example.com', 'invalid'],
    ['1.2.3', 'invalid'],
    ['01.2.3.4', 'invalid'],
    ['[1::2::3]', 'invalid'],
    ['[1:2:3:4:5:6:7:8:9]', 'invalid'],
  ])('classifies %s as %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  // The rest of the IANA special-purpose registries.
  it.each([
    ['192.88.99.1', 'reserved'], // deprecated 6to4 relay anycast
    ['192.0.0.9', 'reserved'], // IETF protocol assignments
    ['192.0.0.170', 'reserved'],
    ['198.19.255.255', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.200', 'reserved'],
    ['[::ffff:0:7f00:1]', 'reserved'], // IPv4-translated
    ['[::ffff:0:808:808]', 'reserved'],
    ['[64:ff9b:1::a00:1]', 'private'], // local-use translation, whatever it embeds
    ['[64:ff9b:1::808:808]', 'private'],
    ['[64:ff9b::808:808]', 'public'], // the well-known NAT64 prefix reaches 8.8.8.8
    ['[64:ff9b::7f00:1]', 'loopback'],
    ['[2001::1]', 'reserved'], // Teredo
    ['[2001:0:4136:e378:8000:63bf:3fff:fdd2]', 'reserved'],
    ['[2001:2::1]', 'reserved'], // benchmarking
    ['[2001:1::1]', 'reserved'],
    ['[2001:1ff:ffff::1]', 'reserved'], // end of 2001::/23
    ['[2001:200::1]', 'public'], // just past it
    ['[3fff::1]', 'reserved'], // documentation (RFC 9637)
    ['[3fff:fff:ffff::1]', 'reserved'],
    ['[3ffe::1]', 'public'],
    ['[5f00::1]', 'reserved'], // SRv6 SIDs
    ['[100::1]', 'reserved'], // discard-only
    ['[100:0:0:1::1]', 'reserved'], // dummy prefix
    ['[4000::1]', 'reserved'], // outside 2000::/3
    ['[1234::1]', 'reserved'],
    ['[2002:808:808::1]', 'public'],
    ['[2002:c0a8:101::1]', 'private'],
    ['192.31.196.1', 'public'], // AS112, globally reachable
    ['[2620:4f:8000::1]', 'public'],
  ])('classifies %s as %s (IANA special-purpose registries)', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  it('tells IP literals from host names', () => {
    expect(isIpLiteral('127.0.0.1')).toBe(true);
    expect(isIpLiteral('[::1]')).toBe(true);
    expect(isIpLiteral('mcp.example.com')).toBe(false);
  });
});
