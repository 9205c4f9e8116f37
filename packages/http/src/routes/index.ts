import { EVENT_ROUTES, PROVIDER_ROUTES, TOKEN_ROUTES } from './admin.js';
import { CONNECT_ASSET_ROUTES, CONNECT_PAGE_ROUTES, CONNECT_SESSION_ROUTES } from './connect.js';
import { GATEWAY_ROUTES, PROXY_ROUTES } from './gateway.js';
import { HEALTH_ROUTES } from './health.js';
import { INSPECTOR_ROUTES } from './inspector.js';
import { CONNECTION_ROUTES, OAUTH_ROUTES } from './oauth.js';
import { PORTAL_ROUTES } from './portal.js';
import type { Route } from './route.js';
import { SIGN_IN_ROUTES } from './sign-in.js';
import { VAULT_ROUTES } from './vault.js';

export type { Method, Route, RouteContext } from './route.js';

/**
 * Every operation of the HTTP contract, in the order the OpenAPI document lists them: the
 * one declaration the dispatcher and the document both read.
 */
export const OPERATIONS: readonly Route[] = [
  ...TOKEN_ROUTES,
  ...PROVIDER_ROUTES,
  ...OAUTH_ROUTES,
  ...EVENT_ROUTES,
  ...CONNECTION_ROUTES,
  ...VAULT_ROUTES,
  ...GATEWAY_ROUTES,
  ...PROXY_ROUTES,
  ...PORTAL_ROUTES,
  ...SIGN_IN_ROUTES,
  ...CONNECT_SESSION_ROUTES,
  ...CONNECT_PAGE_ROUTES,
  ...HEALTH_ROUTES,
];

/** A route compiled for matching: its template as an expression, the parameter captured. */
export interface CompiledRoute {
  route: Route;
  pattern: RegExp;
  /**
   * The template's text before its parameter (all of it without one): a path that does not
   * start with it cannot match, and is passed over without running the expression.
   */
  prefix: string;
}

/**
 * Routes compiled for {@link matchRoutes}, grouped by the first segment of their template: a
 * path is held only to the templates that may match its own first segment (a few of the
 * sixty or so), in the order they were declared.
 */
export interface RouteTable {
  /** By a first segment, the routes whose template begins with it, and {@link rest}. */
  readonly bySegment: ReadonlyMap<string, readonly CompiledRoute[]>;
  /** The routes whose template's first segment is not all text (a parameter in it). */
  readonly rest: readonly CompiledRoute[];
}

/** A path's first segment: what lies between its leading `/` and the next. */
function firstSegment(path: string): string {
  const end = path.indexOf('/', 1);
  return path.slice(1, end === -1 ? path.length : end);
}

/**
 * Compiles routes for {@link matchRoutes}. A parameter takes the rest of its segment and
 * any below (`{id}` of `/api/admin/providers/{id}` matches `a/b`): resource paths hold
 * slashes, and a token name that does is refused by the name's own check, not by routing.
 */
export function compileRoutes(routes: readonly Route[]): RouteTable {
  const compiled = routes.map((route) => {
    const source = route.path.replace(/[.]/g, '\\.').replace(/\{[a-z_]+\}/, '(.+)');
    const brace = route.path.indexOf('{');
    return {
      route,
      pattern: new RegExp(`^${source}$`),
      prefix: brace === -1 ? route.path : route.path.slice(0, brace),
    };
  });
  // A template fixes its path's first segment when that segment ends before any parameter.
  const fixed = (entry: CompiledRoute) =>
    entry.prefix === entry.route.path || entry.prefix.indexOf('/', 1) !== -1;
  const rest = compiled.filter((entry) => !fixed(entry));
  const bySegment = new Map<string, CompiledRoute[]>();
  for (const segment of new Set(compiled.filter(fixed).map(({ prefix }) => firstSegment(prefix)))) {
    bySegment.set(
      segment,
      compiled.filter((entry) => !fixed(entry) || firstSegment(entry.prefix) === segment),
    );
  }
  return { bySegment, rest };
}

/** The routes whose path matches, in the order they were declared, each with its (still encoded) parameter. */
export function matchRoutes(table: RouteTable, path: string): { route: Route; param: string }[] {
  const found: { route: Route; param: string }[] = [];
  for (const { route, pattern, prefix } of table.bySegment.get(firstSegment(path)) ?? table.rest) {
    // Most templates fail on their first characters: a string comparison, not an expression.
    if (!path.startsWith(prefix)) continue;
    const match = pattern.exec(path);
    if (match !== null) found.push({ route, param: match[1] ?? '' });
  }
  return found;
}

/** The routes a handler serves: the contract, the connect page's assets, and the inspector when it is on. */
export function routesOf(inspector: boolean): readonly Route[] {
  return inspector
    ? [...INSPECTOR_ROUTES, ...CONNECT_ASSET_ROUTES, ...OPERATIONS]
    : [...CONNECT_ASSET_ROUTES, ...OPERATIONS];
}
