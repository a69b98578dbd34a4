import type { Logger } from '../../lib/logger.js';
import { COMMITTED, LEASE_LOST } from '../common.js';
import type { SecretCipher } from '../crypto.js';
import { claimValues, recordMappers, replayBody, type CredentialRow, type OperationRow, type ReplayRow, type ResourceRow } from '../durable.js';
import { bind } from '../sql/dialect.js';
import type { Statements } from '../sql/statements.js';
import type { ClaimInput, ClaimResult, CommitInput, CommitResult, OperationRecord, PendingInput, RecordedAnswer, ReplayRecord } from '../types.js';
import { batched } from './batch.js';

/**
 * The operation table's steps on PostgreSQL: the claim (the claim rule of
 * src/idempotency/claim-rule.ts, ported to PL/pgSQL by migration 5), the commit (migration 4's
 * function), the pending mark and the answer recorded alone. Claims and commits of one tick go
 * to the server batched (batch.ts); every step answers an outcome, never an HTTP error.
 */

/** What claim_operation_v2 answers (rows as JSON); `retry` only inside a batch. */
type ClaimRow =
  | { outcome: 'replayed'; replay: ReplayRow }
  | { outcome: 'busy' | 'blocked'; operation: OperationRow }
  | { outcome: 'pending' | 'conflict'; operation: OperationRow; answer: RecordedAnswer }
  | {
      outcome: 'claimed';
      operation: OperationRow;
      resource: ResourceRow | null;
      resource_deleted: boolean;
      credential: CredentialRow | null;
      credential_deleted: boolean;
      credentials: CredentialRow[];
    }
  | { outcome: 'unavailable' }
  | { outcome: 'retry' };

/** What commit_operation answers, as the outcome the contract names. */
const COMMIT_OUTCOMES: Readonly<Record<string, CommitResult>> = Object.freeze({
  ok: COMMITTED,
  lease_lost: LEASE_LOST,
  not_found: Object.freeze({ outcome: 'parent_missing' }),
  resource_deleted: Object.freeze({ outcome: 'tombstoned', entity: 'resource' }),
  credential_deleted: Object.freeze({ outcome: 'tombstoned', entity: 'credential' }),
});

export interface OperationStepsDeps {
  /** Runs one statement (named: prepared once per connection) after the schema is ready; errors already mapped. */
  query<R extends object>(statement: string | { name: string; text: string }, values: unknown[]): Promise<R[]>;
  /** A table or function name in the store's schema. */
  t(name: string): string;
  /** Prefix of the prepared statements' names (they carry the schema: two stores may share a pool). */
  statementPrefix: string;
  sql: Statements;
  cipher: SecretCipher;
  logger: Logger;
}

/** The operation steps of the PostgreSQL store (see the module comment). */
export function operationSteps({ query, t, statementPrefix, sql, cipher, logger }: OperationStepsDeps) {
  const { toResource, toCredential, toOperation, toAnswer } = recordMappers(cipher);

  /** The replay record as the functions take it: JSON (with the body when it holds no secret) and the sealed body. */
  const replayParams = (replay: ReplayRecord | undefined): [string | null, Buffer | null] => {
    if (replay === undefined) return [null, null];
    const { body, sealed } = replayBody(cipher, replay.requestId, replay.answer.body);
    // The body is already JSON text: spliced in as is rather than parsed and serialized again.
    const record = JSON.stringify({ requestId: replay.requestId, status: replay.answer.status, expiresAt: replay.expiresAt });
    return [body === null ? record : `${record.slice(0, -1)},"body":${body}}`, sealed];
  };

  /** A batch that failed as a whole: its calls go again one by one. Logged, so that a deadlock (40P01) shows. */
  const onFallback = (what: string) => (error: unknown, calls: number): void => {
    // The server's own SQLSTATE, under the 503 a transient error is mapped to.
    const cause = (error as { cause?: unknown } | null)?.cause ?? error;
    const code = (cause as { code?: unknown } | null)?.code;
    logger.warn({ calls, code: typeof code === 'string' ? code : undefined, err: { message: (cause as Error | null)?.message } }, `${what} batch failed as a whole; sending each call alone`);
  };

  // One statement each: the functions of migration 5 apply every rule of ClaimResult in one transaction.
  const claimSql = `SELECT ${t('claim_operation_v2')}($1, $2, $3, $4, $5, $6, $7, $8::json, $9, $10, $11, $12) AS result`;
  const claimBatchSql = `SELECT ${t('claim_operations_v2')}($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::json[], $9::bigint[], $10::text[], $11::text[], $12::bigint[]) AS result`;
  const single = async (params: unknown[]): Promise<ClaimRow> => (await query<{ result: ClaimRow }>({ name: `${statementPrefix}claim2`, text: claimSql }, params))[0]!.result;
  const claimCall = batched<ClaimRow>({
    single,
    batch: async (columns) => (await query<{ result: ClaimRow[] }>({ name: `${statementPrefix}claims2`, text: claimBatchSql }, columns))[0]!.result,
    onFallback: onFallback('claim'),
  });

  async function claimOperation(input: ClaimInput): Promise<ClaimResult> {
    const values = claimValues(input, input.key.startsWith('credential:') ? input.parentId : undefined);
    const params = [
      values.key, values.kind, values.targetId, values.fingerprint, values.token, values.owner,
      values.leaseExpiresAt, values.request, values.now, values.parentId ?? null, input.requestId ?? null,
      input.requestId === undefined ? null : input.replayExpiresAt ?? null,
    ];
    let result = await claimCall(params);
    // A lock of the batch's that could not be taken in order: alone, the claim takes it and waits.
    if (result.outcome === 'retry') result = await single(params);
    switch (result.outcome) {
      case 'replayed':
        return { outcome: 'replayed', answer: toAnswer(result.replay) };
      case 'busy':
      case 'blocked':
        return { outcome: result.outcome, operation: toOperation(result.operation) };
      case 'pending':
      case 'conflict':
        return { outcome: result.outcome, operation: toOperation(result.operation), answer: result.answer };
      case 'claimed':
        return {
          outcome: 'claimed',
          operation: toOperation(result.operation),
          snapshot: {
            resource: result.resource === null ? undefined : toResource(result.resource),
            resourceDeleted: result.resource_deleted === true,
            credential: result.credential === null ? undefined : toCredential(result.credential),
            credentialDeleted: result.credential_deleted === true,
            credentials: result.credentials.map(toCredential),
          },
        };
      default:
        // The key changed hands eight times during one claim (a holder that lives that briefly is rare).
        return { outcome: 'unavailable' };
    }
  }

  const commitSql = `SELECT ${t('commit_operation')}($1, $2, $3::json, $4::json, $5, $6::json, $7, $8::json, $9, $10) AS result`;
  const commitBatchSql = `SELECT ${t('commit_operations')}($1::text[], $2::text[], $3::json[], $4::json[], $5::bytea[], $6::json[], $7::bytea[], $8::json[], $9::bytea[], $10::text[]) AS result`;
  const commitCall = batched<string>({
    single: async (params) => (await query<{ result: string }>({ name: `${statementPrefix}commit`, text: commitSql }, params))[0]!.result,
    batch: async (columns) => (await query<{ result: string[] }>({ name: `${statementPrefix}commits`, text: commitBatchSql }, columns))[0]!.result,
    onFallback: onFallback('commit'),
  });

  async function commitOperation(key: string, token: string, commit: CommitInput): Promise<CommitResult> {
    const { mutation, delivery } = commit;
    let mutationJson: Record<string, unknown>;
    let features: string | null = null;
    let sealed: Buffer | null = null;
    switch (mutation.type) {
      case 'putResource': {
        const { features: values, ...resource } = mutation.resource;
        mutationJson = { type: mutation.type, ...resource };
        features = JSON.stringify(values);
        break;
      }
      case 'putCredential': {
        const { values, ...credential } = mutation.credential;
        mutationJson = { type: mutation.type, ...credential };
        sealed = cipher.seal(values, `credential:${credential.id}`);
        break;
      }
      default:
        mutationJson = { ...mutation };
    }
    const [replayJson, replaySealed] = replayParams(commit.replay);
    const result = await commitCall([
      key,
      token,
      JSON.stringify(mutationJson),
      features,
      sealed,
      delivery === undefined ? null : JSON.stringify({ id: delivery.id, callbackId: delivery.callbackId, url: delivery.url, createdAt: delivery.createdAt, deadlineAt: delivery.deadlineAt }),
      delivery === undefined ? null : cipher.seal(delivery.payload, `delivery:${delivery.id}`),
      replayJson,
      replaySealed,
      commit.orphanMessage ?? null,
    ]);
    const outcome = COMMIT_OUTCOMES[result];
    if (outcome === undefined) throw new Error(`commit_operation answered an unknown outcome: ${String(result)}`);
    return outcome;
  }

  // One statement, so the 202 and its recorded answer are written together or not at all.
  const markPendingSql = `
    WITH marked AS (${sql.markPending.text}),
    recorded AS (
      INSERT INTO ${t('replays')} (request_id, status, sealed_body, body, expires_at)
      SELECT ($7::json)->>'requestId', (($7::json)->>'status')::integer, $8::bytea, ($7::json)->'body', (($7::json)->>'expiresAt')::bigint
      FROM marked WHERE $7::json IS NOT NULL
      ON CONFLICT (request_id) DO NOTHING)
    SELECT * FROM marked`;

  async function markOperationPending(key: string, token: string, pending: PendingInput): Promise<OperationRecord | undefined> {
    const [replayJson, replaySealed] = replayParams(pending.replay);
    const [row] = await query<OperationRow>(markPendingSql, [...bind(sql.markPending, { ...pending, key, token }), replayJson, replaySealed]);
    return row === undefined ? undefined : toOperation(row);
  }

  async function recordReplay(replay: ReplayRecord, now: number): Promise<RecordedAnswer> {
    const { body, sealed } = replayBody(cipher, replay.requestId, replay.answer.body);
    const values = { requestId: replay.requestId, status: replay.answer.status, body, sealed, expiresAt: replay.expiresAt };
    const written = await query(sql.recordReplay.text, bind(sql.recordReplay, values));
    if (written.length > 0) return replay.answer;
    // Rare (a refusal answered twice): the first record stands, when it is still live.
    const [row] = await query<ReplayRow>(sql.findReplay.text, bind(sql.findReplay, { requestId: replay.requestId, now }));
    return row === undefined ? replay.answer : toAnswer(row);
  }

  return { claimOperation, commitOperation, markOperationPending, recordReplay };
}
