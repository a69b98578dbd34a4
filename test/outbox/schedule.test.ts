import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { backoffBound, backoffDelay, DEFAULT_BACKOFF, planRetry, type Backoff } from '../../src/outbox/schedule.js';

const backoffArb = fc
  .record({
    baseMs: fc.integer({ min: 1, max: 60_000 }),
    extra: fc.integer({ min: 0, max: 3_600_000 }),
    factor: fc.double({ min: 1, max: 4, noNaN: true }),
  })
  .map(({ baseMs, extra, factor }): Backoff => ({ baseMs, maxMs: baseMs + extra, factor, jitter: 'full' }));

describe('outbox schedule', () => {
  it('defaults to 1 s growing twofold up to 15 minutes', () => {
    const bounds = [1, 2, 3, 4, 10, 11, 50].map((n) => backoffBound(n, DEFAULT_BACKOFF));
    assert.deepEqual(bounds, [1000, 2000, 4000, 8000, 512_000, 900_000, 900_000]);
  });

  it('bounds never shrink and never exceed maxMs', () => {
    fc.assert(
      fc.property(backoffArb, fc.integer({ min: 1, max: 200 }), (backoff, n) => {
        const bound = backoffBound(n, backoff);
        assert.ok(bound <= backoff.maxMs);
        assert.ok(bound >= backoff.baseMs);
        assert.ok(backoffBound(n + 1, backoff) >= bound);
      }),
    );
  });

  it('full jitter stays within [0, bound], whatever the random source answers', () => {
    fc.assert(
      fc.property(backoffArb, fc.integer({ min: 1, max: 60 }), fc.double({ min: -1, max: 2, noNaN: true }), (backoff, n, r) => {
        const delay = backoffDelay(n, backoff, () => r);
        assert.ok(delay >= 0 && delay <= backoffBound(n, backoff), `delay ${delay}`);
        assert.ok(Number.isInteger(delay));
      }),
    );
  });

  it('a retry is at least the Retry-After (capped at maxMs), later than now, and never after the deadline', () => {
    fc.assert(
      fc.property(
        backoffArb,
        fc.integer({ min: 1, max: 40 }),
        fc.option(fc.integer({ min: 0, max: 48 * 3_600_000 }), { nil: undefined }),
        fc.integer({ min: 0, max: 48 * 3_600_000 }),
        fc.double({ min: 0, max: 0.9999, noNaN: true }),
        (backoff, failures, retryAfterMs, remaining, r) => {
          const now = 1_000_000;
          const lead = 2000;
          const plan = planRetry({ now, failures, deadlineAt: now + remaining, retryAfterMs, lastAttemptLeadMs: lead, backoff, random: () => r });
          if (plan.action === 'give-up') {
            assert.ok(now >= now + remaining - lead, 'gives up only inside the last window');
            return;
          }
          assert.ok(plan.nextAttemptAt > now);
          assert.ok(plan.nextAttemptAt <= now + remaining - lead);
          if (!plan.lastAttempt) {
            assert.ok(plan.nextAttemptAt >= now + Math.min(retryAfterMs ?? 0, backoff.maxMs));
            assert.ok(plan.nextAttemptAt <= now + Math.max(backoffBound(failures, backoff), Math.min(retryAfterMs ?? 0, backoff.maxMs), 1));
          }
        },
      ),
    );
  });

  it('moves an overshooting retry to the last window once, then gives up', () => {
    const backoff: Backoff = { ...DEFAULT_BACKOFF, jitter: 'none' };
    const deadlineAt = 100_000;
    const first = planRetry({ now: 90_000, failures: 20, deadlineAt, lastAttemptLeadMs: 2000, backoff, random: Math.random });
    assert.deepEqual(first, { action: 'retry', nextAttemptAt: 98_000, lastAttempt: true });
    const second = planRetry({ now: 98_000, failures: 21, deadlineAt, lastAttemptLeadMs: 2000, backoff, random: Math.random });
    assert.deepEqual(second, { action: 'give-up' });
  });
});
