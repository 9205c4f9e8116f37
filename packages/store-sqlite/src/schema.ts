/**
 * Versioned migrations of the SQLite schema. Each runs once, in order, inside the
 * transaction that records it; never edit one that has shipped, add the next.
 *
 * Text keys use SQLite's default BINARY collation, which compares UTF-8 bytes: that is
 * Unicode code point order, the order of every Keyway list.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE keyway_tokens (
    id_hash    TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    scopes     TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX keyway_tokens_expires_at ON keyway_tokens (expires_at);

  CREATE TABLE keyway_providers (
    id         TEXT PRIMARY KEY,
    template   TEXT NOT NULL,
    state      TEXT NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  ) WITHOUT ROWID;

  CREATE TABLE keyway_connections (
    id          TEXT PRIMARY KEY,
    provider_id TEXT NOT NULL,
    status      TEXT NOT NULL,
    state       TEXT NOT NULL,
    version     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX keyway_connections_provider ON keyway_connections (provider_id, id);

  CREATE TABLE keyway_pending_authorizations (
    state_hash    TEXT PRIMARY KEY,
    connection_id TEXT NOT NULL,
    provider_id   TEXT NOT NULL,
    state         TEXT NOT NULL,
    expires_at    INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX keyway_pending_authorizations_expires_at
    ON keyway_pending_authorizations (expires_at);

  CREATE TABLE keyway_vault_entries (
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    ciphertext TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
  ) WITHOUT ROWID;
  CREATE INDEX keyway_vault_entries_key_id ON keyway_vault_entries (key_id, kind, key);

  CREATE TABLE keyway_leases (
    key        TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX keyway_leases_expires_at ON keyway_leases (expires_at);
  `,
  `
  CREATE TABLE keyway_counters (
    key        TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX keyway_counters_expires_at ON keyway_counters (expires_at);
  `,
];
