import { KeywayError, type KeywayErrorCode } from '@keyway/core';
import { type ContractShape, contractSchema, type JsonSchema } from '@keyway/core/contract';
import { OPERATIONS, type Route } from './routes/index.js';
import { VERSION } from './version.js';

export { OPERATIONS } from './routes/index.js';

/*
 * The OpenAPI 3.1 document of the HTTP contract (docs/api.md §10), written from the route table
 * the dispatcher serves (`routes/`) and the shapes of the contract in `@keyway/core` (JSON
 * Schema draft 2020-12, which is OpenAPI 3.1's dialect).
 */

/** A shape of core's contract (`input` for requests, `output` for answers), or a schema. */
const jsonBody = (schema: ContractShape | JsonSchema, io: 'input' | 'output') => ({
  'application/json': {
    schema: typeof schema === 'string' ? contractSchema(schema, io) : schema,
  },
});

function errorResponses(operation: Route): Record<string, unknown> {
  const codes: KeywayErrorCode[] = [
    ...operation.errors,
    ...(operation.public ? [] : (['invalid_token', 'rate_limited'] as const)),
    'internal_error',
  ];
  const byStatus = new Map<number, KeywayErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = new KeywayError(code, code).status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const schema = {
      allOf: [{ $ref: '#/components/schemas/Error' }],
      properties: { error: { enum: list } },
    };
    responses[String(status)] = {
      description: `Error: ${list.map((code) => `\`${code}\``).join(', ')} (docs/api.md §1.2).`,
      content: { 'application/json': { schema } },
    };
  }
  for (const [status, description] of Object.entries(operation.rpcErrors ?? {})) {
    const rpc = { $ref: '#/components/schemas/JsonRpcError' };
    const api = (responses[status] as { content?: { 'application/json': { schema: unknown } } })
      ?.content?.['application/json'].schema;
    responses[status] = {
      description:
        api === undefined
          ? `A JSON-RPC error: ${description}.`
          : `${(responses[status] as { description: string }).description} Or a JSON-RPC error: ${description}.`,
      content: { 'application/json': { schema: api === undefined ? rpc : { oneOf: [api, rpc] } } },
    };
  }
  for (const [status, description] of Object.entries(operation.pages ?? {})) {
    responses[status] = { description, content: { 'text/html': { schema: { type: 'string' } } } };
  }
  return responses;
}

function parameters(operation: Route): unknown[] {
  const list: unknown[] = [];
  if (operation.param !== undefined) {
    list.push({
      name: operation.param.name,
      in: 'path',
      required: true,
      description: operation.param.description,
      schema: { type: 'string' },
    });
  }
  if (operation.query !== undefined) {
    const query = contractSchema(operation.query, 'input') as {
      properties?: Record<string, unknown>;
      required?: string[];
    };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      list.push({
        name,
        in: 'query',
        required: query.required?.includes(name) ?? false,
        schema,
      });
    }
  }
  return list;
}

/**
 * The OpenAPI 3.1 document of Keyway's HTTP API (docs/api.md §10), served at
 * `GET {base}/api/openapi.json`.
 *
 * @param serverUrl Where the API is served (the `servers` entry), when known.
 */
export function openApiDocument(serverUrl?: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of OPERATIONS) {
    if (operation.undocumented === true) continue;
    const ok: Record<string, unknown> = {};
    const passThrough = operation.passThrough;
    const media = (types: string[]) =>
      Object.fromEntries(types.map((type) => [type, { schema: {} }]));
    for (const [status, answer] of Object.entries(operation.ok)) {
      ok[status] =
        answer.schema !== null
          ? { description: answer.description, content: jsonBody(answer.schema, 'output') }
          : passThrough !== undefined && status === '200'
            ? { description: answer.description, content: media(passThrough.response) }
            : { description: answer.description };
    }
    const params = parameters(operation);
    paths[operation.path] ??= {};
    (paths[operation.path] as Record<string, unknown>)[operation.method.toLowerCase()] = {
      operationId: operation.id,
      summary: operation.summary,
      description: `See docs/api.md ${operation.see}.`,
      ...(operation.public ? { security: [] } : {}),
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(operation.body === undefined
        ? {}
        : { requestBody: { required: true, content: jsonBody(operation.body, 'input') } }),
      ...(passThrough === undefined || passThrough.request.length === 0
        ? {}
        : { requestBody: { required: false, content: media(passThrough.request) } }),
      responses: { ...ok, ...errorResponses(operation) },
    };
  }
  return {
    openapi: '3.1.1',
    info: {
      title: 'Keyway',
      version: VERSION,
      summary: 'OAuth connection broker for MCP servers and other APIs.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    ...(serverUrl === undefined ? {} : { servers: [{ url: serverUrl }] }),
    security: [{ bearer: [] }],
    components: {
      schemas: {
        Error: contractSchema('ErrorBody'),
        JsonRpcError: {
          type: 'object',
          description: 'A JSON-RPC 2.0 error response (an MCP server refusing a message).',
          required: ['jsonrpc', 'error', 'id'],
          properties: {
            jsonrpc: { const: '2.0' },
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: { code: { type: 'integer' }, message: { type: 'string' }, data: {} },
            },
            id: { type: ['string', 'integer', 'null'] },
          },
        },
      },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'The root key or a broker token (docs/api.md §1.1, §3).',
        },
      },
    },
    paths,
  };
}
