import { json } from '../responses.js';
import { VERSION } from '../version.js';
import type { Route } from './route.js';

/* Health (docs/api.md §16): liveness and readiness for an orchestrator, public and without
 * detail; the status of the broker for its operator, behind a credential. */

const statusOf = (value: string) => ({
  type: 'object',
  properties: { status: { type: 'string', const: value } },
  required: ['status'],
  additionalProperties: false,
});

export const HEALTH_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/healthz',
    id: 'healthz',
    summary: 'Liveness: the process serves.',
    see: '§16',
    public: true,
    ok: { 200: { description: 'Serving.', schema: statusOf('ok') } },
    errors: [],
    handle: async () => json(200, { status: 'ok' }),
  },
  {
    method: 'GET',
    path: '/readyz',
    id: 'readyz',
    summary: 'Readiness: the storage answers and holds the schema this version needs.',
    see: '§16',
    public: true,
    ok: {
      200: { description: 'Ready.', schema: statusOf('ready') },
      503: {
        description: 'Not ready (no detail: `keyway status` says why).',
        schema: statusOf('unavailable'),
      },
    },
    errors: [],
    handle: async ({ broker }) => {
      const { ready } = await broker.health();
      return ready ? json(200, { status: 'ready' }) : json(503, { status: 'unavailable' });
    },
  },
  {
    method: 'GET',
    path: '/api/admin/status',
    id: 'status',
    summary: 'The broker: its version, readiness and storage (why it is not ready: root key only).',
    see: '§16',
    ok: {
      200: {
        description: 'The status.',
        schema: {
          type: 'object',
          properties: {
            version: { type: 'string' },
            ready: { type: 'boolean' },
            storage: {
              anyOf: [
                {
                  type: 'object',
                  properties: {
                    engine: { type: 'string' },
                    schema_version: { type: ['integer', 'null'] },
                    schema_expected: { type: ['integer', 'null'] },
                  },
                  required: ['engine', 'schema_version', 'schema_expected'],
                  additionalProperties: false,
                },
                { type: 'null' },
              ],
            },
            reason: { type: ['string', 'null'] },
            credential: {
              type: 'object',
              description:
                'Who is asking: the root key (`name` null, scopes `**`) or a broker token with its scopes and expiry.',
              properties: {
                name: { type: ['string', 'null'] },
                scopes: { type: 'array', items: { type: 'string' } },
                expires_at: { type: ['string', 'null'], format: 'date-time' },
              },
              required: ['name', 'scopes', 'expires_at'],
              additionalProperties: false,
            },
            provider_management: {
              type: 'boolean',
              description: 'Whether providers are managed over this API (§4).',
            },
            sign_in: {
              type: 'boolean',
              description: 'Whether MCP clients may sign in to this deployment (§17).',
            },
          },
          required: [
            'version',
            'ready',
            'storage',
            'reason',
            'credential',
            'provider_management',
            'sign_in',
          ],
          additionalProperties: false,
        },
      },
    },
    errors: [],
    handle: async ({ broker, principal }) => {
      const health = await broker.health();
      return json(200, {
        version: VERSION,
        ready: health.ready,
        storage:
          health.storage === null
            ? null
            : {
                engine: health.storage.engine,
                schema_version: health.storage.schema?.version ?? null,
                schema_expected: health.storage.schema?.expected ?? null,
              },
        reason: principal.kind === 'root' ? health.reason : null,
        credential:
          principal.kind === 'root'
            ? { name: null, scopes: ['**'], expires_at: null }
            : {
                name: principal.name,
                scopes: [...principal.scopes],
                expires_at: new Date(principal.expiresAt).toISOString(),
              },
        provider_management: broker.providers.managed,
        sign_in: broker.signIn.enabled,
      });
    },
  },
];
