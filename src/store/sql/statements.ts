import { compile, shim, type Dialect, type Statement } from './dialect.js';

/**
 * Every SQL statement of the durable stores, written once for SQLite and PostgreSQL (see dialect.ts
 * for what the shim covers). The adapters only orchestrate them: sqlite.ts runs them inside its
 * transactions; postgres.ts runs them as single statements, and its claim and commit call the
 * functions its migrations created (one round trip each), which apply the same rules.
 */

const OPERATION_COLUMNS = 'key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at, message, callback_id, callback_url, deadline_at';
const SUMMARY_COLUMNS = 'id, callback_id, url, created_at, deadline_at, state, attempts, next_attempt_at, last_error, claimed_by, claim_expires_at';
const DELIVERY_COLUMNS = `${SUMMARY_COLUMNS}, sealed_payload, payload`;

function sources(dialect: Dialect, schema: string | undefined) {
  const s = shim(dialect, schema);
  const t = s.table;
  return {
    ping: 'SELECT 1 AS ok',

    getResource: `SELECT * FROM ${t('resources')} WHERE id = @id`,
    getCredential: `SELECT * FROM ${t('credentials')} WHERE id = @id`,
    listCredentials: `SELECT * FROM ${t('credentials')} WHERE resource_id = @resourceId ORDER BY created_at, id`,
    resourceExists: `SELECT 1 AS found FROM ${t('resources')} WHERE id = @id`,

    getOperation: `SELECT ${OPERATION_COLUMNS} FROM ${t('operations')} WHERE key = @key`,
    listPending: `SELECT ${OPERATION_COLUMNS} FROM ${t('operations')} WHERE state = 'pending' ORDER BY created_at, key LIMIT @limit`,
    countPending: `SELECT count(*) AS n FROM ${t('operations')} WHERE state = 'pending'`,
    // The claim rule's `claim` write (src/idempotency/claim-rule.ts): the caller's running record
    // replaces whatever lapsed at the key (the rule checked, in the same transaction, that nothing
    // live holds it).
    putOperation: `
      INSERT INTO ${t('operations')} (key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at, parent_id)
      VALUES (@key, @kind, @targetId, @fingerprint, 'running', @token, @owner, @leaseExpiresAt, @request::json, @createdAt, @parentId)
      ON CONFLICT (key) DO UPDATE SET
        kind = excluded.kind, target_id = excluded.target_id, fingerprint = excluded.fingerprint, state = 'running',
        token = excluded.token, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
        request = excluded.request, created_at = excluded.created_at, parent_id = excluded.parent_id,
        message = NULL, callback_id = NULL, callback_url = NULL, deadline_at = NULL`,
    // Parent/child exclusion (the claim rule's runningChild): a running operation on one of the
    // resource's credentials.
    runningChildOf: `
      SELECT ${OPERATION_COLUMNS} FROM ${t('operations')}
      WHERE parent_id = @resourceId AND state = 'running' AND lease_expires_at > @now ORDER BY created_at, key LIMIT 1`,
    renew: `UPDATE ${t('operations')} SET lease_expires_at = @leaseExpiresAt WHERE key = @key AND token = @token AND state = 'running'`,
    // Also a commit's fencing check on SQLite: no row deleted, the token no longer holds the key.
    release: `DELETE FROM ${t('operations')} WHERE key = @key AND token = @token`,
    markPending: `
      UPDATE ${t('operations')} SET state = 'pending', message = @message, deadline_at = @deadlineAt,
        callback_id = coalesce(@callbackId, callback_id), callback_url = coalesce(@callbackUrl, callback_url)
      WHERE key = @key AND token = @token RETURNING ${OPERATION_COLUMNS}`,
    // A committed deleteResource reports each pending credential operation of the resource that
    // carried callback headers as an `error` callback (the payload holds no secret, so it is stored
    // plain), keyed by the operation's own fencing token, then removes them all.
    reportOrphans: `
      INSERT INTO ${t('deliveries')} (id, callback_id, url, sealed_payload, payload, created_at, deadline_at, state, attempts, next_attempt_at)
      SELECT token, callback_id, callback_url, @empty::bytea, ${s.jsonObject("'state'", "'error'", "'message'", '@message::text')},
        @deletedAt::bigint, coalesce(deadline_at, @deletedAt::bigint), 'pending', 0, @deletedAt::bigint
      FROM ${t('operations')}
      WHERE parent_id = @resourceId AND state = 'pending' AND callback_id IS NOT NULL AND callback_url IS NOT NULL
      ON CONFLICT (id) DO NOTHING`,
    dropOrphans: `DELETE FROM ${t('operations')} WHERE parent_id = @resourceId AND state = 'pending'`,

    putResource: `
      INSERT INTO ${t('resources')} (id, product, plan, region, features, message, created_at, updated_at)
      VALUES (@id, @product, @plan, @region, @features::json, @message, @createdAt, @updatedAt)
      ON CONFLICT (id) DO UPDATE SET product = excluded.product, plan = excluded.plan, region = excluded.region,
        features = excluded.features, message = excluded.message, created_at = excluded.created_at, updated_at = excluded.updated_at`,
    deleteResource: `DELETE FROM ${t('resources')} WHERE id = @id`,
    putCredential: `
      INSERT INTO ${t('credentials')} (id, resource_id, sealed_values, message, created_at) VALUES (@id, @resourceId, @sealed, @message, @createdAt)
      ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id, sealed_values = excluded.sealed_values,
        message = excluded.message, created_at = excluded.created_at`,
    deleteCredential: `DELETE FROM ${t('credentials')} WHERE id = @id`,

    isDeleted: `SELECT 1 AS found FROM ${t('tombstones')} WHERE entity = @entity AND id = @id`,
    // DO NOTHING: a tombstone keeps the time of the first deletion.
    bury: `INSERT INTO ${t('tombstones')} (entity, id, deleted_at) VALUES (@entity, @id, @deletedAt) ON CONFLICT (entity, id) DO NOTHING`,
    buryCredentialsOf: `
      INSERT INTO ${t('tombstones')} (entity, id, deleted_at)
      SELECT 'credential', id, @deletedAt::bigint FROM ${t('credentials')} WHERE resource_id = @resourceId
      ON CONFLICT (entity, id) DO NOTHING`,
    pruneTombstones: `DELETE FROM ${t('tombstones')} WHERE deleted_at < @before`,

    findReplay: `SELECT request_id, status, sealed_body, body, expires_at FROM ${t('replays')} WHERE request_id = @requestId AND expires_at >= @now`,
    // DO NOTHING: the first answer recorded for a signature is the one it keeps giving.
    putReplay: `
      INSERT INTO ${t('replays')} (request_id, status, sealed_body, body, expires_at) VALUES (@requestId, @status, @sealed, @body, @expiresAt)
      ON CONFLICT (request_id) DO NOTHING`,
    pruneReplays: `DELETE FROM ${t('replays')} WHERE expires_at < @now`,
    // recordReplay on PostgreSQL: a row back when this answer was the first one recorded.
    recordReplay: `
      INSERT INTO ${t('replays')} (request_id, status, sealed_body, body, expires_at) VALUES (@requestId, @status, @sealed, @body, @expiresAt)
      ON CONFLICT (request_id) DO NOTHING RETURNING request_id`,

    putDelivery: `
      INSERT INTO ${t('deliveries')} (id, callback_id, url, sealed_payload, created_at, deadline_at, state, attempts, next_attempt_at)
      VALUES (@id, @callbackId, @url, @sealed, @createdAt, @deadlineAt, 'pending', 0, @createdAt)
      ON CONFLICT (id) DO UPDATE SET callback_id = excluded.callback_id, url = excluded.url, sealed_payload = excluded.sealed_payload,
        payload = NULL, created_at = excluded.created_at, deadline_at = excluded.deadline_at, state = 'pending', attempts = 0,
        next_attempt_at = excluded.next_attempt_at, last_error = NULL, claimed_by = NULL, claim_expires_at = NULL`,
    // SKIP LOCKED on PostgreSQL: instances polling together take different rows instead of queueing
    // on the same ones. SQLite has one writer and no row locks.
    claimDeliveries: `
      UPDATE ${t('deliveries')} SET claimed_by = @owner, claim_expires_at = @claimExpiresAt
      WHERE id IN (
        SELECT id FROM ${t('deliveries')}
        WHERE state = 'pending' AND next_attempt_at <= @now AND (claim_expires_at IS NULL OR claim_expires_at <= @now)
        ORDER BY next_attempt_at, created_at, id LIMIT @limit${dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : ''})
      RETURNING ${DELIVERY_COLUMNS}`,
    completeDelivery: `DELETE FROM ${t('deliveries')} WHERE id = @id AND claimed_by = @owner`,
    retryDelivery: `
      UPDATE ${t('deliveries')} SET attempts = @attempts, next_attempt_at = @nextAttemptAt, last_error = @lastError, claimed_by = NULL, claim_expires_at = NULL
      WHERE id = @id AND claimed_by = @owner`,
    failDelivery: `
      UPDATE ${t('deliveries')} SET state = 'failed', last_error = @reason, claimed_by = NULL, claim_expires_at = NULL
      WHERE id = @id AND claimed_by = @owner`,
    listDeliveries: `SELECT ${DELIVERY_COLUMNS} FROM ${t('deliveries')} ORDER BY created_at, id`,
    listDeliverySummaries: `
      SELECT ${SUMMARY_COLUMNS} FROM ${t('deliveries')} WHERE @state::text IS NULL OR state = @state::text
      ORDER BY created_at, id LIMIT @limit`,
    getDeliverySummary: `SELECT ${SUMMARY_COLUMNS} FROM ${t('deliveries')} WHERE id = @id`,
    makeDeliveryDue: `
      UPDATE ${t('deliveries')} SET state = 'pending', next_attempt_at = @now, claimed_by = NULL, claim_expires_at = NULL
      WHERE id = @id`,
    dropDelivery: `DELETE FROM ${t('deliveries')} WHERE id = @id`,
    outboxStats: `
      SELECT coalesce(sum(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), 0) AS pending,
             coalesce(sum(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), 0) AS failed,
             min(CASE WHEN state = 'pending' THEN created_at END) AS oldest
      FROM ${t('deliveries')}`,

    // One statement for a whole batch: atomic, and one round trip however many entries.
    recordUsage: `
      INSERT INTO ${t('usage_entries')} (resource_id, feature, quantity, at)
      SELECT resource_id, feature, quantity, at FROM ${s.jsonRecords('entries', [['resource_id', 'text'], ['feature', 'text'], ['quantity', 'float8'], ['at', 'bigint']])}
      WHERE true`,
    sumUsage: `
      SELECT feature, sum(quantity) AS total FROM ${t('usage_entries')}
      WHERE resource_id = @resourceId AND at >= @from AND at < @to GROUP BY feature`,
    hasUsage: `SELECT 1 AS found FROM ${t('usage_entries')} WHERE resource_id = @resourceId AND at >= @from AND at < @to LIMIT 1`,
    pruneUsage: `DELETE FROM ${t('usage_entries')} WHERE at < @before`,
  };
}

export type StatementName = keyof ReturnType<typeof sources>;
export type Statements = Readonly<Record<StatementName, Statement>>;

/** The statements compiled for one dialect (and, on PostgreSQL, one schema). */
export function statements(dialect: Dialect, schema?: string): Statements {
  const raw = sources(dialect, schema);
  const compiled = {} as Record<StatementName, Statement>;
  for (const name of Object.keys(raw) as StatementName[]) compiled[name] = compile(dialect, raw[name]);
  return compiled;
}
