import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { classifyAddress, normalizeHost, OutboundError, type Transport } from '@keyway/core';
import { streamOf } from './streams.js';

/** Options of {@link createNodeFetch}. */
export interface NodeFetchOptions {
  /** Hosts whose addresses are not checked (development and tests), as in the broker. */
  allowedHosts?: readonly string[];
  /** The resolver; default `dns.lookup`. Injected by tests to map names to addresses. */
  resolve?: (hostname: string) => Promise<LookupAddress[]>;
}

const defaultResolve = (hostname: string) =>
  new Promise<LookupAddress[]>((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    );
  });

function headersOf(raw: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

function bodyBytes(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('createNodeFetch() sends string, bytes or URLSearchParams bodies only');
}

/**
 * A `fetch`-compatible transport for Node that closes the gap a plain `fetch` leaves in the
 * server-side request forgery guard: it resolves the host name itself, refuses when any
 * resolved address is not publicly routable (loopback, private, link-local, CGNAT,
 * multicast, unspecified, IPv4-mapped…), and connects to exactly the addresses it checked,
 * so a second DNS answer cannot swap in an internal address (DNS rebinding). Pass it as the
 * broker's `fetch` option on Node.
 *
 * @example
 * const broker = createBroker({ rootKey, storage, vaultKeys, fetch: createNodeFetch() });
 */
export function createNodeFetch(options: NodeFetchOptions = {}): Transport {
  const allowed = new Set((options.allowedHosts ?? []).map(normalizeHost));
  const resolve = options.resolve ?? defaultResolve;

  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    const host = normalizeHost(hostname);
    resolve(hostname).then(
      (addresses) => {
        const blocked = addresses.find((entry) => classifyAddress(entry.address) !== 'public');
        if (!allowed.has(host) && blocked !== undefined) {
          const kind = classifyAddress(blocked.address);
          callback(
            new OutboundError(
              'blocked_address',
              `${hostname} resolves to a ${kind} address, which is not allowed`,
            ),
            '',
            4,
          );
          return;
        }
        if (addresses.length === 0) {
          callback(new OutboundError('network', `${hostname} has no address`), '', 4);
          return;
        }
        if (lookupOptions.all) callback(null, addresses);
        else
          callback(
            null,
            (addresses[0] as LookupAddress).address,
            (addresses[0] as LookupAddress).family,
          );
      },
      (error: Error) => callback(error as NodeJS.ErrnoException, '', 4),
    );
  };

  return (input, init) =>
    new Promise<Response>((resolvePromise, reject) => {
      const url = new URL(input);
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, name) => {
        headers[name] = value;
      });
      const body = bodyBytes(init.body);
      const request = send(
        url,
        { method: init.method ?? 'GET', headers, lookup, signal: init.signal ?? undefined },
        (response) => {
          const status = response.statusCode ?? 502;
          resolvePromise(
            new Response(status === 204 || status === 304 ? null : streamOf(response), {
              status,
              statusText: response.statusMessage ?? '',
              headers: headersOf(response.headers),
            }),
          );
        },
      );
      request.once('error', reject);
      request.end(body);
    });
}
