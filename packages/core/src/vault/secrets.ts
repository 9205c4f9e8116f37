import { listScope } from '../auth/listing.js';
import { actorOf, assertCoversPath, type Principal } from '../auth/principal.js';
import { parseResourcePath } from '../auth/resource-path.js';
import { KeywayError } from '../contract/errors.js';
import { listPage, type Page } from '../contract/pagination.js';
import {
  PutSecretBody,
  type PutSecretInput,
  SecretListQuery,
  type SecretListQueryInput,
} from '../contract/schemas.js';
import { isoTime } from '../contract/time.js';
import { parseQuery, parseShape } from '../contract/validation.js';
import type { EventLog } from '../events/log.js';
import { utf8 } from '../platform/bytes.js';
import type { Storage } from '../storage/contract.js';
import type { EventWrite, VaultEntryRecord } from '../storage/record-types.js';
import type { Vault } from './vault.js';

/** The vault kind of the secrets the vault endpoints manage; Keyway's own use other kinds. */
export const SECRET_KIND = 'secret';

/** Largest secret value, in UTF-8 bytes (docs/api.md §7). */
export const MAX_SECRET_BYTES = 64 * 1024;

/**
 * A secret without its value, as lists and writes show it.
 *
 * @see [docs/api.md §7](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#7-vault)
 */
export interface SecretView {
  path: string;
  version: number;
  created_at: string;
  updated_at: string;
}

/**
 * A secret with its value, as `GET /api/vault/secrets/<path>` answers.
 *
 * @see [docs/api.md §7](https://github.com/keyway-dev/keyway/blob/main/docs/api.md#7-vault)
 */
export interface SecretWithValue extends SecretView {
  value: string;
}

function toView(entry: VaultEntryRecord): SecretView {
  return {
    path: entry.key,
    version: entry.version,
    created_at: isoTime(entry.createdAt),
    updated_at: isoTime(entry.updatedAt),
  };
}

/**
 * Secrets in the shared namespace (docs/api.md §7): written, read, listed and deleted by path,
 * each within the caller's scopes, encrypted at rest by the vault. Reached as
 * `broker.secrets`.
 */
export class SecretService {
  readonly #storage: Storage;
  readonly #vault: () => Vault;
  readonly #now: () => number;
  readonly #events: EventLog;

  constructor(options: {
    storage: Storage;
    vault: () => Vault;
    now: () => number;
    events: EventLog;
  }) {
    this.#events = options.events;
    this.#storage = options.storage;
    this.#vault = options.vault;
    this.#now = options.now;
  }

  /**
   * Creates or replaces a secret. Answers the view and whether it was created (201) or
   * replaced (200).
   *
   * @throws {KeywayError} `invalid_path`, `invalid_request`, `insufficient_scope`.
   */
  async put(
    principal: Principal,
    path: string,
    input: PutSecretInput,
  ): Promise<{ secret: SecretView; created: boolean }> {
    const valid = parseResourcePath(path);
    const { value } = parseShape(PutSecretBody, input);
    if (utf8(value).length > MAX_SECRET_BYTES) {
      const message = `"value" is larger than ${MAX_SECRET_BYTES} bytes`;
      throw new KeywayError('invalid_request', message, { details: [{ path: 'value', message }] });
    }
    assertCoversPath(principal, valid);
    const write = await this.#vault().seal({ kind: SECRET_KIND, key: valid }, value);
    const actor = actorOf(principal);
    let events: EventWrite | undefined;
    const { entry, created } = await this.#storage.putVaultEntry(write, this.#now(), (isNew) => {
      events = this.#events.of({
        type: isNew ? 'secret.created' : 'secret.updated',
        actor,
        resource: valid,
      });
      return events;
    });
    if (events !== undefined) this.#events.published(events);
    return { secret: toView(entry), created };
  }

  /**
   * Reads a secret with its value.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async get(principal: Principal, path: string): Promise<SecretWithValue> {
    const valid = parseResourcePath(path);
    assertCoversPath(principal, valid);
    const entry = await this.#storage.getVaultEntry(SECRET_KIND, valid);
    if (entry === null) throw new KeywayError('not_found', `no secret at ${JSON.stringify(valid)}`);
    const value = await this.#vault().open(entry);
    // Recorded before the value leaves: a read that cannot be recorded does not happen.
    await this.#events.append({
      type: 'secret.read',
      actor: actorOf(principal),
      resource: valid,
      data: { version: entry.version },
    });
    return { ...toView(entry), value };
  }

  /**
   * Deletes a secret.
   *
   * @throws {KeywayError} `invalid_path`, `insufficient_scope`, `not_found`.
   */
  async delete(principal: Principal, path: string): Promise<void> {
    const valid = parseResourcePath(path);
    assertCoversPath(principal, valid);
    const deleted = await this.#events.recorded(
      { type: 'secret.deleted', actor: actorOf(principal), resource: valid },
      (events) => this.#storage.deleteVaultEntry(SECRET_KIND, valid, events),
    );
    if (!deleted) throw new KeywayError('not_found', `no secret at ${JSON.stringify(valid)}`);
  }

  /** Lists the secrets the caller's scopes cover, without values, ordered by path. */
  async list(principal: Principal, query?: SecretListQueryInput): Promise<Page<SecretView>> {
    const options = parseQuery(SecretListQuery, query);
    const scope = listScope(principal, options.prefix);
    return listPage(
      options,
      (window) => this.#storage.listVaultEntries({ kind: SECRET_KIND, ...scope, ...window }),
      (entry) => entry.key,
      toView,
    );
  }
}
