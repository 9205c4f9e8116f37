import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { KeywayError } from '../contract/errors.js';
import { UpdateConnectionBody, type UpdateConnectionInput } from '../contract/schemas.js';
import { parseShape } from '../contract/validation.js';
import type { ConnectionRecord } from '../storage/record-types.js';
import { type ConnectionState, connectionState } from '../storage/states.js';
import type { ConnectionDeps } from './deps.js';
import { type ConnectionRecords, notFound } from './records.js';

/*
 * What the portal reads of a connection (docs/api.md §18): the alias its tools are named by
 * and its tool policy, set with `PATCH /api/oauth/connections/<id>` by a principal covering
 * it.
 */

/** The last segment of a connection's path: its alias unless one is set. */
export function lastSegment(id: string): string {
  return id.slice(id.lastIndexOf('/') + 1);
}

/** The alias a connection is named by in the portal: its own, or its last path segment. */
export function aliasOf(record: ConnectionRecord): string {
  return connectionState(record).alias ?? lastSegment(record.id);
}

/** The parent path of a connection (`''` for a top-level one). */
function parentOf(id: string): string {
  const slash = id.lastIndexOf('/');
  return slash < 0 ? '' : id.slice(0, slash);
}

/** The aliases of a connection's siblings (the connections of the same parent path). */
async function siblingAliases(deps: ConnectionDeps, id: string): Promise<Map<string, string>> {
  const parent = parentOf(id);
  const aliases = new Map<string, string>();
  let after: string | undefined;
  // A parent holds a user's connections: a few, and never more than 50 pages are read.
  for (let page = 0; page < 50; page++) {
    const records = await deps.storage.listConnections({
      ...(parent === '' ? {} : { within: [parent] }),
      limit: 200,
      ...(after === undefined ? {} : { after }),
    });
    for (const record of records) {
      if (record.id !== id && parentOf(record.id) === parent) {
        aliases.set(aliasOf(record), record.id);
      }
    }
    const last = records[records.length - 1];
    if (records.length < 200 || last === undefined) break;
    after = last.id;
  }
  return aliases;
}

/**
 * Sets or clears a connection's alias and tool policy (`null` clears; an absent field is
 * kept), with one `connection.updated` event.
 *
 * @throws {KeywayError} `invalid_request` (the body; an alias a sibling already answers to,
 *   naming it), `invalid_path`, `insufficient_scope`, `not_found`, `conflict`.
 */
export async function updatePortalSettings(
  deps: ConnectionDeps,
  records: ConnectionRecords,
  principal: Principal,
  id: string,
  input: UpdateConnectionInput,
): Promise<ConnectionRecord> {
  const connectionId = parseResourcePath(id);
  const body = parseShape(UpdateConnectionBody, input);
  assertCoversPath(principal, connectionId);
  if (typeof body.alias === 'string') {
    const taken = (await siblingAliases(deps, connectionId)).get(body.alias);
    if (taken !== undefined) {
      const message =
        `"alias": ${JSON.stringify(body.alias)} is already the alias of connection ` +
        JSON.stringify(taken);
      throw new KeywayError('invalid_request', message, {
        details: [{ path: 'alias', message }],
      });
    }
  }
  const written = await records.update(connectionId, (record) => {
    const { alias, tools, ...state } = connectionState(record);
    const nextAlias = body.alias === undefined ? alias : (body.alias ?? undefined);
    const nextTools = body.tools === undefined ? tools : (body.tools ?? undefined);
    const next: ConnectionState = {
      ...state,
      ...(nextAlias === undefined ? {} : { alias: nextAlias }),
      ...(nextTools === undefined ? {} : { tools: nextTools }),
    };
    return {
      record: { ...record, state: next },
      event: {
        type: 'connection.updated',
        actor: actorOf(principal),
        resource: connectionId,
        data: {
          alias: nextAlias ?? null,
          tools: nextTools === undefined ? null : { ...nextTools },
        },
      },
    };
  });
  if (written === null) throw notFound(connectionId);
  return written;
}
