import type { IncomingMessage } from 'node:http';
import { askForBody } from './continue.js';

/**
 * The request body as a Web stream, with back-pressure. When the handler stops reading (a
 * body over the size limit), the rest is drained and discarded so the response can still
 * be written on the same socket. (`Readable.toWeb` throws on a cancel while data flows.)
 * Nothing is asked of the client before the first read (`Expect: 100-continue`).
 */
export function streamOf(req: IncomingMessage): ReadableStream<Uint8Array> {
  let done = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on('data', (chunk: Buffer) => {
          if (done) return;
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 0) <= 0) req.pause();
        });
        req.once('end', () => {
          if (!done) {
            done = true;
            controller.close();
          }
        });
        req.once('error', (error) => {
          if (!done) {
            done = true;
            controller.error(error);
          }
        });
      },
      pull() {
        askForBody(req);
        req.resume();
      },
      cancel() {
        done = true;
        req.resume();
      },
    },
    // Pulled only when read: a client waiting for `100 Continue` is asked for its body then,
    // not when the Web request is made.
    { highWaterMark: 0 },
  );
}
