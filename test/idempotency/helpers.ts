import type { Clock } from '../../src/lib/clock.js';

/**
 * A clock the test moves by hand, sleeps included: `advance` wakes every sleeper whose time has
 * come, so waits, leases and deadlines happen when the test says, whatever the machine's speed.
 */
export function manualClock(start = Date.UTC(2030, 0, 1)): Clock & { advance(ms: number): Promise<void>; sleepers(): number; settle(): Promise<void> } {
  let t = start;
  let sleepers: { at: number; wake: () => void }[] = [];
  const settle = async (): Promise<void> => {
    // Let promise chains run up to their next sleep or I/O-free await.
    for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  };
  return {
    now: () => t,
    sleep(ms, signal) {
      return new Promise<void>((resolve) => {
        if (signal?.aborted === true) {
          resolve();
          return;
        }
        const sleeper = {
          at: t + Math.max(0, ms),
          wake: () => {
            sleepers = sleepers.filter((s) => s !== sleeper);
            resolve();
          },
        };
        sleepers.push(sleeper);
        signal?.addEventListener('abort', () => sleeper.wake(), { once: true });
      });
    },
    after(ms, fire) {
      const sleeper = { at: t + Math.max(0, ms), wake: () => {
        sleepers = sleepers.filter((s) => s !== sleeper);
        fire();
      } };
      sleepers.push(sleeper);
      return () => {
        sleepers = sleepers.filter((s) => s !== sleeper);
      };
    },
    async advance(ms) {
      t += ms;
      for (const sleeper of sleepers.filter((s) => s.at <= t)) sleeper.wake();
      await settle();
    },
    sleepers: () => sleepers.length,
    settle,
  };
}
