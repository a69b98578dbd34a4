import type BetterSqlite3 from 'better-sqlite3';

/** Counts for tests and diagnostics: how many write requests shared how many transactions. */
export interface GroupCommitHooks {
  /**
   * Called after each transaction committed, with its number of writes and whether it was flushed
   * to disk before returning (`synchronous = FULL`) or not (`NORMAL`: no write of it needed it).
   */
  onCommit?(writes: number, flushed: boolean): void;
}

/** Queues write transactions and runs them in groups; see {@link groupCommit}. */
export interface GroupCommitter {
  /**
   * Runs `work` inside the next group's transaction; resolves once that transaction committed, and
   * is on disk unless `durable` is false. `durable: false` suits writes whose loss in a power cut
   * is harmless (an operation claim: a restart expires running claims anyway; an outbox claim or
   * attempt record: the callback is sent again): a group of only such writes commits without a
   * flush, and the next flushed commit puts them on disk too.
   */
  write<T>(work: () => T, durable?: boolean): Promise<T>;
  /** Runs what is queued now (before closing the database). */
  flush(): void;
  /**
   * Called by a write while it runs (`durable: false`) once it turns out to need the flush after
   * all (a claim that recorded a refusal): its group is rolled back and run again, flushed, before
   * any promise settles.
   */
  requireFlush(): void;
}

const SETTLED = Symbol('settled');
const RERUN_FLUSHED = Symbol('rerun flushed');
const RERUN_ISOLATED = Symbol('rerun isolated');

interface Queued {
  work: () => unknown;
  durable: boolean;
  resolve(value: unknown): void;
  reject(reason: unknown): void;
}

/**
 * Group commit for one better-sqlite3 connection. With `synchronous = FULL` every COMMIT waits for
 * a disk flush (an fsync of the WAL, on the event loop), which costs far more than the statements; so writes that
 * arrive within the same tick run in ONE transaction (`BEGIN IMMEDIATE … COMMIT`, one flush). A
 * write that throws (a refused commit, a constraint) rolls back only its own changes and rejects
 * only its own promise: the group is first run without savepoints, which cost two statements per
 * write, and when one of its writes throws, everything is rolled back and the group runs again
 * with each write in its own savepoint. Every promise settles after the COMMIT returned, so no
 * caller is answered before its write is on disk; if the COMMIT itself fails (disk full, I/O), every
 * write of the group rejects with that error and nothing of the group is kept.
 *
 * A write may therefore run twice before its promise settles (rolled back in between): writes
 * must have no effect outside the database.
 *
 * `mapError` turns a driver error into what callers should see (e.g. 503 for a busy database).
 */
export function groupCommit(db: BetterSqlite3.Database, mapError: (error: unknown) => unknown, hooks: GroupCommitHooks = {}): GroupCommitter {
  // Prepared once: db.exec() parses its text on every call, and a group runs several of these.
  const control = {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    savepoint: db.prepare('SAVEPOINT write'),
    release: db.prepare('RELEASE write'),
    rollbackTo: db.prepare('ROLLBACK TO write'),
  };
  let queue: Queued[] = [];
  let scheduled = false;
  let flushing: boolean | undefined;

  // Set while a group planned without a flush runs: a write that turns out to need one says so
  // (see GroupCommitter.requireFlush), and the group runs again, flushed.
  let flushWanted = false;

  function runGroup(): void {
    scheduled = false;
    const group = queue;
    queue = [];
    if (group.length === 0) return;
    let flush = group.some((item) => item.durable);
    let savepoints = false;
    let outcome = runTransaction(group, flush, savepoints);
    // At most twice more: a rerun asks for a flush or for savepoints, each once.
    for (let rerun = 0; rerun < 2 && (outcome === RERUN_FLUSHED || outcome === RERUN_ISOLATED); rerun++) {
      if (outcome === RERUN_FLUSHED) flush = true;
      else savepoints = true;
      outcome = runTransaction(group, flush, savepoints);
    }
    if (typeof outcome !== 'object') return;
    hooks.onCommit?.(group.length, outcome.flushed);
    settle(group, outcome.results);
  }

  /**
   * Runs the group in one transaction and commits it. Answers SETTLED when it settled the group
   * itself (the transaction failed as a whole, or a lone write threw); RERUN_FLUSHED when a group
   * planned without a flush had a write ask for one, and RERUN_ISOLATED when a write threw in a
   * group run without savepoints: everything was rolled back, to be run again with the flush, or
   * with savepoints.
   */
  function runTransaction(group: Queued[], flush: boolean, savepoints: boolean): { results: { ok: boolean; value: unknown }[]; flushed: boolean } | typeof SETTLED | typeof RERUN_FLUSHED | typeof RERUN_ISOLATED {
    const results: { ok: boolean; value: unknown }[] = [];
    try {
      // Outside the transaction: SQLite applies the setting to the next COMMIT (and refuses to
      // change it inside one). Not a prepared statement: SQLite applies this pragma when it
      // compiles it, not when it runs.
      if (flush !== flushing) {
        db.pragma(flush ? 'synchronous = FULL' : 'synchronous = NORMAL');
        flushing = flush;
      }
      control.begin.run();
    } catch (error) {
      for (const item of group) item.reject(mapError(error));
      return SETTLED;
    }
    flushWanted = false;
    try {
      if (!savepoints) {
        for (const item of group) {
          try {
            results.push({ ok: true, value: item.work() });
          } catch (error) {
            // Rare (a refused commit): undo the whole group. Alone in its transaction, the write
            // that threw is all the rollback undid: it is settled now. Otherwise the group runs
            // again, write by write.
            control.rollback.run();
            if (group.length > 1) return RERUN_ISOLATED;
            settle(group, [{ ok: false, value: error }]);
            return SETTLED;
          }
        }
      } else {
        for (const item of group) {
          control.savepoint.run();
          try {
            results.push({ ok: true, value: item.work() });
            control.release.run();
          } catch (error) {
            control.rollbackTo.run();
            control.release.run();
            results.push({ ok: false, value: error });
          }
        }
      }
      if (!flush && flushWanted) {
        // Rare (a claim that recorded a refusal): the group's writes have no effect outside the
        // database, so running them again in a flushed transaction is safe.
        control.rollback.run();
        return RERUN_FLUSHED;
      }
      control.commit.run();
    } catch (error) {
      // The transaction as a whole failed (COMMIT, or a savepoint statement): nothing of it is kept.
      try {
        if (db.inTransaction) control.rollback.run();
      } catch {
        // The connection already dropped the transaction.
      }
      for (const item of group) item.reject(mapError(error));
      return SETTLED;
    } finally {
      flushWanted = false;
    }
    return { results, flushed: flush };
  }

  function settle(group: Queued[], results: { ok: boolean; value: unknown }[]): void {
    group.forEach((item, index) => {
      const result = results[index]!;
      if (result.ok) item.resolve(result.value);
      else item.reject(mapError(result.value));
    });
  }

  return {
    write<T>(work: () => T, durable = true): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ work, durable, resolve: resolve, reject });
        if (!scheduled) {
          scheduled = true;
          // setImmediate, not a microtask: requests whose I/O completed in the same turn of the
          // event loop get to queue their writes before the group runs.
          setImmediate(runGroup);
        }
      });
    },
    flush: runGroup,
    requireFlush() {
      flushWanted = true;
    },
  };
}
