/**
 * `@keyway/http/node`: the glue for Node's `http` module and the frameworks built on it
 * (Express, Fastify's raw mode, Koa). The root entry, `@keyway/http`, is Web-standard and
 * loads on any runtime; this one imports `node:http` types and reads Node streams, and
 * works on Node, Bun and Deno.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { createHandler } from '@keyway/http';
 * import { toNodeHandler } from '@keyway/http/node';
 * const handle = toNodeHandler(createHandler(broker));
 * const server = createServer(handle);
 * // 100 Continue only for a body that is read: a 413 or 401 goes before it is sent.
 * server.on('checkContinue', continueOnRead(handle));
 * server.listen(8787);
 *
 * @module
 */
export { continueOnRead } from './continue.js';
export { type NodeHandlerOptions, toNodeHandler, toWebRequest } from './handler.js';
export { writeWebResponse } from './write.js';
