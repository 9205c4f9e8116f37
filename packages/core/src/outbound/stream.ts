import {
  abortion,
  assertOutboundUrl,
  type OutboundFetch,
  type OutboundOptions,
  outboundUrl,
} from './fetch.js';
import { allowedHostSet } from './hosts.js';
import { networkFailure, OutboundError } from './network-failure.js';

export { whenBodySettled } from './piped.js';

import {
  type Exchange,
  type ExchangeAnswer,
  exchangeOf,
  type PipedAnswer,
  type PipedBody,
  type PipedFetch,
  SourceBody,
  settleHooks,
} from './piped.js';
import { defaultTransport, type Transport } from './transport.js';

/*
 * The guarded fetch for answers that stream (docs/api.md §13: the MCP gateway's upstream,
 * SSE included): the same address policy and transport as `createOutboundFetch`, but the
 * body is handed on as it arrives — never read whole, never capped — with an idle limit
 * between chunks instead of a deadline for the whole exchange.
 */

/** Options of {@link createStreamingFetch}. */
export interface StreamingFetchOptions
  extends Omit<OutboundOptions, 'maxResponseBytes' | 'maxRedirects'> {
  /** Time the answer's status and headers may take, in ms (`timeoutMs`). Default 10000. */
  timeoutMs?: number;
  /** Time the body may go without a chunk before it fails with `timeout`, in ms. Default 300000. */
  idleTimeoutMs?: number;
}

/**
 * Creates the streaming guarded fetch: the URL passes the address policy of
 * `createOutboundFetch` (https only, plain http and private addresses for allowed hosts, no
 * credentials in the URL; a resolving transport checks and pins the addresses), redirects
 * are never followed (a 3xx is answered as it came, for the caller to refuse), the head
 * must arrive within `timeoutMs`, and the body streams with backpressure: each chunk is
 * read from the server only when the reader asks for it, a body idle for `idleTimeoutMs`
 * fails with `OutboundError` `timeout`, and cancelling the body (or aborting `init.signal`)
 * closes the upstream request.
 *
 * @example
 * const stream = createStreamingFetch({ allowedHosts: ['localhost'] });
 * const answer = await stream('https://mcp.example.com/mcp', { method: 'GET', headers: { accept: 'text/event-stream' } });
 */
export function createStreamingFetch(options: StreamingFetchOptions = {}): StreamingFetch {
  const transport: Transport = options.fetch ?? defaultTransport(options.allowedHosts ?? []);
  const allowedHosts = allowedHostSet(options.allowedHosts);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
  const exchange = exchangeOf(transport);

  const streamingFetch: StreamingFetch = async function streamingFetch(input, init = {}) {
    const url = outboundUrl(input);
    assertOutboundUrl(url, allowedHosts);
    const origin = url.origin;
    // Ours: aborted by a timeout, by the body's cancellation, or with the caller's signal
    // (forwarded by a listener rather than `AbortSignal.any`, which costs more per call).
    const upstream = new AbortController();
    const signal = upstream.signal;
    const callerSignal = init.signal ?? null;
    const forward = () => upstream.abort(callerSignal?.reason);
    if (callerSignal?.aborted) forward();
    else callerSignal?.addEventListener('abort', forward, { once: true });
    const aborted = abortion(signal);
    const timedOut = (what: string) =>
      new OutboundError('timeout', `${origin}: ${what}`, { cause: signal.reason });
    let settled = false;
    const hooks: (() => void)[] = [];
    /** Once: the exchange is over (body ended, failed or cancelled, or no body). */
    const settle = () => {
      if (settled) return;
      settled = true;
      callerSignal?.removeEventListener('abort', forward);
      for (const hook of hooks.splice(0)) hook();
    };
    let expired = false;
    const head = setTimeout(() => {
      expired = true;
      upstream.abort(new DOMException('the request timed out', 'TimeoutError'));
    }, timeoutMs);
    let response: Response;
    try {
      response = await Promise.race([
        transport(url.href, { ...init, redirect: 'manual', signal }),
        aborted,
      ]);
    } catch (cause) {
      settle();
      if (expired) throw timedOut(`no answer within ${timeoutMs} ms`);
      if (cause instanceof OutboundError || signal.aborted) throw cause;
      throw new OutboundError('network', `${origin}: ${networkFailure(cause)}`, { cause });
    } finally {
      clearTimeout(head);
    }
    if (response.body === null) {
      settle();
      return response;
    }
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          let idle = false;
          const timer = setTimeout(() => {
            idle = true;
            upstream.abort(new DOMException('the stream went idle', 'TimeoutError'));
          }, idleTimeoutMs);
          try {
            const { done, value } = await Promise.race([reader.read(), aborted]);
            // A transport may end the body on the abort instead of failing it: the idle
            // limit is still a failure, never a clean end.
            if (idle) throw new DOMException('the stream went idle', 'TimeoutError');
            if (done) {
              settle();
              controller.close();
            } else controller.enqueue(value);
          } catch (cause) {
            settle();
            controller.error(
              idle
                ? timedOut(`no data for ${idleTimeoutMs} ms`)
                : cause instanceof OutboundError || signal.aborted
                  ? cause
                  : new OutboundError('network', `${origin}: the stream failed`, { cause }),
            );
            reader.cancel().catch(() => {});
          } finally {
            clearTimeout(timer);
          }
        },
        cancel(reason) {
          settle();
          upstream.abort(reason);
          return reader.cancel(reason).catch(() => {});
        },
      },
      // Nothing is read ahead of the reader: backpressure reaches the upstream socket.
      { highWaterMark: 0 },
    );
    settleHooks.set(body, (hook) => {
      if (settled) hook();
      else hooks.push(hook);
    });
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
  if (exchange !== undefined) {
    streamingFetch.piped = pipedFetch(exchange, allowedHosts, timeoutMs, idleTimeoutMs);
  }
  return streamingFetch;
}

/**
 * The guarded streaming fetch; on a transport with an {@link Exchange} (Node's) also
 * `piped`: the same request, answered without Web objects for an adapter to pipe.
 */
export type StreamingFetch = OutboundFetch & { piped?: PipedFetch };

/** A {@link PipedAnswer} over the exchange's: its headers object made only if read. */
class Piped implements PipedAnswer {
  readonly status: number;
  readonly body: PipedBody | null;
  readonly #head: ExchangeAnswer;

  constructor(head: ExchangeAnswer, body: PipedBody | null) {
    this.status = head.status;
    this.body = body;
    this.#head = head;
  }

  get headers(): Readonly<Record<string, string | string[] | undefined>> {
    return this.#head.headers;
  }

  get rawHeaders(): readonly string[] | undefined {
    return this.#head.rawHeaders;
  }
}

/**
 * `piped` of {@link createStreamingFetch}: the same address policy, head deadline, idle limit
 * between chunks, caller's abort and error codes, over the transport's {@link Exchange}.
 */
function pipedFetch(
  exchange: Exchange,
  allowedHosts: ReadonlySet<string>,
  timeoutMs: number,
  idleTimeoutMs: number,
): PipedFetch {
  return async (input, init) => {
    // A URL is the caller's to hand over (PipedFetch), checked here as it is.
    const url = input instanceof URL ? input : outboundUrl(input);
    assertOutboundUrl(url, allowedHosts);
    const { origin } = url;
    const call = exchange(url, init);
    let expired = false;
    const head = setTimeout(() => {
      expired = true;
      call.abort(new DOMException('the request timed out', 'TimeoutError'));
    }, timeoutMs);
    let answer: Awaited<typeof call.answer>;
    try {
      answer = await call.answer;
    } catch (cause) {
      if (expired) {
        throw new OutboundError('timeout', `${origin}: no answer within ${timeoutMs} ms`, {
          cause,
        });
      }
      if (cause instanceof OutboundError || init.signal?.aborted) throw cause;
      throw new OutboundError('network', `${origin}: ${networkFailure(cause)}`, { cause });
    } finally {
      clearTimeout(head);
    }
    const { source } = answer;
    const body =
      source === null
        ? null
        : new SourceBody(source, origin, { idleMs: idleTimeoutMs, signal: init.signal });
    return new Piped(answer, body);
  };
}
