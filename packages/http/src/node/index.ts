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
 * createServer(toNodeHandler(createHandler(broker))).listen(8787);
 *
 * @module
 */
export { type NodeHandlerOptions, toNodeHandler, toWebRequest } from './handler.js';
export { writeWebResponse } from './write.js';
