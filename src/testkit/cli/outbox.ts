import { createInterface } from 'node:readline';
import type { DeliverySummary } from '../../observability/store-view.js';
import {
  CommandFailure,
  displayUrl,
  duration,
  iso,
  limitOption,
  need,
  openStore,
  parseStoreSpec,
  printJson,
  redact,
  STORE_FLAGS,
  STORE_FLAGS_USAGE,
  table,
  withStore,
  type CliStore,
  type DiagnosticsDeps,
} from './diagnostics.js';
import { EXIT, parse, UsageError, type CliIo } from './io.js';

export const OUTBOX_USAGE = `Usage: embedded-marketplace outbox <list|show|retry|drop> [ID] --store SPEC [options]

Looks at the callback outbox of a provider's store, from any machine that reaches the store,
while the provider runs. Never needs the store's encryption key and never prints a callback's
payload (credential values).

  list          deliveries waiting or given up on, oldest first
  show ID       one delivery in full
  retry ID      make a waiting or failed delivery due now (the running outbox sends it next)
  drop ID       delete a delivery: the marketplace never gets that callback (asks first)

${STORE_FLAGS_USAGE}
  --state STATE       list: pending or failed only (default both)
  --limit N           list: at most N deliveries (default 100)
  --yes               drop: do not ask for confirmation
`;

const SUBCOMMANDS = ['list', 'show', 'retry', 'drop'] as const;

/** A delivery as the commands print it: the summary, with readable times and a URL without secrets. */
function view(d: DeliverySummary, now: number) {
  return {
    id: d.id,
    callbackId: d.callbackId,
    url: displayUrl(d.url),
    state: d.state,
    attempts: d.attempts,
    createdAt: iso(d.createdAt),
    ageSeconds: Math.max(0, Math.floor((now - d.createdAt) / 1000)),
    nextAttemptAt: iso(d.nextAttemptAt),
    deadlineAt: iso(d.deadlineAt),
    ...(d.lastError === undefined ? {} : { lastError: redact(d.lastError) }),
    ...(d.claimedBy === undefined ? {} : { claimedBy: d.claimedBy, claimExpiresAt: iso(d.claimExpiresAt) }),
  };
}

function next(d: DeliverySummary, now: number): string {
  if (d.state === 'failed') return 'never (failed)';
  return d.nextAttemptAt <= now ? 'due' : `in ${duration(d.nextAttemptAt - now)}`;
}

/**
 * `outbox list|show|retry|drop`: the callback outbox from the command line. `deps` replace the
 * store opener and the clock in tests.
 */
export async function outboxCommand(args: string[], io: CliIo, deps: DiagnosticsDeps = {}): Promise<number> {
  const { values, positionals } = parse(args, { ...STORE_FLAGS, state: { type: 'string' }, limit: { type: 'string' }, yes: { type: 'boolean', short: 'y' } });
  if (values.help === true) {
    io.stdout.write(OUTBOX_USAGE);
    return EXIT.ok;
  }
  const [sub, id, ...extra] = positionals;
  if (sub === undefined || !(SUBCOMMANDS as readonly string[]).includes(sub)) throw new UsageError(`expected one of ${SUBCOMMANDS.join(', ')}${sub === undefined ? '' : `, got ${JSON.stringify(sub)}`}`);
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
  if (sub === 'list' && id !== undefined) throw new UsageError('outbox list takes no delivery id');
  if (sub !== 'list' && id === undefined) throw new UsageError(`outbox ${sub} needs a delivery id (see "outbox list")`);
  if (sub !== 'list' && (values.state !== undefined || values.limit !== undefined)) throw new UsageError('--state and --limit apply to outbox list only');
  if (sub !== 'drop' && values.yes === true) throw new UsageError('--yes applies to outbox drop only');
  const state = values.state;
  if (state !== undefined && state !== 'pending' && state !== 'failed') throw new UsageError(`--state must be pending or failed, got ${JSON.stringify(state)}`);
  const limit = limitOption(values.limit, 100);
  const spec = parseStoreSpec(io, values.store, values.schema);
  const json = values.json === true;

  return withStore(`outbox ${sub}`, io, spec, deps.open ?? openStore, async (store) => {
    const now = (deps.now ?? Date.now)();
    switch (sub) {
      case 'list': {
        const deliveries = await need(store, 'listDeliverySummaries')({ ...(state === undefined ? {} : { state }), limit });
        if (json) printJson(io, deliveries.map((d) => view(d, now)));
        else if (deliveries.length === 0) io.stdout.write(`No ${state ?? ''}${state === undefined ? '' : ' '}deliveries in the outbox.\n`);
        else {
          io.stdout.write(table(
            ['ID', 'CALLBACK', 'STATE', 'ATTEMPTS', 'AGE', 'NEXT', 'DEADLINE IN', 'LAST ERROR'],
            deliveries.map((d) => [d.id, d.callbackId, d.state, String(d.attempts), duration(now - d.createdAt), next(d, now), duration(d.deadlineAt - now), redact(d.lastError ?? '')]),
          ));
        }
        return EXIT.ok;
      }
      case 'show': {
        const delivery = await found(store, id!);
        if (json) printJson(io, view(delivery, now));
        else {
          const v = view(delivery, now);
          const rows: [string, string | number | undefined][] = [
            ['id', v.id], ['callback id', v.callbackId], ['url', v.url], ['state', v.state], ['attempts', v.attempts],
            ['created', `${v.createdAt} (${duration(now - delivery.createdAt)} ago)`], ['next attempt', `${v.nextAttemptAt} (${next(delivery, now)})`],
            ['deadline', `${v.deadlineAt} (in ${duration(delivery.deadlineAt - now)})`], ['last error', v.lastError],
            ['claimed by', v.claimedBy === undefined ? undefined : `${v.claimedBy} until ${v.claimExpiresAt}`],
          ];
          io.stdout.write(rows.filter(([, value]) => value !== undefined).map(([k, value]) => `${`${k}:`.padEnd(14)}${value}`).join('\n') + '\n');
        }
        return EXIT.ok;
      }
      case 'retry': {
        const delivery = await found(store, id!);
        if (!(await need(store, 'makeDeliveryDue')(delivery.id, now))) throw new CommandFailure(`no delivery ${delivery.id} (it was delivered or dropped meanwhile)`);
        if (json) printJson(io, { id: delivery.id, due: true, nextAttemptAt: iso(now), previousState: delivery.state });
        else io.stdout.write(`Delivery ${delivery.id} (callback ${delivery.callbackId}) is due now; a running provider's outbox sends it on its next poll.\n`);
        return EXIT.ok;
      }
      default: {
        const delivery = await found(store, id!);
        if (values.yes !== true && !(await confirm(io, `Drop delivery ${delivery.id} (callback ${delivery.callbackId}, ${delivery.state}, ${delivery.attempts} attempts)? The marketplace will never receive this callback. [y/N] `))) {
          io.stderr.write('Not dropped.\n');
          return EXIT.failed;
        }
        if (!(await need(store, 'dropDelivery')(delivery.id))) throw new CommandFailure(`no delivery ${delivery.id} (it was delivered or dropped meanwhile)`);
        if (json) printJson(io, { id: delivery.id, dropped: true });
        else io.stdout.write(`Dropped delivery ${delivery.id} (callback ${delivery.callbackId}).\n`);
        return EXIT.ok;
      }
    }
  });
}

async function found(store: CliStore, id: string): Promise<DeliverySummary> {
  const delivery = await need(store, 'getDeliverySummary')(id);
  if (delivery === undefined) throw new CommandFailure(`no delivery ${JSON.stringify(id)} in the outbox (see "outbox list")`);
  return delivery;
}

/** Asks on stderr, reads one line of stdin: only `y` or `yes` confirms. No stdin means no. */
async function confirm(io: CliIo, question: string): Promise<boolean> {
  if (io.stdin === undefined) throw new UsageError('drop asks for confirmation on standard input; pass --yes to drop without asking');
  io.stderr.write(question);
  const lines = createInterface({ input: io.stdin, terminal: false });
  try {
    for await (const line of lines) return /^\s*y(es)?\s*$/i.test(line);
    return false;
  } finally {
    lines.close();
  }
}
