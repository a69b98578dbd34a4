import type { OperationRecord } from '../../store/types.js';
import { duration, iso, limitOption, need, openStore, parseStoreSpec, printJson, STORE_FLAGS, STORE_FLAGS_USAGE, table, withStore, type DiagnosticsDeps } from './diagnostics.js';
import { EXIT, parse, UsageError, type CliIo } from './io.js';

export const OPERATIONS_USAGE = `Usage: embedded-marketplace operations list --store SPEC [options]

Lists the long-running operations (answered 202) that wait for your code to complete them, oldest
first, with their age, callback id and the time left before the marketplace's 24 h deadline.
Never needs the store's encryption key.

${STORE_FLAGS_USAGE}
  --limit N           at most N operations (default 100)
`;

/** What is printed of an operation: never its fencing token or request fingerprint. */
function view(op: OperationRecord, now: number) {
  return {
    kind: op.kind,
    id: op.targetId,
    callbackId: op.callbackId ?? null,
    message: op.message ?? null,
    createdAt: iso(op.createdAt),
    ageSeconds: Math.max(0, Math.floor((now - op.createdAt) / 1000)),
    deadlineAt: iso(op.deadlineAt) ?? null,
    secondsToDeadline: op.deadlineAt === undefined ? null : Math.floor((op.deadlineAt - now) / 1000),
  };
}

/** `operations list`: pending (202) operations, oldest first. `deps`: store opener and clock, for tests. */
export async function operationsCommand(args: string[], io: CliIo, deps: DiagnosticsDeps = {}): Promise<number> {
  const { values, positionals } = parse(args, { ...STORE_FLAGS, limit: { type: 'string' } });
  if (values.help === true) {
    io.stdout.write(OPERATIONS_USAGE);
    return EXIT.ok;
  }
  const [sub, ...extra] = positionals;
  if (sub !== 'list') throw new UsageError(`expected list${sub === undefined ? '' : `, got ${JSON.stringify(sub)}`}`);
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  const limit = limitOption(values.limit, 100);
  const spec = parseStoreSpec(io, values.store, values.schema);

  return withStore('operations list', io, spec, deps.open ?? openStore, async (store) => {
    const now = (deps.now ?? Date.now)();
    const operations = await need(store, 'listPendingOperations')(limit);
    if (values.json === true) printJson(io, operations.map((op) => view(op, now)));
    else if (operations.length === 0) io.stdout.write('No operation waits for completion.\n');
    else {
      io.stdout.write(table(
        ['KIND', 'ID', 'CALLBACK', 'AGE', 'DEADLINE IN'],
        operations.map((op) => [op.kind, op.targetId, op.callbackId ?? '-', duration(now - op.createdAt), op.deadlineAt === undefined ? '-' : duration(op.deadlineAt - now)]),
      ));
    }
    return EXIT.ok;
  });
}
