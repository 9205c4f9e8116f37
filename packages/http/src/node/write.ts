import type { ServerResponse } from 'node:http';
import type { PipedBody } from '@keyway/core/outbound';
import type { Reply } from '../responses.js';

/* How the Node adapter writes an answer: a reply's text in one write, a stream with backpressure. */

/**
 * Writes a {@link Reply}: one `writeHead`, then its text in one `end`, or its stream.
 * Settles once the answer is written (or dropped), rejecting with what failed while writing.
 */
export function writeReply(res: ServerResponse, reply: Reply): Promise<void> {
  return new Promise((resolve, reject) => sendReply(res, reply, resolve, reject));
}

/**
 * {@link writeReply} without a promise of its own: `written` is called once the answer is
 * written (or dropped), `failed` with what failed while writing it. What the Node adapter
 * calls for every answer: a text or a piped body (the gateway's) is written with no promise
 * made.
 */
export function sendReply(
  res: ServerResponse,
  reply: Reply,
  written: () => void,
  failed: (error: unknown) => void,
): void {
  if (res.headersSent || res.destroyed) {
    // Answered already (`503` at the shutdown deadline), or its client went away before the
    // answer came (no `close` will come to cancel a stream, and a paused piped body would
    // wait for a `drain` that never comes): the body is dropped, which settles it (the
    // gateway's slot is freed, the upstream request closed).
    if (reply.body instanceof ReadableStream) {
      reply.body.cancel().then(written, written);
      return;
    }
    if (reply.body !== null && typeof reply.body !== 'string') reply.body.cancel();
    written();
    return;
  }
  if (reply.body === null || typeof reply.body === 'string') {
    res.writeHead(reply.status, reply.headers);
    res.end(reply.body ?? undefined);
    written();
    return;
  }
  res.writeHead(reply.status, reply.headers);
  // A JSON document is of no use to its reader before its end: the headers leave with the
  // first chunk, and a one-chunk answer (most of the gateway's) in one write with its end.
  const json = isJsonDocument(reply.headers);
  // Else headers first: an event stream's client learns the answer before its first event.
  if (!json) res.flushHeaders();
  if (reply.body instanceof ReadableStream)
    writeStream(res, reply.body, json).then(written, failed);
  else writePiped(res, reply.body, json, written, failed);
}

/**
 * Pipes a piped body (the gateway's upstream answer on Node) to the response, as
 * {@link writeStream} writes a Web one: paused while the socket is full, cancelled when the
 * client goes away, the first chunk held back with `holdFirst`. `written` or `failed` is
 * called once, when it is over.
 */
function writePiped(
  res: ServerResponse,
  body: PipedBody,
  holdFirst: boolean,
  written: () => void,
  failed: (error: unknown) => void,
): void {
  let held: Uint8Array | undefined;
  let holding = holdFirst;
  // Told once: whichever of the end, an error or the client going away came first.
  let over = false;
  const settle = (error?: { cause: unknown }) => {
    if (over) return;
    over = true;
    if (error === undefined) written();
    else failed(error.cause);
  };
  const resume = () => body.resume();
  const gone = () => {
    cleanup();
    if (!res.writableFinished) body.cancel(new DOMException('the client went away', 'AbortError'));
    settle();
  };
  const cleanup = () => {
    res.off('drain', resume);
    res.off('close', gone);
  };
  res.on('drain', resume);
  res.once('close', gone);
  body.pipe({
    write(chunk) {
      if (holding) {
        holding = false;
        held = chunk;
        return true;
      }
      if (held !== undefined) {
        res.write(held);
        held = undefined;
      }
      return res.write(chunk);
    },
    end() {
      cleanup();
      res.end(held);
      settle();
    },
    error(error) {
      cleanup();
      settle({ cause: error });
    },
  });
}

/** Whether an answer is one JSON document (`application/json`, `…+json`), not a stream of events. */
function isJsonDocument(headers: Record<string, string>): boolean {
  for (const name in headers) {
    if (name.toLowerCase() !== 'content-type') continue;
    const type = (headers[name] as string).split(';', 1)[0]?.trim().toLowerCase() ?? '';
    return type === 'application/json' || type.endsWith('+json');
  }
  return false;
}

/** Resolves when a Node response can take more (`drain`) or is gone (`close`). */
function writable(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * Writes a Web `Response` to a Node response, streaming its body with backpressure: the
 * next chunk is read only once the socket has taken the last one, so a slow reader never
 * makes the server buffer a large body. A client that goes away cancels the body.
 */
export async function writeWebResponse(res: ServerResponse, response: Response): Promise<void> {
  if (res.headersSent) {
    await response.body?.cancel().catch(() => {});
    return;
  }
  res.statusCode = response.status;
  response.headers.forEach((value, key) => {
    res.setHeader(key, value);
  });
  if (response.body === null) {
    res.end();
    return;
  }
  await writeStream(res, response.body);
}

/**
 * Writes a body stream with backpressure (the next chunk is read once the socket took the
 * last), and cancels it when the client goes away, even while a read is pending (an idle
 * event stream).
 */
async function writeStream(
  res: ServerResponse,
  body: ReadableStream<Uint8Array>,
  holdFirst = false,
): Promise<void> {
  const reader = body.getReader();
  const cancel = () => {
    if (!res.writableFinished) reader.cancel().catch(() => {});
  };
  res.once('close', cancel);
  // `holdFirst`: the first chunk waits for the next read, so that an answer of one chunk
  // is written with its end (one write instead of two or three).
  let held: Uint8Array | undefined;
  try {
    for (;;) {
      if (res.destroyed) {
        await reader.cancel().catch(() => {});
        return;
      }
      const { done, value } = await reader.read();
      if (done) break;
      if (holdFirst) {
        held = value;
        holdFirst = false;
        continue;
      }
      if (held !== undefined) {
        res.write(held);
        held = undefined;
      }
      if (!res.write(value)) await writable(res);
    }
  } finally {
    res.off('close', cancel);
    reader.releaseLock();
  }
  res.end(held);
}
