import { z } from 'zod';

/*
 * How a provider's answers are read, as its profile says and its stored state keeps it: the
 * token answer's fields when they are not plain RFC 6749 JSON, and the connection values an
 * API base is built from (docs/api.md §15).
 */

/**
 * A JSON path into an answer, dot-separated (`authed_user.access_token`); a segment of
 * digits reads an array's item (`0.id`).
 */
export const responsePath = z
  .string()
  .regex(/^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$/, 'a dot-separated path')
  .max(200);

/** A parameter or header name. */
const name = z.string().regex(/^[A-Za-z][A-Za-z0-9_.-]{0,63}$/, 'a name of 1 to 64 characters');

/** How a token endpoint's answer is read when it is not plain RFC 6749 JSON. */
export const TokenResponseSchema = z.strictObject({
  /** `form`: `application/x-www-form-urlencoded` answers (GitHub without `Accept`). */
  format: z.enum(['json', 'form']).default('json'),
  access_token: responsePath.default('access_token'),
  refresh_token: responsePath.default('refresh_token'),
  expires_in: responsePath.default('expires_in'),
  scope: responsePath.default('scope'),
  /**
   * The server's `token_type` names something else than how the token is used (Slack's
   * `bot` and `user`): the token is a Bearer token whatever it says. Default: the answer's
   * `token_type` is read as RFC 6749 says (missing: Bearer).
   */
  bearer: z.boolean().default(false),
  /** A field that is `false` on a failure answered with status 200 (Slack's `ok`). */
  ok_field: responsePath.optional(),
  /** Where an error answer names its OAuth error code (Notion: `code`). */
  error: responsePath.default('error'),
  /** Where an error answer describes it (Notion: `message`). */
  error_description: responsePath.default('error_description'),
  /** Other values kept with the connection, shown in its view (Salesforce's `instance_url`). */
  extra: z.record(name, responsePath).default({}),
});

/**
 * A value of each connection that `api_base_url` is built from (docs/api.md §15): a
 * `{name}` placeholder filled, when the proxy builds a URL, from the connection's metadata
 * of that name — kept from the token answer, the redirect back or `after_connect` — and
 * matched in full against `pattern`. A value that misses it is never sent anywhere.
 */
export const ConnectionValueSchema = z.strictObject({
  /** The metadata name; the placeholder in `api_base_url`. */
  name: z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,63}$/, 'letters, digits and `_`'),
  description: z.string().min(1),
  /**
   * `segment`: the value fills a host label or a path segment, on a parameter's rules.
   * `origin`: the value is an https origin (Salesforce's `instance_url`) — no path, port or
   * user info — whose host fills a placeholder that is the whole host of `api_base_url`,
   * and `pattern` is matched against that host.
   */
  kind: z.enum(['segment', 'origin']).default('segment'),
  pattern: z.string().min(1),
});
