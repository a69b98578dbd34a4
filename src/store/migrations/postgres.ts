import type { Migration } from './types.js';

/**
 * PostgreSQL schema, kept as TypeScript so it compiles into dist/ with the adapter. Each migration
 * runs with `search_path` set to the store's schema, so the SQL names no schema itself.
 *
 * Choices: times are `bigint` milliseconds (the contract passes times in; the database clock is never
 * read); JSON is `json`, which keeps the text exactly as written (key order included), unlike `jsonb`;
 * ids use the "C" collation so ordering is bytewise whatever the database's locale; secrets are
 * sealed `bytea` (see crypto.ts).
 */
export const POSTGRES_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE resources (
  id text COLLATE "C" PRIMARY KEY,
  product text NOT NULL,
  plan text NOT NULL,
  region text NOT NULL,
  features json NOT NULL,
  message text NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);

CREATE TABLE credentials (
  id text COLLATE "C" PRIMARY KEY,
  resource_id text COLLATE "C" NOT NULL REFERENCES resources (id) ON DELETE CASCADE,
  sealed_values bytea NOT NULL,
  message text NOT NULL,
  created_at bigint NOT NULL
);
CREATE INDEX credentials_by_resource ON credentials (resource_id, created_at, id);

CREATE TABLE operations (
  key text COLLATE "C" PRIMARY KEY,
  kind text NOT NULL,
  target_id text NOT NULL,
  fingerprint text NOT NULL,
  state text NOT NULL CHECK (state IN ('running', 'pending')),
  token text NOT NULL,
  owner text NOT NULL,
  lease_expires_at bigint NOT NULL,
  request json NOT NULL,
  created_at bigint NOT NULL,
  message text,
  callback_id text,
  callback_url text,
  deadline_at bigint
);
CREATE INDEX operations_pending ON operations (created_at, key) WHERE state = 'pending';

CREATE TABLE deliveries (
  id text COLLATE "C" PRIMARY KEY,
  callback_id text NOT NULL,
  url text NOT NULL,
  sealed_payload bytea NOT NULL,
  created_at bigint NOT NULL,
  deadline_at bigint NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'failed')),
  attempts integer NOT NULL,
  next_attempt_at bigint NOT NULL,
  last_error text,
  claimed_by text,
  claim_expires_at bigint
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';

CREATE TABLE usage_entries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  resource_id text COLLATE "C" NOT NULL,
  feature text NOT NULL,
  quantity double precision NOT NULL,
  at bigint NOT NULL
);
CREATE INDEX usage_entries_by_resource ON usage_entries (resource_id, at);
CREATE INDEX usage_entries_by_time ON usage_entries (at);
`,
  },
  {
    version: 2,
    name: 'tombstones',
    // One row per deleted resource or credential, kept so that a replayed PUT cannot re-create it
    // (ids are never reused). Deletes and the tombstone checks of commits use the primary key;
    // pruneTombstones uses the time index.
    sql: `
CREATE TABLE tombstones (
  entity text NOT NULL CHECK (entity IN ('resource', 'credential')),
  id text COLLATE "C" NOT NULL,
  deleted_at bigint NOT NULL,
  PRIMARY KEY (entity, id)
);
CREATE INDEX tombstones_by_time ON tombstones (deleted_at);
`,
  },
  {
    version: 3,
    name: 'operation table',
    // As SQLite's migration 3 (parent_id, deliveries.payload, replays), plus the two functions that
    // make a claim and a commit one statement each (one round trip): they apply the rules that
    // sqlite.ts applies in its transactions, with the same statements (src/store/sql/statements.ts).
    // SET search_path FROM CURRENT binds them to this schema (migrations run with it as search_path).
    sql: `
ALTER TABLE operations ADD COLUMN parent_id text COLLATE "C";
UPDATE operations SET parent_id = CASE
    WHEN kind = 'provisionCredentials' THEN request->>'resourceId'
    ELSE (SELECT resource_id FROM credentials WHERE credentials.id = operations.target_id) END
  WHERE key LIKE 'credential:%';
CREATE INDEX operations_by_parent ON operations (parent_id) WHERE parent_id IS NOT NULL;

ALTER TABLE deliveries ADD COLUMN payload json;

CREATE TABLE replays (
  request_id text COLLATE "C" PRIMARY KEY,
  status integer NOT NULL,
  sealed_body bytea,
  expires_at bigint NOT NULL
);
CREATE INDEX replays_by_expiry ON replays (expires_at);

-- Answers {outcome: replayed|busy|blocked|claimed|unavailable, ...}; see ClaimResult.
CREATE FUNCTION claim_operation(
  p_key text, p_kind text, p_target_id text, p_fingerprint text, p_token text, p_owner text,
  p_lease_expires_at bigint, p_request json, p_now bigint, p_parent_id text, p_request_id text
) RETURNS json LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  v_replay replays%ROWTYPE;
  v_row operations%ROWTYPE;
  v_child boolean := p_key LIKE 'credential:%';
  v_parent text := p_parent_id;
  v_resource text;
BEGIN
  IF p_request_id IS NOT NULL THEN
    SELECT * INTO v_replay FROM replays WHERE request_id = p_request_id AND expires_at >= p_now;
    IF FOUND THEN
      RETURN json_build_object('outcome', 'replayed', 'replay', row_to_json(v_replay));
    END IF;
  END IF;
  -- A claim lost in a server crash is harmless (nothing was done under it that a retry does not
  -- redo), so its commit does not wait for the WAL flush; the commit of the outcome does.
  PERFORM set_config('synchronous_commit', 'off', true);
  IF v_child AND v_parent IS NULL THEN
    SELECT resource_id INTO v_parent FROM credentials WHERE id = p_target_id;
  END IF;
  v_resource := CASE WHEN v_child THEN v_parent ELSE p_target_id END;
  -- A credential claim and its resource's deprovision claim each read what the other writes:
  -- both take this lock on the resource id first, so one always sees the other (no write skew).
  -- Held until the end of this statement's transaction; later statements see committed rows.
  IF v_resource IS NOT NULL AND (v_child OR p_kind = 'deprovision') THEN
    PERFORM pg_advisory_xact_lock(17742, hashtext(current_schema() || ':' || v_resource));
  END IF;
  -- A claim that finds the key free may still lose the upsert to a concurrent one: look again.
  FOR attempt IN 1..8 LOOP
    SELECT * INTO v_row FROM operations o WHERE o.key = p_key
      AND (CASE WHEN o.state = 'running' THEN o.lease_expires_at > p_now ELSE o.deadline_at IS NULL OR o.deadline_at > p_now END);
    IF FOUND THEN
      RETURN json_build_object('outcome', 'busy', 'operation', row_to_json(v_row));
    END IF;
    IF v_child THEN
      SELECT * INTO v_row FROM operations o WHERE o.key = 'resource:' || v_parent AND o.kind = 'deprovision'
        AND (CASE WHEN o.state = 'running' THEN o.lease_expires_at > p_now ELSE o.deadline_at IS NULL OR o.deadline_at > p_now END);
    ELSIF p_kind = 'deprovision' THEN
      SELECT * INTO v_row FROM operations WHERE parent_id = p_target_id AND state = 'running' AND lease_expires_at > p_now
        ORDER BY created_at, key LIMIT 1;
    END IF;
    IF FOUND AND (v_child OR p_kind = 'deprovision') THEN
      RETURN json_build_object('outcome', 'blocked', 'operation', row_to_json(v_row));
    END IF;
    INSERT INTO operations AS o (key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at, parent_id)
    VALUES (p_key, p_kind, p_target_id, p_fingerprint, 'running', p_token, p_owner, p_lease_expires_at, p_request, p_now, v_parent)
    ON CONFLICT (key) DO UPDATE SET
      kind = excluded.kind, target_id = excluded.target_id, fingerprint = excluded.fingerprint, state = 'running',
      token = excluded.token, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
      request = excluded.request, created_at = excluded.created_at, parent_id = excluded.parent_id,
      message = NULL, callback_id = NULL, callback_url = NULL, deadline_at = NULL
    WHERE NOT (CASE WHEN o.state = 'running' THEN o.lease_expires_at > p_now ELSE o.deadline_at IS NULL OR o.deadline_at > p_now END)
    RETURNING * INTO v_row;
    IF FOUND THEN
      RETURN json_build_object(
        'outcome', 'claimed',
        'operation', row_to_json(v_row),
        'resource', (SELECT row_to_json(r) FROM resources r WHERE r.id = v_resource),
        'resource_deleted', EXISTS (SELECT 1 FROM tombstones WHERE entity = 'resource' AND id = v_resource),
        'credential', CASE WHEN v_child THEN (SELECT row_to_json(c) FROM credentials c WHERE c.id = p_target_id) END,
        'credential_deleted', v_child AND EXISTS (SELECT 1 FROM tombstones WHERE entity = 'credential' AND id = p_target_id),
        'credentials', CASE WHEN p_kind = 'deprovision'
          THEN (SELECT coalesce(json_agg(c ORDER BY c.created_at, c.id), '[]'::json) FROM credentials c WHERE c.resource_id = p_target_id)
          ELSE '[]'::json END);
    END IF;
  END LOOP;
  RETURN json_build_object('outcome', 'unavailable');
END
$fn$;

${commitOperationFunction({ replace: false, plainBody: false })}`,
  },
  {
    version: 4,
    name: 'plain replay bodies',
    // A recorded answer that holds no secret (every answer but a credential set's) is kept as JSON
    // in replays.body instead of sealed: sealing cost more CPU per request than the rest of the
    // commit. commit_operation is the same but for that column. claim_operations and commit_operations:
    // the batch forms (one statement for the calls of one tick).
    sql: `
ALTER TABLE replays ADD COLUMN body json;
${commitOperationFunction({ replace: true, plainBody: true })}
-- Batches: the claims, or the commits, that reach one instance together, in one statement and one
-- transaction (for commits, one WAL flush). Each element answers as the single function does,
-- which writes nothing for a call it refuses; an error in one rolls back the batch, which the store
-- then sends one by one.
CREATE FUNCTION claim_operations(
  p_keys text[], p_kinds text[], p_target_ids text[], p_fingerprints text[], p_tokens text[], p_owners text[],
  p_lease_expires_at bigint[], p_requests json[], p_nows bigint[], p_parent_ids text[], p_request_ids text[]
) RETURNS json LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  v_results json[] := ARRAY[]::json[];
BEGIN
  FOR i IN 1..cardinality(p_keys) LOOP
    v_results := v_results || claim_operation(p_keys[i], p_kinds[i], p_target_ids[i], p_fingerprints[i], p_tokens[i], p_owners[i],
      p_lease_expires_at[i], p_requests[i], p_nows[i], p_parent_ids[i], p_request_ids[i]);
  END LOOP;
  RETURN to_json(v_results);
END
$fn$;

CREATE FUNCTION commit_operations(
  p_keys text[], p_tokens text[], p_mutations json[], p_features json[], p_sealed bytea[],
  p_deliveries json[], p_delivery_sealed bytea[], p_replays json[], p_replay_sealed bytea[], p_orphan_messages text[]
) RETURNS text[] LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  v_results text[] := ARRAY[]::text[];
BEGIN
  FOR i IN 1..cardinality(p_keys) LOOP
    v_results := v_results || commit_operation(p_keys[i], p_tokens[i], p_mutations[i], p_features[i], p_sealed[i],
      p_deliveries[i], p_delivery_sealed[i], p_replays[i], p_replay_sealed[i], p_orphan_messages[i]);
  END LOOP;
  RETURN v_results;
END
$fn$;
`,
  },
  {
    version: 5,
    name: 'one claim rule',
    // The claim rule of src/idempotency/claim-rule.ts (issue 19), ported: claim_decide applies it
    // to one claim; claim_operation_v2 is one claim alone, claim_operations_v2 a batch. Beside
    // migration 3's rule, the claim itself answers the refusals it can tell (`conflict`: another
    // request holds the key, or a pending deprovision holds the resource; `pending`: an identical
    // request's 202) and records them against the request's signature in the same transaction,
    // flushed (synchronous_commit back on). The texts below are the TypeScript rule's
    // (claim-rule.ts), written out because a migration never changes once released; a test holds
    // them equal.
    //
    // Deadlock-free batches: a batch takes every advisory lock it needs (one per resource of its
    // credential claims and deprovisions) first, in ascending order, then claims in ascending key
    // order, so two batches never wait on each other in a circle. A lock found missing later (a
    // credential DELETE whose credential appeared meanwhile) is only tried: if taken elsewhere, the
    // claim answers `retry` and the store sends it again alone.
    //
    // Migration 3 and 4's functions stay, unchanged: an instance of the previous release keeps
    // calling them during a rolling upgrade and keeps its own rule (refusals unrecorded, batches in
    // arrival order). The lock keys are the same, so old and new instances still exclude each other.
    sql: `
CREATE FUNCTION claim_refusal(
  p_outcome text, p_holder operations, p_answer json, p_request_id text, p_replay_expires_at bigint
) RETURNS json LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  IF p_request_id IS NOT NULL AND p_replay_expires_at IS NOT NULL THEN
    INSERT INTO replays (request_id, status, sealed_body, body, expires_at)
    VALUES (p_request_id, (p_answer->>'status')::integer, NULL, p_answer->'body', p_replay_expires_at)
    ON CONFLICT (request_id) DO NOTHING;
    -- A recorded answer must survive a crash like any other: this transaction's commit is flushed.
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
  RETURN json_build_object('outcome', p_outcome, 'operation', row_to_json(p_holder), 'answer', p_answer);
END
$fn$;

-- One claim under the rule. p_locks: NULL for a claim alone (it takes its resource lock itself),
-- else the lock keys its batch already holds.
CREATE FUNCTION claim_decide(
  p_key text, p_kind text, p_target_id text, p_fingerprint text, p_token text, p_owner text,
  p_lease_expires_at bigint, p_request json, p_now bigint, p_parent_id text, p_request_id text,
  p_replay_expires_at bigint, p_locks integer[]
) RETURNS json LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  v_replay replays%ROWTYPE;
  v_row operations%ROWTYPE;
  v_child boolean := p_key LIKE 'credential:%';
  v_parent text := p_parent_id;
  v_resource text;
  v_lock integer;
BEGIN
  IF p_request_id IS NOT NULL THEN
    SELECT * INTO v_replay FROM replays WHERE request_id = p_request_id AND expires_at >= p_now;
    IF FOUND THEN
      RETURN json_build_object('outcome', 'replayed', 'replay', row_to_json(v_replay));
    END IF;
  END IF;
  IF v_child AND v_parent IS NULL THEN
    SELECT resource_id INTO v_parent FROM credentials WHERE id = p_target_id;
  END IF;
  v_resource := CASE WHEN v_child THEN v_parent ELSE p_target_id END;
  -- A credential claim and its resource's deprovision claim each read what the other writes:
  -- both take this lock on the resource id first, so one always sees the other (no write skew).
  IF v_resource IS NOT NULL AND (v_child OR p_kind = 'deprovision') THEN
    v_lock := hashtext(current_schema() || ':' || v_resource);
    IF p_locks IS NULL THEN
      PERFORM pg_advisory_xact_lock(17742, v_lock);
    ELSIF NOT (v_lock = ANY (p_locks)) AND NOT pg_try_advisory_xact_lock(17742, v_lock) THEN
      RETURN json_build_object('outcome', 'retry');
    END IF;
  END IF;
  -- A claim that finds the key free may still lose the upsert to a concurrent one: look again.
  FOR attempt IN 1..8 LOOP
    SELECT * INTO v_row FROM operations o WHERE o.key = p_key
      AND (CASE WHEN o.state = 'running' THEN o.lease_expires_at > p_now ELSE o.deadline_at IS NULL OR o.deadline_at > p_now END);
    IF FOUND THEN
      IF v_row.fingerprint <> p_fingerprint THEN
        RETURN claim_refusal('conflict', v_row, json_build_object('status', 409, 'body', json_build_object('message',
          CASE WHEN v_row.state = 'pending' THEN 'Another operation on this entity is pending; wait for its outcome' ELSE 'Another operation on this entity is in progress' END)), p_request_id, p_replay_expires_at);
      END IF;
      IF v_row.state = 'pending' THEN
        RETURN claim_refusal('pending', v_row, json_build_object('status', 202, 'body', json_build_object('message',
          coalesce(v_row.message, 'The operation is in progress'))), p_request_id, p_replay_expires_at);
      END IF;
      RETURN json_build_object('outcome', 'busy', 'operation', row_to_json(v_row));
    END IF;
    IF v_child THEN
      SELECT * INTO v_row FROM operations o WHERE o.key = 'resource:' || v_parent AND o.kind = 'deprovision'
        AND (CASE WHEN o.state = 'running' THEN o.lease_expires_at > p_now ELSE o.deadline_at IS NULL OR o.deadline_at > p_now END);
      IF FOUND THEN
        IF v_row.state = 'pending' THEN
          RETURN claim_refusal('conflict', v_row, json_build_object('status', 409, 'body', json_build_object('message', 'Another operation on this entity is pending; wait for its outcome')),
            p_request_id, p_replay_expires_at);
        END IF;
        RETURN json_build_object('outcome', 'blocked', 'operation', row_to_json(v_row));
      END IF;
    ELSIF p_kind = 'deprovision' THEN
      SELECT * INTO v_row FROM operations WHERE parent_id = p_target_id AND state = 'running' AND lease_expires_at > p_now
        ORDER BY created_at, key LIMIT 1;
      IF FOUND THEN
        RETURN json_build_object('outcome', 'blocked', 'operation', row_to_json(v_row));
      END IF;
    END IF;
    INSERT INTO operations AS o (key, kind, target_id, fingerprint, state, token, owner, lease_expires_at, request, created_at, parent_id)
    VALUES (p_key, p_kind, p_target_id, p_fingerprint, 'running', p_token, p_owner, p_lease_expires_at, p_request, p_now, v_parent)
    ON CONFLICT (key) DO UPDATE SET
      kind = excluded.kind, target_id = excluded.target_id, fingerprint = excluded.fingerprint, state = 'running',
      token = excluded.token, owner = excluded.owner, lease_expires_at = excluded.lease_expires_at,
      request = excluded.request, created_at = excluded.created_at, parent_id = excluded.parent_id,
      message = NULL, callback_id = NULL, callback_url = NULL, deadline_at = NULL
    WHERE NOT (CASE WHEN o.state = 'running' THEN o.lease_expires_at > p_now ELSE o.deadline_at IS NULL OR o.deadline_at > p_now END)
    RETURNING * INTO v_row;
    IF FOUND THEN
      RETURN json_build_object(
        'outcome', 'claimed',
        'operation', row_to_json(v_row),
        'resource', (SELECT row_to_json(r) FROM resources r WHERE r.id = v_resource),
        'resource_deleted', EXISTS (SELECT 1 FROM tombstones WHERE entity = 'resource' AND id = v_resource),
        'credential', CASE WHEN v_child THEN (SELECT row_to_json(c) FROM credentials c WHERE c.id = p_target_id) END,
        'credential_deleted', v_child AND EXISTS (SELECT 1 FROM tombstones WHERE entity = 'credential' AND id = p_target_id),
        'credentials', CASE WHEN p_kind = 'deprovision'
          THEN (SELECT coalesce(json_agg(c ORDER BY c.created_at, c.id), '[]'::json) FROM credentials c WHERE c.resource_id = p_target_id)
          ELSE '[]'::json END);
    END IF;
  END LOOP;
  RETURN json_build_object('outcome', 'unavailable');
END
$fn$;

-- Answers {outcome: replayed|claimed|busy|blocked|pending|conflict|unavailable, ...}; see ClaimResult.
CREATE FUNCTION claim_operation_v2(
  p_key text, p_kind text, p_target_id text, p_fingerprint text, p_token text, p_owner text,
  p_lease_expires_at bigint, p_request json, p_now bigint, p_parent_id text, p_request_id text, p_replay_expires_at bigint
) RETURNS json LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
  -- A claim lost in a server crash is harmless (nothing was done under it that a retry does not
  -- redo), so its commit does not wait for the WAL flush; a recorded refusal turns it back on.
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN claim_decide(p_key, p_kind, p_target_id, p_fingerprint, p_token, p_owner, p_lease_expires_at, p_request, p_now,
    p_parent_id, p_request_id, p_replay_expires_at, NULL);
END
$fn$;

-- The claims of one tick, in one statement and one transaction; element i answers as
-- claim_operation_v2 would (or {outcome: retry}: send it again alone).
CREATE FUNCTION claim_operations_v2(
  p_keys text[], p_kinds text[], p_target_ids text[], p_fingerprints text[], p_tokens text[], p_owners text[],
  p_lease_expires_at bigint[], p_requests json[], p_nows bigint[], p_parent_ids text[], p_request_ids text[],
  p_replay_expires_at bigint[]
) RETURNS json LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  v_results json[] := array_fill(NULL::json, ARRAY[cardinality(p_keys)]);
  v_locks integer[];
  v_lock integer;
  i integer;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  -- Every lock the batch needs, all first, in one global order: ascending lock key.
  SELECT coalesce(array_agg(DISTINCT hashtext(current_schema() || ':' || resource) ORDER BY hashtext(current_schema() || ':' || resource)), '{}')
    INTO v_locks
    FROM (SELECT CASE WHEN u.key LIKE 'credential:%' THEN coalesce(u.parent, (SELECT c.resource_id FROM credentials c WHERE c.id = u.target))
                      WHEN u.kind = 'deprovision' THEN u.target END AS resource
          FROM unnest(p_keys, p_kinds, p_target_ids, p_parent_ids) AS u(key, kind, target, parent)) AS needed
    WHERE resource IS NOT NULL;
  FOREACH v_lock IN ARRAY v_locks LOOP
    PERFORM pg_advisory_xact_lock(17742, v_lock);
  END LOOP;
  -- Then the claims in ascending key order, so that row locks are taken in one order too.
  FOR i IN SELECT n FROM generate_subscripts(p_keys, 1) AS n ORDER BY p_keys[n] COLLATE "C", n LOOP
    v_results[i] := claim_decide(p_keys[i], p_kinds[i], p_target_ids[i], p_fingerprints[i], p_tokens[i], p_owners[i],
      p_lease_expires_at[i], p_requests[i], p_nows[i], p_parent_ids[i], p_request_ids[i], p_replay_expires_at[i], v_locks);
  END LOOP;
  RETURN to_json(v_results);
END
$fn$;
`,
  },
];

/**
 * The commit function of migration 3, and of migration 4 (which also stores plain answer bodies).
 * Written once so that the two versions differ only where they must.
 */
function commitOperationFunction({ replace, plainBody }: { replace: boolean; plainBody: boolean }): string {
  return `-- Answers ok | lease_lost | not_found | resource_deleted | credential_deleted; writes nothing
-- unless ok. Secrets arrive sealed (p_sealed, p_delivery_sealed, p_replay_sealed); a resource's
-- features arrive on their own (p_features): a \\u0000 in them would make every ->> on p_mutation fail.
${replace ? 'CREATE OR REPLACE' : 'CREATE'} FUNCTION commit_operation(
  p_key text, p_token text, p_mutation json, p_features json, p_sealed bytea,
  p_delivery json, p_delivery_sealed bytea, p_replay json, p_replay_sealed bytea, p_orphan_message text
) RETURNS text LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
DECLARE
  v_type text := p_mutation->>'type';
  v_id text := p_mutation->>'id';
  v_at bigint := (p_mutation->>'deletedAt')::bigint;
BEGIN
  -- The fencing check and the lock in one: the row is ours until the end of the statement.
  PERFORM 1 FROM operations WHERE key = p_key AND token = p_token FOR UPDATE;
  IF NOT FOUND THEN RETURN 'lease_lost'; END IF;
  IF v_type = 'putResource' THEN
    IF EXISTS (SELECT 1 FROM tombstones WHERE entity = 'resource' AND id = v_id) THEN RETURN 'resource_deleted'; END IF;
    INSERT INTO resources (id, product, plan, region, features, message, created_at, updated_at)
    VALUES (v_id, p_mutation->>'product', p_mutation->>'plan', p_mutation->>'region', p_features,
      p_mutation->>'message', (p_mutation->>'createdAt')::bigint, (p_mutation->>'updatedAt')::bigint)
    ON CONFLICT (id) DO UPDATE SET product = excluded.product, plan = excluded.plan, region = excluded.region,
      features = excluded.features, message = excluded.message, created_at = excluded.created_at, updated_at = excluded.updated_at;
  ELSIF v_type = 'putCredential' THEN
    -- KEY SHARE keeps a concurrent deletion of the resource waiting until this commit is done.
    PERFORM 1 FROM resources WHERE id = p_mutation->>'resourceId' FOR KEY SHARE;
    IF NOT FOUND THEN RETURN 'not_found'; END IF;
    IF EXISTS (SELECT 1 FROM tombstones WHERE entity = 'credential' AND id = v_id) THEN RETURN 'credential_deleted'; END IF;
    INSERT INTO credentials (id, resource_id, sealed_values, message, created_at)
    VALUES (v_id, p_mutation->>'resourceId', p_sealed, p_mutation->>'message', (p_mutation->>'createdAt')::bigint)
    ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id, sealed_values = excluded.sealed_values,
      message = excluded.message, created_at = excluded.created_at;
  ELSIF v_type = 'deleteResource' THEN
    -- Waits for a credential commit in flight (KEY SHARE), whose credential the next statements see.
    PERFORM 1 FROM resources WHERE id = v_id FOR UPDATE;
    INSERT INTO tombstones (entity, id, deleted_at)
      SELECT 'credential', id, v_at FROM credentials WHERE resource_id = v_id
      UNION ALL SELECT 'resource', v_id, v_at
      ON CONFLICT (entity, id) DO NOTHING;
    DELETE FROM resources WHERE id = v_id;
    INSERT INTO deliveries (id, callback_id, url, sealed_payload, payload, created_at, deadline_at, state, attempts, next_attempt_at)
      SELECT token, callback_id, callback_url, '\\x'::bytea,
        json_build_object('state', 'error', 'message', coalesce(p_orphan_message, 'The resource was deprovisioned')),
        v_at, coalesce(deadline_at, v_at), 'pending', 0, v_at
      FROM operations WHERE parent_id = v_id AND state = 'pending' AND callback_id IS NOT NULL AND callback_url IS NOT NULL
      ON CONFLICT (id) DO NOTHING;
    DELETE FROM operations WHERE parent_id = v_id AND state = 'pending';
  ELSIF v_type = 'deleteCredential' THEN
    DELETE FROM credentials WHERE id = v_id;
    INSERT INTO tombstones (entity, id, deleted_at) VALUES ('credential', v_id, v_at) ON CONFLICT (entity, id) DO NOTHING;
  END IF;
  DELETE FROM operations WHERE key = p_key;
  IF p_delivery IS NOT NULL THEN
    INSERT INTO deliveries (id, callback_id, url, sealed_payload, created_at, deadline_at, state, attempts, next_attempt_at)
    VALUES (p_delivery->>'id', p_delivery->>'callbackId', p_delivery->>'url', p_delivery_sealed,
      (p_delivery->>'createdAt')::bigint, (p_delivery->>'deadlineAt')::bigint, 'pending', 0, (p_delivery->>'createdAt')::bigint)
    ON CONFLICT (id) DO UPDATE SET callback_id = excluded.callback_id, url = excluded.url, sealed_payload = excluded.sealed_payload,
      payload = NULL, created_at = excluded.created_at, deadline_at = excluded.deadline_at, state = 'pending', attempts = 0,
      next_attempt_at = excluded.next_attempt_at, last_error = NULL, claimed_by = NULL, claim_expires_at = NULL;
  END IF;
  IF p_replay IS NOT NULL THEN
    INSERT INTO replays (request_id, status, sealed_body, ${plainBody ? 'body, ' : ''}expires_at)
    VALUES (p_replay->>'requestId', (p_replay->>'status')::integer, p_replay_sealed, ${plainBody ? "p_replay->'body', " : ''}(p_replay->>'expiresAt')::bigint)
    ON CONFLICT (request_id) DO NOTHING;
  END IF;
  RETURN 'ok';
END
$fn$;
`;
}
