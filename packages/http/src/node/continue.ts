import type { IncomingMessage, ServerResponse } from 'node:http';

/*
 * `Expect: 100-continue` (RFC 9110 §10.1.1): a client that sends it waits for `100 Continue`
 * before it sends its body. Asked for when the body is first read, an answer decided by the
 * request's head (a body past the limit, a refused token) goes before any byte of it.
 */

/**
 * Requests whose client waits for `100 Continue` before it sends its body
 * (`Expect: 100-continue`, and a server that left the answer to {@link continueOnRead}),
 * with their answers.
 */
export const awaitingContinue = new WeakMap<IncomingMessage, ServerResponse>();

/** Asks a client that waits for it to send its body: when the body is first read. */
export function askForBody(req: IncomingMessage): void {
  const res = awaitingContinue.get(req);
  if (res === undefined) return;
  awaitingContinue.delete(req);
  if (!res.headersSent) res.writeContinue();
}

/**
 * A listener for a Node server's `checkContinue` event: the request goes to `listener` as any
 * other, and `100 Continue` is sent only when its body is first read. An answer the head of
 * the request decides (a body declared past the limit, a token refused, an unknown route)
 * goes at once with no `100` before it, so the client never sends that body (RFC 9110
 * §10.1.1). Without it, Node sends `100 Continue` to every such request as it arrives.
 *
 * @example
 * const handle = toNodeHandler(createHandler(broker));
 * const server = createServer(handle);
 * server.on('checkContinue', continueOnRead(handle));
 */
export function continueOnRead(
  listener: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    awaitingContinue.set(req, res);
    listener(req, res);
  };
}
