/**
 * The one claim rule (src/idempotency/claim-rule.ts), table-driven over stored states, on a clock
 * the test moves: which outcome each state gives, which writes make it true, and what a claimed
 * operation's snapshot reads.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CONFLICT_PENDING_MESSAGE,
  CONFLICT_RUNNING_MESSAGE,
  decideClaim,
  decideRecord,
  PENDING_FALLBACK_MESSAGE,
  type ClaimReads,
  type SnapshotScope,
} from '../../src/idempotency/claim-rule.js';
import type { ClaimInput, OperationKind, OperationRecord, OperationRequest, RecordedAnswer } from '../../src/store/types.js';
import { manualClock } from './helpers.js';

const LEASE = 30_000;

/** A stored state the fake reads answer from. */
interface State {
  replays?: Record<string, { answer: RecordedAnswer; expiresAt: number }>;
  operations?: OperationRecord[];
  credentials?: Record<string, string>;
}

function reads(state: State, scopes: SnapshotScope[]): ClaimReads {
  const operations = new Map((state.operations ?? []).map((op) => [op.key, op]));
  const parentOf = (op: OperationRecord) => (op.request.kind === 'provisionCredentials' ? op.request.resourceId : state.credentials?.[op.targetId]);
  return {
    replay: (requestId, now) => {
      const record = state.replays?.[requestId];
      return record !== undefined && record.expiresAt >= now ? record.answer : undefined;
    },
    operation: (key) => operations.get(key),
    credentialParent: (id) => state.credentials?.[id],
    runningChild: (resourceId, now) =>
      [...operations.values()].find((op) => op.key.startsWith('credential:') && op.state === 'running' && op.leaseExpiresAt > now && parentOf(op) === resourceId),
    snapshot: (scope) => {
      scopes.push(scope);
      return { resource: undefined, resourceDeleted: false, credential: undefined, credentialDeleted: false, credentials: [] };
    },
  };
}

const REQUESTS: Record<OperationKind, OperationRequest> = {
  provision: { kind: 'provision', product: 'bonnets', plan: 'small', region: 'all::global', features: {} },
  changePlan: { kind: 'changePlan', plan: 'large' },
  deprovision: { kind: 'deprovision' },
  provisionCredentials: { kind: 'provisionCredentials', resourceId: 'r1' },
  deprovisionCredentials: { kind: 'deprovisionCredentials' },
};
const keyOf = (kind: OperationKind, id: string) => `${kind.endsWith('Credentials') ? 'credential' : 'resource'}:${id}`;

function operation(kind: OperationKind, id: string, at: number, extra: Partial<OperationRecord> = {}): OperationRecord {
  return { key: keyOf(kind, id), kind, targetId: id, fingerprint: `fp-${kind}`, state: 'running', token: `t-${id}`, owner: 'other', leaseExpiresAt: at + LEASE, request: REQUESTS[kind], createdAt: at, ...extra };
}

function input(kind: OperationKind, id: string, now: number, extra: Partial<ClaimInput> = {}): ClaimInput {
  return { key: keyOf(kind, id), kind, targetId: id, fingerprint: `fp-${kind}`, request: REQUESTS[kind], owner: 'me', now, leaseMs: LEASE, ...extra };
}

describe('the claim rule', () => {
  const clock = manualClock();
  const T0 = clock.now();
  const signed = { requestId: 'sig', replayExpiresAt: T0 + 600_000 };

  interface Row {
    name: string;
    state: State;
    /** How far the clock moves before the claim. */
    after: number;
    claim: ClaimInput | ((now: number) => ClaimInput);
    outcome: string;
    /** The holder's key reported, for busy/blocked/pending/conflict. */
    holder?: string;
    answer?: RecordedAnswer;
    /** Whether the outcome records its answer against the signature. */
    records?: boolean;
    scope?: SnapshotScope;
  }

  const running = operation('provision', 'r1', T0);
  const pending = operation('provision', 'r1', T0, { state: 'pending', message: 'Knitting', deadlineAt: T0 + 86_400_000 });
  const deprovisionRunning = operation('deprovision', 'r1', T0);
  const deprovisionPending = { ...deprovisionRunning, state: 'pending' as const, message: 'Unravelling', deadlineAt: T0 + 86_400_000 };
  const childRunning = operation('provisionCredentials', 'c9', T0);

  const rows: Row[] = [
    { name: 'a live replay record answers, whatever else holds the key', state: { replays: { sig: { answer: { status: 200, body: { message: 'Now large' } }, expiresAt: T0 + 10 } }, operations: [running] }, after: 10, claim: (now) => input('provision', 'r1', now, signed), outcome: 'replayed', answer: { status: 200, body: { message: 'Now large' } } },
    { name: 'an expired replay record answers nothing', state: { replays: { sig: { answer: { status: 200 }, expiresAt: T0 + 10 } } }, after: 11, claim: (now) => input('provision', 'r1', now, signed), outcome: 'claimed', scope: { resourceId: 'r1', credentialId: undefined, listCredentials: false } },
    { name: 'a free key is claimed', state: {}, after: 0, claim: (now) => input('provision', 'r1', now), outcome: 'claimed', scope: { resourceId: 'r1', credentialId: undefined, listCredentials: false } },
    { name: 'an identical running request makes it busy: nothing recorded', state: { operations: [running] }, after: LEASE - 1, claim: (now) => input('provision', 'r1', now, signed), outcome: 'busy', holder: 'resource:r1', records: false },
    { name: 'another request running is a conflict, recorded', state: { operations: [running] }, after: 5, claim: (now) => input('provision', 'r1', now, { ...signed, fingerprint: 'other' }), outcome: 'conflict', holder: 'resource:r1', answer: { status: 409, body: { message: CONFLICT_RUNNING_MESSAGE } }, records: true },
    { name: 'a conflict without replayExpiresAt records nothing', state: { operations: [running] }, after: 5, claim: (now) => input('provision', 'r1', now, { requestId: 'sig', fingerprint: 'other' }), outcome: 'conflict', holder: 'resource:r1', answer: { status: 409, body: { message: CONFLICT_RUNNING_MESSAGE } }, records: false },
    { name: 'a lease lapsed at exactly leaseExpiresAt is taken over', state: { operations: [running] }, after: LEASE, claim: (now) => input('provision', 'r1', now, { fingerprint: 'other' }), outcome: 'claimed', scope: { resourceId: 'r1', credentialId: undefined, listCredentials: false } },
    { name: 'an identical pending request answers its 202, recorded', state: { operations: [pending] }, after: LEASE * 10, claim: (now) => input('provision', 'r1', now, signed), outcome: 'pending', holder: 'resource:r1', answer: { status: 202, body: { message: 'Knitting' } }, records: true },
    { name: 'a pending holder without a message answers the fallback 202', state: { operations: [{ ...pending, message: undefined }] }, after: 1, claim: (now) => input('provision', 'r1', now), outcome: 'pending', answer: { status: 202, body: { message: PENDING_FALLBACK_MESSAGE } } },
    { name: 'another request against a pending one is a conflict (pending message)', state: { operations: [pending] }, after: 1, claim: (now) => input('provision', 'r1', now, { ...signed, fingerprint: 'other' }), outcome: 'conflict', answer: { status: 409, body: { message: CONFLICT_PENDING_MESSAGE } }, records: true },
    { name: 'a pending operation past its deadline is replaced', state: { operations: [pending] }, after: 86_400_000, claim: (now) => input('provision', 'r1', now), outcome: 'claimed' },
    { name: 'a credential claim waits for its resource\'s running deprovision (blocked)', state: { operations: [deprovisionRunning] }, after: 1, claim: (now) => input('provisionCredentials', 'c1', now, { ...signed, parentId: 'r1' }), outcome: 'blocked', holder: 'resource:r1', records: false },
    { name: 'a credential claim is refused by its resource\'s pending deprovision, recorded', state: { operations: [deprovisionPending] }, after: LEASE * 2, claim: (now) => input('provisionCredentials', 'c1', now, { ...signed, parentId: 'r1' }), outcome: 'conflict', holder: 'resource:r1', answer: { status: 409, body: { message: CONFLICT_PENDING_MESSAGE } }, records: true },
    { name: 'a lapsed deprovision holds nothing back', state: { operations: [deprovisionRunning] }, after: LEASE, claim: (now) => input('provisionCredentials', 'c1', now, { parentId: 'r1' }), outcome: 'claimed', scope: { resourceId: 'r1', credentialId: 'c1', listCredentials: false } },
    { name: 'a plan change holds no credential back', state: { operations: [operation('changePlan', 'r1', T0)] }, after: 1, claim: (now) => input('provisionCredentials', 'c1', now, { parentId: 'r1' }), outcome: 'claimed' },
    { name: 'a credential DELETE finds its parent through the stored credential', state: { operations: [deprovisionRunning], credentials: { c1: 'r1' } }, after: 1, claim: (now) => input('deprovisionCredentials', 'c1', now), outcome: 'blocked', holder: 'resource:r1' },
    { name: 'a credential DELETE of an unknown credential has no parent to wait for', state: { operations: [deprovisionRunning] }, after: 1, claim: (now) => input('deprovisionCredentials', 'c1', now), outcome: 'claimed', scope: { resourceId: undefined, credentialId: 'c1', listCredentials: false } },
    { name: 'a deprovision waits for a running credential operation of its resource', state: { operations: [childRunning] }, after: 1, claim: (now) => input('deprovision', 'r1', now, signed), outcome: 'blocked', holder: 'credential:c9', records: false },
    { name: 'a deprovision is not held back by a pending credential operation, and lists the credentials', state: { operations: [{ ...childRunning, state: 'pending', deadlineAt: T0 + 86_400_000 }] }, after: 1, claim: (now) => input('deprovision', 'r1', now), outcome: 'claimed', scope: { resourceId: 'r1', credentialId: undefined, listCredentials: true } },
    { name: 'a deprovision is not held back by another resource\'s credentials', state: { operations: [{ ...childRunning, request: { kind: 'provisionCredentials', resourceId: 'r2' } }] }, after: 1, claim: (now) => input('deprovision', 'r1', now), outcome: 'claimed' },
  ];

  for (const row of rows) {
    it(row.name, async () => {
      const start = clock.now();
      await clock.advance(row.after);
      const now = clock.now();
      try {
        const scopes: SnapshotScope[] = [];
        let tokens = 0;
        const claim = typeof row.claim === 'function' ? row.claim(now) : row.claim;
        const { result, writes } = decideClaim(claim, reads(row.state, scopes), () => `token-${++tokens}`);
        assert.equal(result.outcome, row.outcome);
        if (row.answer !== undefined) assert.deepEqual('answer' in result ? result.answer : undefined, row.answer);
        if (row.holder !== undefined) assert.equal('operation' in result ? result.operation.key : undefined, row.holder);
        const records = writes.filter((write) => write.type === 'record');
        if (row.records !== undefined) {
          assert.deepEqual(records.map((write) => write.type === 'record' && write.replay), row.records ? [{ requestId: 'sig', answer: row.answer, expiresAt: T0 + 600_000 }] : []);
        }
        if (result.outcome === 'claimed') {
          assert.equal(tokens, 1, 'one token, for the claim');
          assert.deepEqual(writes.filter((write) => write.type === 'claim').map((write) => write.type === 'claim' && write.operation), [result.operation]);
          assert.deepEqual(result.operation, { key: claim.key, kind: claim.kind, targetId: claim.targetId, fingerprint: claim.fingerprint, state: 'running', token: 'token-1', owner: 'me', leaseExpiresAt: now + LEASE, request: claim.request, createdAt: now });
          if (row.scope !== undefined) assert.deepEqual(scopes, [row.scope]);
        } else {
          assert.equal(tokens, 0, 'no token drawn without a claim');
          assert.deepEqual(scopes, [], 'no snapshot read without a claim');
          assert.equal(writes.some((write) => write.type === 'claim'), false);
        }
      } finally {
        // Each row starts from the same time.
        await clock.advance(start - clock.now());
      }
    });
  }
});

describe('the record rule', () => {
  const replay = { requestId: 'sig', answer: { status: 503, body: { message: 'retry later' } }, expiresAt: 2_000 };
  it('writes when the signature has no record, and the given answer stands', () => {
    assert.deepEqual(decideRecord(undefined, replay, 1_000), { write: true, standing: replay.answer });
  });
  it('keeps a live record: the first answer stands', () => {
    const first = { requestId: 'sig', answer: { status: 409, body: { message: 'conflict' } }, expiresAt: 1_000 };
    assert.deepEqual(decideRecord(first, replay, 1_000), { write: false, standing: first.answer });
  });
  it('never overwrites, but an expired record no longer answers', () => {
    const expired = { requestId: 'sig', answer: { status: 409 }, expiresAt: 999 };
    assert.deepEqual(decideRecord(expired, replay, 1_000), { write: false, standing: replay.answer });
  });
});
