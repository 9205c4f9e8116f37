import { KeywayError } from '@keyway/core';
import { INSPECTOR_ASSETS, INSPECTOR_HTML } from '../inspector-assets.generated.js';
import type { Reply } from '../responses.js';
import type { Route } from './route.js';

/* The inspector (docs/api.md §9): its page and its assets, public and left out of the document. */

/** The security headers of the inspector's page: nothing but this origin, no framing. */
const INSPECTOR_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // A window this page opens (the consent popup) or one that opened it gets no handle on it.
  'cross-origin-opener-policy': 'same-origin',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri " +
    "'none'; form-action 'none'; frame-ancestors 'none'",
};

const page = { description: 'The page', schema: null };

/**
 * One of a page's assets by its content-hashed name: cached for a year, never revalidated.
 *
 * @throws {KeywayError} `not_found`.
 */
export async function assetReply(
  assets: Record<string, { type: string; body: string }>,
  name: string,
): Promise<Reply> {
  const asset = Object.hasOwn(assets, name) ? assets[name] : undefined;
  if (asset === undefined) throw new KeywayError('not_found', 'no such asset');
  return {
    status: 200,
    headers: {
      'content-type': asset.type,
      'cache-control': 'public, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff',
    },
    body: asset.body,
  };
}

export const INSPECTOR_ROUTES: Route[] = [
  {
    method: 'GET',
    path: '/inspector',
    id: 'inspector',
    summary: 'The inspector page.',
    see: '§9',
    public: true,
    undocumented: true,
    ok: { 200: page },
    errors: [],
    handle: async () => ({ status: 200, headers: INSPECTOR_PAGE_HEADERS, body: INSPECTOR_HTML }),
  },
  {
    method: 'GET',
    path: '/inspector/assets/{file}',
    id: 'inspectorAsset',
    summary: 'A script or style of the inspector, named by its content.',
    see: '§9',
    public: true,
    undocumented: true,
    ok: { 200: page },
    errors: ['not_found'],
    handle: async ({ param }) => assetReply(INSPECTOR_ASSETS, param),
  },
];
