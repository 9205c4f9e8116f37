import { describe, expect, it } from 'vitest';
import { classifyAddress, isIpLiteral } from '../src/index.js';

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

  it('tells IP literals from host names', () => {
    expect(isIpLiteral('127.0.0.1')).toBe(true);
    expect(isIpLiteral('[::1]')).toBe(true);
    expect(isIpLiteral('mcp.example.com')).toBe(false);
  });
});
