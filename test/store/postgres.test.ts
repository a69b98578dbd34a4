/**
 * PostgreSQL adapter: the shared contract plus what only a shared database shows (races between
 * processes, migrations run by several instances, connection loss). Needs DATABASE_URL (CI sets
 * postgres://postgres@127.0.0.1:5432/test); without it, or with the server unreachable, these tests
 * report themselves skipped with the reason. Each store gets its own random schema, dropped after.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { InvalidOptionsError, ServiceUnavailableError } from '../../src/errors.js';
import { createRedactingLogger } from '../../src/lib/logger.js';
import { generateEncryptionKey } from '../../src/store/crypto.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/migrations/postgres.js';
import { isTransientPostgresError, migratePostgres, postgresStore, type PostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/index.js';
import type { ClaimInput, Store } from '../../src/store/types.js';
import { DATABASE_URL, postgresSkipReason } from '../helpers/postgres.js';
import { heldBy, operationTableContract, storeContract } from './contract.js';
import { durableCases } from './durable-cases.js';

const KEY = generateEncryptionKey();
const T0 = 1_700_000_000_000;


const skip = await postgresSkipReason();
if (skip !== false) console.log(`postgres store tests skipped: ${skip}`);
/** A test that needs the server: reported skipped, with the reason, when there is none. */
const pgIt = (name: string, fn: () => Promise<void>): void => {
  it(name, { skip }, fn);
};

const admin = skip === false ? new pg.Pool({ connectionString: DATABASE_URL, max: 3 }) : undefined;
admin?.on('error', () => undefined);
const schemas = new Set<string>();

function newSchema(): string {
  const schema = `em_test_${randomBytes(6).toString('hex')}`;
  schemas.add(schema);
  return schema;
}

async function dropSchema(schema: string): Promise<void> {
  await admin!.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  schemas.delete(schema);
}

after(async () => {
  if (admin === undefined) return;
  for (const schema of [...schemas]) await dropSchema(schema);
  await admin.end();
});

function open(extra: Partial<PostgresStoreOptions> & { schema: string }): PostgresStore {
  return postgresStore({ connectionString: DATABASE_URL, encryptionKey: KEY, logger: false, poolSize: 4, ...extra });
}

const makePostgres = async () => {
  const schema = newSchema();
  const store = open({ schema });
  await store.ready();
  return {
    store,
    cleanup: async () => {
      await store.close();
      await dropSchema(schema);
    },
  };
};
storeContract('postgres', makePostgres, { skip });
operationTableContract('postgres', makePostgres, { skip });

durableCases(
  'postgres',
  async () => {
    const schema = newSchema();
    return {
      open: async (key) => {
        const store = open({ schema, encryptionKey: key === 'key' ? KEY : false });
        await store.ready();
        return store;
      },
      cleanup: () => dropSchema(schema),
    };
  },
  { skip },
);

function claimInput(overrides: Partial<ClaimInput> = {}): ClaimInput {
  return {
    key: 'resource:r1',
    kind: 'provision',
    targetId: 'r1',
    fingerprint: 'f',
    request: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 } },
    owner: 'owner-a',
    now: T0,
    leaseMs: 30_000,
    ...overrides,
  };
}

async function provision(store: Store, id: string): Promise<void> {
  const claim = await store.claimOperation(claimInput({ key: `resource:${id}`, targetId: id }));
  assert.equal(claim.outcome, 'claimed');
  await store.commitOperation(heldBy(claim).key, heldBy(claim).token, {
    mutation: { type: 'putResource', resource: { id, product: 'bonnets', plan: 'small', region: 'all::global', features: {}, message: 'Ready', createdAt: T0, updatedAt: T0 } },
  });
}

/** Waits (bounded) until `check` holds; for states another connection reaches on its own time. */
async function eventually(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`timed out waiting until ${what}`);
}

/**
 * A TCP relay to the real server that the test can cut (with a TCP reset, as a dead host or a
 * failover does) and restore on the same port, to simulate an outage.
 */
function createRelay(target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  const clients = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  return {
    get port() {
      return port;
    },
    async start(): Promise<void> {
      server = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host);
        clients.add(client);
        client.on('close', () => clients.delete(client));
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('error', () => undefined);
          socket.on('close', () => {
            sockets.delete(socket);
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
      await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
      port = (server.address() as net.AddressInfo).port;
    },
    async stop(): Promise<void> {
      const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
      for (const socket of clients) socket.resetAndDestroy();
      for (const socket of sockets) socket.destroy();
      await closing;
    },
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('postgresStore: options and errors (no server needed)', () => {
  it('validates its options at construction without connecting', () => {
    const base = { connectionString: 'postgres://u:pw@127.0.0.1:1/db', encryptionKey: KEY };
    const refused: [unknown, RegExp][] = [
      [{ encryptionKey: KEY }, /exactly one of "pool".*or "connectionString"/],
      [{ ...base, pool: new pg.Pool() }, /exactly one of/],
      [{ connectionString: base.connectionString }, /"encryptionKey" is required.*randomBytes\(32\)/],
      [{ ...base, schema: 'Bad-Name' }, /"schema" must match/],
      [{ ...base, schema: 'x"; DROP TABLE y; --' }, /"schema" must match/],
      [{ ...base, shema: 'x' }, /unknown option "shema".*did you mean "schema"/],
      [{ ...base, poolSize: 0 }, /"poolSize" must be an integer >= 1/],
      [{ ...base, migrate: 'yes' }, /"migrate" must be a boolean/],
      [{ pool: new pg.Pool(), encryptionKey: KEY, poolSize: 3 }, /applies to the store's own pool only/],
      [{ connectionString: 'mysql://u:topsecret@h/db', encryptionKey: KEY }, /must be a postgres:\/\//],
    ];
    for (const [options, message] of refused) {
      assert.throws(
        () => postgresStore(options as PostgresStoreOptions),
        (error: unknown) => error instanceof InvalidOptionsError && message.test(error.message) && !error.message.includes('topsecret'),
        `refuses ${JSON.stringify(options)}`,
      );
    }
  });

  it('answers ServiceUnavailableError while the server cannot be reached, without leaking the password', async () => {
    const port = await freePort();
    const lines: string[] = [];
    const store = postgresStore({
      connectionString: `postgres://someone:hunter2-secret@127.0.0.1:${port}/nowhere`,
      encryptionKey: KEY,
      logger: createRedactingLogger({ write: (line: string) => void lines.push(line) }),
    });
    try {
      await assert.rejects(store.getResource('r1'), (error: unknown) => {
        assert.ok(error instanceof ServiceUnavailableError);
        assert.equal(error.status, 503);
        assert.deepEqual(error.toJSON(), { message: 'Service temporarily unavailable, retry later' });
        return true;
      });
      await assert.rejects(store.claimOperation(claimInput()), ServiceUnavailableError);
      await assert.rejects(store.commitOperation('resource:r1', 't', { mutation: { type: 'none' } }), ServiceUnavailableError);
      await assert.rejects(store.ready(), ServiceUnavailableError);
      await eventually('the start-up failure is logged', () => lines.some((line) => line.includes('start-up failed')));
      for (const line of lines) assert.doesNotMatch(line, /hunter2-secret/);
    } finally {
      await store.close();
    }
    await assert.rejects(store.getResource('r1'), ServiceUnavailableError);
  });

  it('tells transient errors from statement errors', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', '08006', '08001', '57P01', '57P03', '53300', '40001', '40P01', '57014', '25006']) {
      assert.equal(isTransientPostgresError(Object.assign(new Error('x'), { code })), true, code);
    }
    assert.equal(isTransientPostgresError(new Error('Connection terminated unexpectedly')), true);
    assert.equal(isTransientPostgresError(new Error('timeout exceeded when trying to connect')), true);
    for (const code of ['23505', '42P01', '42601', '22P02']) {
      assert.equal(isTransientPostgresError(Object.assign(new Error('x'), { code })), false, code);
    }
  });
});

describe('postgresStore', () => {
  pgIt('a signed PUT takes two statements on its success path: one claim, one commit (resource and credential alike)', async () => {
    const schema = newSchema();
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    const store = postgresStore({ pool, schema, encryptionKey: KEY, logger: false });
    try {
      await store.ready();
      // Every statement the store sends through pool.query; a checkout for anything else (BEGIN …
      // COMMIT on a client) shows as an 'acquire' without a statement.
      const sent: string[] = [];
      let acquired = 0;
      pool.on('acquire', () => void (acquired += 1));
      const poolQuery = pool.query.bind(pool);
      pool.query = ((text: unknown, ...rest: unknown[]) => {
        sent.push(typeof text === 'string' ? text : (text as { text: string }).text);
        return (poolQuery as (...args: unknown[]) => unknown)(text, ...rest);
      }) as typeof pool.query;

      const r = heldBy(await store.claimOperation(claimInput({ requestId: 'sig-r1' })));
      await store.commitOperation(r.key, r.token, {
        mutation: { type: 'putResource', resource: { id: 'r1', product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 }, message: 'Ready', createdAt: T0, updatedAt: T0 } },
        replay: { requestId: 'sig-r1', answer: { status: 201, body: { message: 'Ready' } }, expiresAt: T0 + 600_000 },
      });
      assert.equal(sent.length, 2, `provision: ${sent.join(' | ')}`);
      assert.equal(acquired, 2, 'no other connection checkout');
      sent.length = 0;
      const c = heldBy(
        await store.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' }, parentId: 'r1', requestId: 'sig-c1' })),
      );
      await store.commitOperation(c.key, c.token, {
        mutation: { type: 'putCredential', credential: { id: 'c1', resourceId: 'r1', values: { URL: 'x' }, message: 'Ready', createdAt: T0 } },
        replay: { requestId: 'sig-c1', answer: { status: 201, body: { credentials: { URL: 'x' } } }, expiresAt: T0 + 600_000 },
      });
      assert.equal(sent.length, 2, `credentials: ${sent.join(' | ')}`);
      sent.length = 0;
      assert.equal((await store.claimOperation(claimInput({ requestId: 'sig-c1' }))).outcome, 'replayed');
      assert.equal(sent.length, 1, 'a replay is one statement');
    } finally {
      await store.close();
      await pool.end();
      await dropSchema(schema);
    }
  });

  /** A store on its own pool whose statements the test sees, and can make fail. */
  async function watchedStore(fail: (text: string) => boolean = () => false) {
    const schema = newSchema();
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    const store = postgresStore({ pool, schema, encryptionKey: KEY, logger: false });
    await store.ready();
    const sent: string[] = [];
    const poolQuery = pool.query.bind(pool);
    pool.query = ((config: unknown, ...rest: unknown[]) => {
      const text = typeof config === 'string' ? config : (config as { text: string }).text;
      sent.push(text);
      if (fail(text)) return Promise.reject(Object.assign(new Error('deadlock detected'), { code: '40P01' }));
      return (poolQuery as (...args: unknown[]) => unknown)(config, ...rest);
    }) as typeof pool.query;
    const cleanup = async () => {
      await store.close();
      await pool.end();
      await dropSchema(schema);
    };
    return { store, sent, cleanup };
  }

  const resourceCommit = (id: string) => ({
    mutation: { type: 'putResource' as const, resource: { id, product: 'bonnets', plan: 'small', region: 'all::global', features: { seats: 1 }, message: `Ready ${id}`, createdAt: T0, updatedAt: T0 } },
    replay: { requestId: `sig-${id}`, answer: { status: 201, body: { message: `Ready ${id}` } }, expiresAt: T0 + 600_000 },
  });

  pgIt('commits arriving together go in one statement; a refused one is refused alone', async () => {
    const { store, sent, cleanup } = await watchedStore();
    try {
      await provision(store, 'base');
      const claims = [];
      for (const id of ['r1', 'r2', 'r3', 'lost']) claims.push(heldBy(await store.claimOperation(claimInput({ key: `resource:${id}`, targetId: id, requestId: `sig-${id}` }))));
      const credential = heldBy(
        await store.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'base' }, parentId: 'base' })),
      );
      sent.length = 0;
      const outcomes = await Promise.all([
        ...claims.map((claim) => store.commitOperation(claim.key, claim.key === 'resource:lost' ? 'not-the-token' : claim.token, resourceCommit(claim.targetId))),
        store.commitOperation(credential.key, credential.token, {
          mutation: { type: 'putCredential', credential: { id: 'c1', resourceId: 'base', values: { URL: 'postgres://u:hunter2@db/x' }, message: 'Ready', createdAt: T0 } },
          replay: { requestId: 'sig-c1', answer: { status: 201, body: { message: 'Ready', credentials: { URL: 'postgres://u:hunter2@db/x' } } }, expiresAt: T0 + 600_000 },
        }),
      ]);
      assert.equal(sent.length, 1, `one statement for five commits: ${sent.join(' | ')}`);
      assert.match(sent[0]!, /commit_operations\(/);
      // Stores answer outcomes (issue 19): the stale token's commit answers lease_lost.
      assert.deepEqual(outcomes.map((result) => result.outcome), ['committed', 'committed', 'committed', 'lease_lost', 'committed']);
      for (const id of ['r1', 'r2', 'r3']) assert.equal((await store.getResource(id))?.message, `Ready ${id}`);
      assert.equal(await store.getResource('lost'), undefined, 'the refused commit wrote nothing');
      assert.equal(await store.getOperation('resource:lost').then((operation) => operation?.state), 'running', 'and left its claim to its holder');
      assert.deepEqual((await store.getCredential('c1'))?.values, { URL: 'postgres://u:hunter2@db/x' }, 'sealed values survive the array parameters');
      const replayed = await store.claimOperation(claimInput({ key: 'credential:c1', requestId: 'sig-c1' }));
      assert.deepEqual(replayed, { outcome: 'replayed', answer: { status: 201, body: { message: 'Ready', credentials: { URL: 'postgres://u:hunter2@db/x' } } } });
      assert.deepEqual(await store.claimOperation(claimInput({ key: 'resource:r2', requestId: 'sig-r2' })), { outcome: 'replayed', answer: { status: 201, body: { message: 'Ready r2' } } });
    } finally {
      await cleanup();
    }
  });

  pgIt('claims arriving together go in one statement, each with its own answer', async () => {
    const { store, sent, cleanup } = await watchedStore();
    try {
      await provision(store, 'base');
      sent.length = 0;
      const [first, duplicate, other, credential] = await Promise.all([
        store.claimOperation(claimInput({ key: 'resource:r1', targetId: 'r1', requestId: 'sig-r1' })),
        store.claimOperation(claimInput({ key: 'resource:r1', targetId: 'r1', requestId: 'sig-r1-again' })),
        store.claimOperation(claimInput({ key: 'resource:r2', targetId: 'r2' })),
        store.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'base' }, parentId: 'base' })),
      ]);
      assert.equal(sent.length, 1, `one statement for four claims: ${sent.join(' | ')}`);
      assert.match(sent[0]!, /claim_operations_v2\(/);
      assert.equal(first.outcome, 'claimed');
      assert.equal(duplicate.outcome, 'busy', 'the same key twice in one batch: the second finds the first');
      assert.equal(other.outcome, 'claimed');
      assert.equal(credential.outcome, 'claimed');
      assert.equal((credential).snapshot.resource?.id, 'base', 'each claim reads its own snapshot');
      assert.notEqual(heldBy(first).token, heldBy(other).token);
    } finally {
      await cleanup();
    }
  });

  pgIt('a batch the server rolls back as a whole is sent again one commit at a time', async () => {
    let failures = 1;
    const { store, sent, cleanup } = await watchedStore((text) => /commit_operations\(/.test(text) && failures-- > 0);
    try {
      const claims = [];
      for (const id of ['r1', 'r2', 'r3']) claims.push(heldBy(await store.claimOperation(claimInput({ key: `resource:${id}`, targetId: id, requestId: `sig-${id}` }))));
      sent.length = 0;
      await Promise.all(claims.map((claim) => store.commitOperation(claim.key, claim.token, resourceCommit(claim.targetId))));
      assert.equal(sent.filter((text) => /commit_operations\(/.test(text)).length, 1, 'the batch, refused');
      assert.equal(sent.filter((text) => /commit_operation\(/.test(text)).length, 3, 'then each commit alone');
      for (const id of ['r1', 'r2', 'r3']) assert.equal((await store.getResource(id))?.message, `Ready ${id}`);
    } finally {
      await cleanup();
    }
  });

  pgIt("a credential claim and its resource's deprovision claim on two instances never both win", async () => {
    const schema = newSchema();
    const a = open({ schema });
    const b = open({ schema });
    try {
      await provision(a, 'r1');
      // Each round races a credential PUT (instance A) against the resource's DELETE (instance B),
      // then releases whatever was claimed.
      for (let round = 0; round < 25; round++) {
        const [credential, deletion] = await Promise.all([
          a.claimOperation(claimInput({ key: `credential:c${round}`, kind: 'provisionCredentials', targetId: `c${round}`, request: { kind: 'provisionCredentials', resourceId: 'r1' }, parentId: 'r1', owner: 'a' })),
          b.claimOperation(claimInput({ kind: 'deprovision', request: { kind: 'deprovision' }, owner: 'b' })),
        ]);
        const outcomes = [credential.outcome, deletion.outcome].sort();
        assert.deepEqual(outcomes, ['blocked', 'claimed'], `round ${round}: ${credential.outcome} / ${deletion.outcome}`);
        const blocked = credential.outcome === 'blocked' ? credential : deletion;
        const winner = credential.outcome === 'claimed' ? credential : deletion;
        assert.equal(heldBy(blocked).token, heldBy(winner).token, 'blocked names the holder');
        await (winner === credential ? a : b).releaseOperation(heldBy(winner).key, heldBy(winner).token);
      }
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });

  pgIt('migrates once, records versions, and is safe to run from several instances at once', async () => {
    const schema = newSchema();
    const reports = await Promise.all(Array.from({ length: 5 }, () => migratePostgres({ connectionString: DATABASE_URL, schema, logger: false })));
    const latest = POSTGRES_MIGRATIONS.length;
    assert.equal(reports.filter((r) => r.applied.length > 0).length, 1, 'exactly one run applied the migrations');
    for (const report of reports) assert.deepEqual({ schema: report.schema, version: report.version }, { schema, version: latest });
    const again = await migratePostgres({ pool: admin!, schema, logger: false });
    assert.deepEqual(again.applied, []);
    const { rows } = await admin!.query(`SELECT version, name FROM "${schema}".schema_migrations ORDER BY version`);
    assert.deepEqual(
      rows,
      POSTGRES_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })),
    );
    const tables = await admin!.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name', [schema]);
    assert.deepEqual(
      tables.rows.map((r: { table_name: string }) => r.table_name),
      ['credentials', 'deliveries', 'operations', 'replays', 'resources', 'schema_migrations', 'tombstones', 'usage_entries'],
    );
  });

  pgIt('with migrate: false, refuses an unmigrated schema until it is migrated', async () => {
    const schema = newSchema();
    const store = open({ schema, migrate: false });
    try {
      await assert.rejects(store.ready(), /is at version 0, this release needs \d+: run migratePostgres/);
      await assert.rejects(store.getResource('r1'), /run migratePostgres/);
      await migratePostgres({ connectionString: DATABASE_URL, schema, logger: false });
      assert.equal(await store.getResource('r1'), undefined, 'the check is retried on the next call');
    } finally {
      await store.close();
    }
  });

  pgIt('two instances (separate pools) racing for one key: exactly one claims', async () => {
    const schema = newSchema();
    const a = open({ schema });
    const b = open({ schema });
    try {
      await a.ready();
      await b.ready();
      for (let round = 0; round < 3; round++) {
        const key = `resource:race-${round}`;
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? a : b).claimOperation(claimInput({ key, targetId: key, owner: `owner-${i}` }))),
        );
        const winners = results.filter((r) => r.outcome === 'claimed');
        assert.equal(winners.length, 1, `round ${round}`);
        for (const result of results) assert.equal(heldBy(result).token, heldBy(winners[0]!).token);
      }
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });

  pgIt('two instances taking over a lapsed claim at once: one wins, the loser’s commit is refused', async () => {
    const schema = newSchema();
    const a = open({ schema });
    const b = open({ schema });
    try {
      const stale = await a.claimOperation(claimInput());
      assert.equal(stale.outcome, 'claimed');
      const later = T0 + 30_000;
      const [x, y] = await Promise.all([a.claimOperation(claimInput({ now: later, owner: 'x' })), b.claimOperation(claimInput({ now: later, owner: 'y' }))]);
      const outcomes = [x.outcome, y.outcome].sort();
      assert.deepEqual(outcomes, ['busy', 'claimed']);
      const winner = heldBy(x.outcome === 'claimed' ? x : y);
      assert.deepEqual(await a.commitOperation(heldBy(stale).key, heldBy(stale).token, { mutation: { type: 'none' } }), { outcome: 'lease_lost' });
      assert.deepEqual(await b.commitOperation(winner.key, winner.token, { mutation: { type: 'none' } }), { outcome: 'committed' });
      assert.equal(await a.getOperation(winner.key), undefined);
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });

  pgIt('a resource deletion racing the completion of a pending credential operation on another instance tombstones that credential too', async () => {
    const schema = newSchema();
    const a = open({ schema });
    const b = open({ schema });
    let locker: pg.PoolClient | undefined;
    // Commits stalled on a lock, seen from the server (each commit is one call of commit_operation).
    const commitsWaiting = async (count: number) =>
      (
        await admin!.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = 'embedded-marketplace' AND query LIKE $1`,
          [`%"${schema}".commit_operation%`],
        )
      ).rows[0].n === count;
    try {
      await provision(a, 'r0');
      await provision(a, 'r1');
      // An uncommitted credential 'c1' (on r0) stalls instance A's commit of 'c1' on r1 half-way:
      // after it took KEY SHARE on r1, before it wrote the row.
      locker = await admin!.connect();
      await locker.query('BEGIN');
      await locker.query(`INSERT INTO "${schema}".credentials (id, resource_id, sealed_values, message, created_at) VALUES ('c1', 'r0', '\\x00', 'x', 0)`);
      const put = await a.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1', request: { kind: 'provisionCredentials', resourceId: 'r1' } }));
      assert.equal(put.outcome, 'claimed');
      // Pending (202): a running one would keep the deletion from being claimed at all.
      await a.markOperationPending(heldBy(put).key, heldBy(put).token, { message: 'Working', deadlineAt: T0 + 86_400_000 });
      const putting = a.commitOperation(heldBy(put).key, heldBy(put).token, {
        mutation: { type: 'putCredential', credential: { id: 'c1', resourceId: 'r1', values: { A: 'b' }, message: 'Credentials ready', createdAt: T0 } },
      });
      putting.catch(() => undefined);
      await eventually('the credential commit waits', () => commitsWaiting(1));
      // Instance B deletes r1 meanwhile: it waits for A's commit, then must see (and bury) c1.
      const del = await b.claimOperation(claimInput({ kind: 'deprovision', request: { kind: 'deprovision' } }));
      assert.equal(del.outcome, 'claimed');
      const deleting = b.commitOperation(del.operation.key, del.operation.token, { mutation: { type: 'deleteResource', id: 'r1', deletedAt: T0 + 10 } });
      deleting.catch(() => undefined);
      await eventually('the deletion waits', () => commitsWaiting(2));
      await locker.query('ROLLBACK');
      locker.release();
      locker = undefined;
      await putting;
      await deleting;
      assert.equal(await a.getCredential('c1'), undefined, 'the credential went with its resource');
      assert.equal(await a.isDeleted('credential', 'c1'), true, 'and left its tombstone');
      assert.equal(await a.isDeleted('resource', 'r1'), true);
    } finally {
      if (locker !== undefined) {
        await locker.query('ROLLBACK').catch(() => undefined);
        locker.release();
      }
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });

  pgIt('two instances claiming deliveries together never share one (SKIP LOCKED)', async () => {
    const schema = newSchema();
    const a = open({ schema });
    const b = open({ schema });
    try {
      for (let i = 0; i < 30; i++) {
        const claim = await a.claimOperation(claimInput({ key: `resource:d${i}`, targetId: `d${i}` }));
        assert.equal(claim.outcome, 'claimed');
        await a.commitOperation(claim.operation.key, claim.operation.token, {
          mutation: { type: 'none' },
          delivery: { id: `d${i}`, callbackId: `cb${i}`, url: 'https://c.example/cb', payload: { state: 'done', message: 'Done now' }, createdAt: T0 + i, deadlineAt: T0 + 86_400_000 },
        });
      }
      const batches = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).claimDeliveries({ owner: `owner-${i}`, now: T0 + 100, leaseMs: 60_000, limit: 5 })),
      );
      const taken = batches.flat().map((d) => d.id);
      assert.equal(new Set(taken).size, taken.length, 'no delivery claimed twice');
      assert.equal(taken.length, 30);
      batches.forEach((batch, i) => batch.forEach((d) => assert.equal(d.claimedBy, `owner-${i}`)));
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });

  pgIt('stores credential values and callback payloads encrypted', async () => {
    const schema = newSchema();
    const store = open({ schema });
    try {
      await provision(store, 'r1');
      const claim = await store.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1' }));
      const values = { BONNETS_URL: 'https://bonnet-user:sup3r-s3cr3t@bonnets.example/r1' };
      await store.commitOperation(heldBy(claim).key, heldBy(claim).token, {
        mutation: { type: 'putCredential', credential: { id: 'c1', resourceId: 'r1', values, message: 'Credentials ready', createdAt: T0 } },
        delivery: { id: 'd1', callbackId: 'cb1', url: 'https://c.example/cb1', payload: { state: 'done', message: 'Credentials ready', credentials: values }, createdAt: T0, deadlineAt: T0 + 1 },
      });
      const cred = await admin!.query(`SELECT * FROM "${schema}".credentials`);
      const delivery = await admin!.query(`SELECT * FROM "${schema}".deliveries`);
      for (const row of [...cred.rows, ...delivery.rows] as Record<string, unknown>[]) {
        for (const value of Object.values(row)) {
          const text = Buffer.isBuffer(value) ? value.toString('latin1') : JSON.stringify(value);
          assert.equal(text.includes('sup3r-s3cr3t'), false);
        }
      }
      assert.deepEqual((await store.getCredential('c1'))?.values, values);
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  pgIt('works on a pool the host owns and leaves it open on close', async () => {
    const schema = newSchema();
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    const before = pool.listenerCount('error');
    const store = postgresStore({ pool, schema, encryptionKey: KEY, logger: false });
    try {
      assert.equal(store.pool, pool);
      assert.equal(pool.listenerCount('error'), before + 1, 'idle connection errors are handled');
      await provision(store, 'r1');
      assert.equal((await store.getResource('r1'))?.id, 'r1');
      await store.close();
      assert.equal(pool.listenerCount('error'), before);
      assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
    } finally {
      await pool.end();
      await dropSchema(schema);
    }
  });

  pgIt('survives losing the server: 503 during the outage, nothing half-written, then reconnects by itself', async () => {
    const target = new URL(DATABASE_URL);
    const relay = createRelay({ host: target.hostname, port: Number(target.port === '' ? 5432 : target.port) });
    await relay.start();
    const viaRelay = new URL(DATABASE_URL);
    viaRelay.hostname = '127.0.0.1';
    viaRelay.port = String(relay.port);
    const schema = newSchema();
    const lines: string[] = [];
    const store = postgresStore({
      connectionString: viaRelay.toString(),
      schema,
      encryptionKey: KEY,
      logger: createRedactingLogger({ write: (line: string) => void lines.push(line) }, 'debug'),
    });
    let locker: pg.PoolClient | undefined;
    try {
      await provision(store, 'r1');
      // Concurrent reads leave several idle connections in the pool, to be cut with the rest.
      await Promise.all([store.getResource('r1'), store.getResource('r1'), store.getResource('r1')]);
      assert.ok(store.pool.idleCount >= 2);
      const claim = await store.claimOperation(claimInput({ key: 'credential:c1', kind: 'provisionCredentials', targetId: 'c1' }));
      assert.equal(claim.outcome, 'claimed');
      const { key, token } = claim.operation;
      const commit = { mutation: { type: 'putCredential' as const, credential: { id: 'c1', resourceId: 'r1', values: { A: 'b' }, message: 'Credentials ready', createdAt: T0 } } };

      // Hold the resource row so the commit stops half-way through its transaction (after taking the
      // operation row), then cut the connection under it.
      locker = await admin!.connect();
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM "${schema}".resources WHERE id = 'r1' FOR UPDATE`);
      const inFlight = store.commitOperation(key, token, commit);
      inFlight.catch(() => undefined);
      const waiting = async () =>
        (
          await admin!.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = 'embedded-marketplace' AND query LIKE $1`,
            [`%"${schema}".commit_operation%`],
          )
        ).rows[0].n === 1;
      await eventually('the commit waits on the row lock', waiting);
      await relay.stop();
      await assert.rejects(inFlight, ServiceUnavailableError);
      await assert.rejects(store.getResource('r1'), ServiceUnavailableError, 'no server: 503');
      await locker.query('ROLLBACK');
      locker.release();
      locker = undefined;

      // The commit is one statement: the server either rolled it back with the cut session, or (as
      // it waits on a lock, it only notices the client is gone afterwards) completed it. Either way
      // all of it or nothing: the operation is still held exactly when no credential was written.
      await eventually('the cut session is gone', async () => {
        const { rows } = await admin!.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'embedded-marketplace' AND query LIKE $1`, [
          `%"${schema}".%`,
        ]);
        return rows[0].n === 0;
      });
      const ops = await admin!.query(`SELECT token FROM "${schema}".operations WHERE key = $1`, [key]);
      const written = (await admin!.query(`SELECT count(*)::int AS n FROM "${schema}".credentials`)).rows[0].n as number;
      assert.deepEqual(ops.rows, written === 0 ? [{ token }] : [], 'the operation is released exactly when the credential is written');
      await eventually('the lost idle connections were reported, not thrown', () => lines.some((line) => line.includes('idle connection lost')));

      await relay.start(); // same port: the server is back
      await eventually('the store reconnects', async () => {
        try {
          await store.getResource('r1');
          return true;
        } catch (error) {
          assert.ok(error instanceof ServiceUnavailableError, 'only 503 while reconnecting');
          return false;
        }
      });
      // The retry of an applied commit finds the operation gone (the engine then reads the credential).
      assert.deepEqual(await store.commitOperation(key, token, commit), { outcome: written === 0 ? 'committed' : 'lease_lost' });
      assert.deepEqual((await store.getCredential('c1'))?.values, { A: 'b' });
    } finally {
      if (locker !== undefined) {
        await locker.query('ROLLBACK').catch(() => undefined);
        locker.release();
      }
      await store.close();
      await relay.stop().catch(() => undefined);
      await dropSchema(schema);
    }
  });
});
