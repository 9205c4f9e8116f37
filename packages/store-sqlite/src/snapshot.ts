import type { SqliteConnection } from './driver.js';

/**
 * The read snapshots of every storage this process opened from a file, so that a write on
 * one connection ends the snapshots of the others: two storages on one file in one process
 * (two brokers, a tool beside a server) each read what the other has committed.
 */
const snapshots = new Set<ReadSnapshot>();

/** The end of this turn of the event loop, where the runtime has no `setImmediate`. */
const afterThisTurn: (callback: () => void) => void =
  typeof setImmediate === 'function'
    ? (callback) => setImmediate(callback)
    : (callback) => setTimeout(callback, 0);

/**
 * The reads of one turn of the event loop in one read transaction: the first read outside a
 * transaction begins it (`BEGIN`, deferred: SQLite takes its WAL read lock at that read) and
 * the end of the turn commits it (`setImmediate`). The token check and the route's own read
 * of a request, and the reads of every other request the same turn serves, then take the
 * WAL read lock once, not once per statement (each lock and unlock is an `fcntl`).
 *
 * What a reader sees: what was committed when the turn's first read ran. Every write of this
 * process ends the snapshots first, so a read after a write sees it; another process's
 * commit is seen from the next turn, as if the read had come a moment earlier — a request
 * is never served from a snapshot older than the event loop's current iteration.
 */
export class ReadSnapshot {
  readonly #begin;
  readonly #commit;
  #open = false;
  /** Inside a write transaction, reads are the transaction's own. */
  #writing = false;

  constructor(readonly db: SqliteConnection) {
    this.#begin = db.prepare('BEGIN');
    this.#commit = db.prepare('COMMIT');
    snapshots.add(this);
  }

  /** Before a read: joins this turn's snapshot, or begins it. */
  read(): void {
    if (this.#open || this.#writing) return;
    this.#begin.run();
    this.#open = true;
    afterThisTurn(() => this.end());
  }

  /** Commits the snapshot, if one is open (the turn ended, a write comes, or the storage closes). */
  end(): void {
    if (!this.#open) return;
    this.#open = false;
    if (this.db.open) this.#commit.run();
  }

  /** Runs `write` (a write outside a transaction, or one in `BEGIN IMMEDIATE`) after every snapshot ends. */
  write<T>(write: () => T): T {
    if (this.#writing) return write();
    for (const snapshot of snapshots) snapshot.end();
    this.#writing = true;
    try {
      return write();
    } finally {
      this.#writing = false;
    }
  }

  /** Ends the snapshot and forgets it: the storage is closing. */
  close(): void {
    this.end();
    snapshots.delete(this);
  }
}
