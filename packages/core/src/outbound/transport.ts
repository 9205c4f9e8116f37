import { classifyAddress, isIpLiteral } from '../platform/address.js';
import { builtinModules } from '../platform/builtin.js';
import { utf8 } from '../platform/bytes.js';
import { withHeaders } from '../platform/headers.js';
import { allowedHostSet, normalizeHost } from './hosts.js';
import { OutboundError } from './network-failure.js';
import {
  EXCHANGE,
  type Exchange,
  type ExchangeAnswer,
  nodeHeaders,
  pipedStream,
  SourceBody,
} from './piped.js';

/**
 * A `fetch`-compatible transport: the platform's, or one that resolves and pins (Node).
 *
 * @see docs/security.md "Outbound requests"
 */
export type Transport = (url: string, init: RequestInit) => Promise<Response>;

/**
 * Transports that check the addresses a host name resolves to before connecting: the last
 * step of the server-side request forgery guard, which a plain `fetch` leaves open (a name
 * such as `vm.example.com` may resolve to 127.0.0.1). Core stays free of static Node
 * imports: the Node transport reaches `node:dns`, `node:http` and `node:https` through
 * `process.getBuiltinModule`, so bundles for other runtimes never pull them in.
 */

/** One resolved address. */
export interface ResolvedAddress {
  address: string;
  /** 4 or 6. */
  family: number;
}

/** A resolver: every address of a host name. */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

/** Options of {@link createNodeFetch} and {@link createResolvingFetch}. */
export interface ResolvingFetchOptions {
  /** Hosts whose addresses are not checked (development and tests), as in the broker. */
  allowedHosts?: readonly string[];
  /** The resolver; default the runtime's. Injected by tests to map names to addresses. */
  resolve?: Resolve;
}

/** The refusal of a host name whose addresses are not all public; it never says which. */
function blocked(hostname: string): OutboundError {
  return new OutboundError('blocked_address', `${hostname}: address not allowed`);
}

/** Checks every resolved address of a host name, unless the host is allowed. */
async function checkedAddresses(
  hostname: string,
  resolve: Resolve,
  allowed: ReadonlySet<string>,
): Promise<ResolvedAddress[]> {
  const addresses = await resolve(hostname);
  if (addresses.length === 0) throw new OutboundError('network', `${hostname} has no address`);
  if (!allowed.has(normalizeHost(hostname))) {
    if (addresses.some((entry) => classifyAddress(entry.address) !== 'public')) {
      throw blocked(hostname);
    }
  }
  return addresses;
}

// ─── Node: resolve, check, and connect to exactly the checked addresses ───

/* Just what this file uses of Node's modules, typed here: core has no Node types. */
interface NodeEmitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
  once(event: string, listener: (...args: never[]) => void): unknown;
}
interface NodeIncoming extends NodeEmitter {
  statusCode?: number;
  statusMessage?: string;
  /** Made by Node when first read. */
  readonly headers: Record<string, string | string[] | undefined>;
  rawHeaders: string[];
  pause(): unknown;
  resume(): unknown;
  destroy(error?: Error): unknown;
}
interface NodeClientRequest extends NodeEmitter {
  end(body?: string | Uint8Array): unknown;
  destroy(error?: Error): unknown;
}
type NodeRequestFunction = (
  options: Record<string, unknown>,
  callback: (response: NodeIncoming) => void,
) => NodeClientRequest;
type NodeLookupCallback = (
  error: Error | null,
  address: string | ResolvedAddress[],
  family?: number,
) => void;
interface NodeDns {
  lookup(
    hostname: string,
    options: { all: true; verbatim: true },
    callback: (error: Error | null, addresses: ResolvedAddress[]) => void,
  ): void;
}

function bodyBytes(body: RequestInit['body']): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  if (body instanceof URLSearchParams) return body.toString();
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('the Node transport sends string, bytes or URLSearchParams bodies only');
}

/**
 * A `fetch`-compatible transport for Node that resolves the host name itself, refuses when
 * any resolved address is not publicly routable (loopback, private, link-local, CGNAT,
 * multicast, unspecified, IPv4-mapped, and the rest of the IANA special-purpose
 * registries), and connects to exactly the addresses it checked, so a second DNS answer
 * cannot swap in an internal address (DNS rebinding). It is the default transport of
 * `createBroker` on Node. Under it is an {@link Exchange} that answers with Node's own
 * objects, which the gateway and the API proxy pipe without Web streams.
 *
 * @throws {TypeError} where `node:http` cannot be loaded (not Node).
 * @example
 * const broker = createBroker({ rootKey, storage, fetch: createNodeFetch({ allowedHosts: ['localhost'] }) });
 */
export function createNodeFetch(options: ResolvingFetchOptions = {}): Transport {
  const exchange = createNodeExchange(options);
  const transport: Transport = async (input, init) => {
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const given = bodyBytes(init.body);
    const url = new URL(input);
    const { answer } = exchange(url, {
      method: init.method ?? 'GET',
      headers,
      body: typeof given === 'string' ? utf8(given) : (given ?? null),
      ...(init.signal ? { signal: init.signal } : {}),
    });
    const { status, statusText, headers: head, source } = await answer;
    // The caller's abort fails a body being read with its own reason, as `fetch` does.
    const body =
      source === null
        ? null
        : new SourceBody(source, url.origin, { signal: init.signal ?? undefined });
    return new Response(body === null ? null : pipedStream(body), {
      status,
      statusText,
      headers: nodeHeaders(head),
    });
  };
  return Object.assign(transport, { [EXCHANGE]: exchange });
}

/**
 * Node's answer as an {@link ExchangeAnswer}: its `headers` object made only if something
 * reads it (the gateway reads a few of the raw ones).
 */
class NodeAnswer implements ExchangeAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly rawHeaders: readonly string[];
  readonly source: NodeIncoming | null;
  readonly #message: NodeIncoming;

  constructor(status: number, message: NodeIncoming, empty: boolean) {
    this.status = status;
    this.statusText = message.statusMessage ?? '';
    this.rawHeaders = message.rawHeaders;
    this.source = empty ? null : message;
    this.#message = message;
  }

  get headers(): Record<string, string | string[] | undefined> {
    return this.#message.headers;
  }
}

/** The request under {@link createNodeFetch}: resolved, checked and pinned the same way. */
function createNodeExchange(options: ResolvingFetchOptions): Exchange {
  const load = builtinModules();
  if (load === null) throw new TypeError('createNodeFetch() needs Node (process.getBuiltinModule)');
  const http = load('node:http') as { request: NodeRequestFunction };
  const https = load('node:https') as { request: NodeRequestFunction };
  const dns = load('node:dns') as NodeDns;
  const allowed = allowedHostSet(options.allowedHosts);
  const resolve: Resolve =
    options.resolve ??
    ((hostname) =>
      new Promise((resolvePromise, reject) => {
        dns.lookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
          error ? reject(error) : resolvePromise(addresses),
        );
      }));

  const lookup = (
    hostname: string,
    lookupOptions: { all?: boolean },
    callback: NodeLookupCallback,
  ): void => {
    checkedAddresses(hostname, resolve, allowed).then(
      (addresses) => {
        const first = addresses[0] as ResolvedAddress;
        if (lookupOptions.all) callback(null, addresses);
        else callback(null, first.address, first.family);
      },
      (error: Error) => callback(error, '', 4),
    );
  };

  return (url, init) => {
    const send = url.protocol === 'https:' ? https.request : http.request;
    const { body } = init;
    // Framed always: Node's client sends a DELETE's (or OPTIONS') body without a length
    // or chunking otherwise, which the server reads as the next request.
    const headers =
      body === null
        ? init.headers
        : withHeaders(init.headers, { 'content-length': String(body.byteLength) });
    const { signal } = init;
    let request: NodeClientRequest | undefined;
    const answer = new Promise<ExchangeAnswer>((resolvePromise, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      request = send(
        // The URL's parts, as Node would take them from it (one conversion less per call);
        // an IPv6 literal without its brackets. Credentials in a URL are refused before.
        {
          protocol: url.protocol,
          hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
          port: url.port === '' ? undefined : Number(url.port),
          path: `${url.pathname}${url.search}`,
          method: init.method,
          headers,
          lookup,
        },
        (response) => {
          const status = response.statusCode ?? 502;
          const empty = status === 204 || status === 304 || init.method === 'HEAD';
          if (empty) response.resume();
          resolvePromise(new NodeAnswer(status, response, empty));
        },
      );
      request.once('error', reject);
      if (signal !== undefined) {
        // The caller's abort closes the request, and with it the answer's body (which then
        // fails with the abort's reason): one listener for the whole exchange, gone with
        // the request. Node's own `signal` option costs several times more per request.
        const sent = request;
        const abort = () => sent.destroy(signal.reason);
        signal.addEventListener('abort', abort, { once: true });
        sent.once('close', () => signal.removeEventListener('abort', abort));
      }
      request.end(body ?? undefined);
    });
    return {
      answer,
      abort(reason) {
        request?.destroy(reason);
      },
    };
  };
}

// ─── Other runtimes: resolve and check, then the platform's fetch ───

/**
 * A transport that resolves a host name with `resolve`, refuses it when any address is not
 * public, and then calls the platform's `fetch`. The platform resolves again when it
 * connects, so unlike {@link createNodeFetch} this does not pin the checked addresses: a
 * DNS server that answers differently within the same second can still slip through. It is
 * the default on Deno and Bun, whose `fetch` takes no resolver.
 */
export function createResolvingFetch(
  resolve: Resolve,
  options: { allowedHosts?: readonly string[]; fetch?: Transport } = {},
): Transport {
  const allowed = allowedHostSet(options.allowedHosts);
  const platformFetch: Transport = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
  return async (input, init) => {
    const host = normalizeHost(new URL(input).hostname);
    if (!isIpLiteral(host) && !allowed.has(host)) await checkedAddresses(host, resolve, allowed);
    return platformFetch(input, init);
  };
}

/** The runtime globals {@link defaultTransport} looks at; injected by tests. */
export interface RuntimeGlobals {
  Deno?: { resolveDns?: (name: string, type: 'A' | 'AAAA') => Promise<string[]> };
  Bun?: {
    dns?: { lookup?: (name: string, options?: object) => Promise<ResolvedAddress[]> };
  };
  process?: { versions?: { node?: string }; getBuiltinModule?: (id: string) => unknown };
  fetch?: typeof fetch;
}

/** Deno's resolver: A and AAAA records; a name with neither has no address. */
function denoResolve(
  deno: NonNullable<NonNullable<RuntimeGlobals['Deno']>['resolveDns']>,
): Resolve {
  return async (hostname) => {
    const settled = await Promise.allSettled([
      deno(hostname, 'A').then((list) => list.map((address) => ({ address, family: 4 }))),
      deno(hostname, 'AAAA').then((list) => list.map((address) => ({ address, family: 6 }))),
    ]);
    const found = settled.flatMap((result) => (result.status === 'fulfilled' ? result.value : []));
    const failure = settled.find((result) => result.status === 'rejected');
    if (found.length === 0 && failure !== undefined)
      throw (failure as PromiseRejectedResult).reason;
    return found;
  };
}

/**
 * The transport `createBroker` uses without a `fetch` option: on Node the pinned
 * {@link createNodeFetch}; on Deno and Bun {@link createResolvingFetch} with their
 * resolvers; elsewhere (a runtime without a resolver) the platform's `fetch` for IP
 * literals and allowed hosts, and a refusal of any other host name that says how to allow
 * it.
 */
export function defaultTransport(
  allowedHosts: readonly string[] = [],
  runtime: RuntimeGlobals = globalThis as RuntimeGlobals,
): Transport {
  const platformFetch: Transport = (url, init) => (runtime.fetch ?? globalThis.fetch)(url, init);
  const resolveDns = runtime.Deno?.resolveDns;
  if (typeof resolveDns === 'function') {
    return createResolvingFetch(denoResolve(resolveDns.bind(runtime.Deno)), {
      allowedHosts,
      fetch: platformFetch,
    });
  }
  const bunLookup = runtime.Bun?.dns?.lookup;
  if (typeof bunLookup === 'function') {
    return createResolvingFetch((name) => bunLookup.call(runtime.Bun?.dns, name), {
      allowedHosts,
      fetch: platformFetch,
    });
  }
  if (
    typeof runtime.process?.versions?.node === 'string' &&
    typeof runtime.process.getBuiltinModule === 'function'
  ) {
    return createNodeFetch({ allowedHosts });
  }
  // No resolver: a host name cannot be checked, so only IP literals and allowed hosts pass.
  return createResolvingFetch(
    async (host) => {
      throw new OutboundError(
        'blocked_address',
        `${host}: this runtime cannot check what a host name resolves to; pass a "fetch" that resolves and checks ` +
          `addresses, or list the host in "allowedHosts"`,
      );
    },
    { allowedHosts, fetch: platformFetch },
  );
}
