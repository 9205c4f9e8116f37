/**
 * Versioned migrations of the PostgreSQL schema, applied in order under an advisory lock.
 * `{s}` is replaced by the quoted schema name. Never edit one that has shipped; add the next.
 *
 * Keys are `text COLLATE "C"`, which compares UTF-8 bytes: Unicode code point order,
 * whatever the database's locale, and the only order in which a `>=`/`<` range on the index
 * is a prefix scan. JSON is kept as text: it is never queried, and `jsonb` would refuse
 * `\u0000` in a string a remote server sent.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE {s}.keyway_tokens (
    id_hash    text PRIMARY KEY,
    name       text COLLATE "C" NOT NULL UNIQUE,
    scopes     text NOT NULL,
    expires_at bigint NOT NULL,
    created_at bigint NOT NULL,
    created_by text NOT NULL
  );
  CREATE INDEX keyway_tokens_expires_at ON {s}.keyway_tokens (expires_at);

  CREATE TABLE {s}.keyway_providers (
    id         text COLLATE "C" PRIMARY KEY,
    template   text NOT NULL,
    state      text NOT NULL,
    version    integer NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
  );

  CREATE TABLE {s}.keyway_connections (
    id          text COLLATE "C" PRIMARY KEY,
    provider_id text COLLATE "C" NOT NULL,
    status      text NOT NULL,
    state       text NOT NULL,
    version     integer NOT NULL,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
  );
  CREATE INDEX keyway_connections_provider ON {s}.keyway_connections (provider_id, id);

  CREATE TABLE {s}.keyway_pending_authorizations (
    state_hash    text PRIMARY KEY,
    connection_id text NOT NULL,
    provider_id   text NOT NULL,
    state         text NOT NULL,
    expires_at    bigint NOT NULL,
    created_at    bigint NOT NULL
  );
  CREATE INDEX keyway_pending_authorizations_expires_at
    ON {s}.keyway_pending_authorizations (expires_at);

  CREATE TABLE {s}.keyway_vault_entries (
    kind       text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    ciphertext text NOT NULL,
    key_id     text NOT NULL,
    version    integer NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (kind, key)
  );
  CREATE INDEX keyway_vault_entries_key_id ON {s}.keyway_vault_entries (key_id, kind, key);

  CREATE TABLE {s}.keyway_leases (
    key        text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX keyway_leases_expires_at ON {s}.keyway_leases (expires_at);
  `,
  `
  CREATE TABLE {s}.keyway_counters (
    key        text PRIMARY KEY,
    count      bigint NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX keyway_counters_expires_at ON {s}.keyway_counters (expires_at);
  `,
];
