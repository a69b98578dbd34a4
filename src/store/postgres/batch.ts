/** Greatest number of calls sent in one statement. */
const MAX_BATCH = 64;

/**
 * Group calls for PostgreSQL: the claims, or the commits, that arrive in the same turn of the event
 * loop go to the server as ONE statement (`claim_operations_v2`, migration 5 / `commit_operations`, migration 4),
 * so they share one round trip, one transaction and, for commits, one WAL flush, instead of paying
 * each per request. Each call keeps its own answer: the functions answer a refusal (busy, a lost
 * lease, a deleted entity) without writing anything, so one refusal does not disturb the others.
 * When the batch as a whole fails (a deadlock with another instance's batch, an error in one
 * call), nothing of it was kept, and each call is sent again on its own, so an error reaches only
 * the call that causes it. A lone call is sent as the plain function call. A claim batch takes its
 * locks in one global order (migration 5), so two instances' batches cannot deadlock each other;
 * `onFallback` reports any batch that failed as a whole (a deadlock shows as code 40P01).
 */
export function batched<R>(send: {
  single(params: unknown[]): Promise<R>;
  batch(columns: unknown[][]): Promise<R[]>;
  /** Told of each batch that failed as a whole (with the error and its number of calls) before they go alone. */
  onFallback?(error: unknown, calls: number): void;
}): (params: unknown[]) => Promise<R> {
  interface Queued {
    params: unknown[];
    resolve(result: R): void;
    reject(error: unknown): void;
  }
  const queue: Queued[] = [];
  let scheduled = false;

  function runAlone(item: Queued): void {
    send.single(item.params).then(item.resolve, item.reject);
  }

  function flush(): void {
    scheduled = false;
    while (queue.length > 0) {
      const group = queue.splice(0, MAX_BATCH);
      if (group.length === 1) {
        runAlone(group[0]!);
        continue;
      }
      // Column-wise: the functions take one array per parameter.
      const columns = group[0]!.params.map((_, column) => group.map((item) => item.params[column]));
      send.batch(columns).then((results) => {
        if (results.length !== group.length) throw new Error(`a batch of ${group.length} calls answered ${results.length} results`);
        group.forEach((item, index) => item.resolve(results[index]!));
      }).catch((error: unknown) => {
        // Rolled back as a whole: every call again, alone.
        send.onFallback?.(error, group.length);
        for (const item of group) runAlone(item);
      });
    }
  }

  return (params) =>
    new Promise<R>((resolve, reject) => {
      queue.push({ params, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        // setImmediate, not a microtask: requests whose I/O completed in the same turn get to join.
        setImmediate(flush);
      }
    });
}
