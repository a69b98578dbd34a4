/**
 * The durable callback outbox: delivery of long-running operations' outcomes to the marketplace,
 * with retries, backoff and the 24-hour deadline. See docs/outbox.md.
 */
export { createOutbox } from './outbox.js';
export type {
  BackoffOptions,
  Outbox,
  OutboxOptions,
  OutboxStats,
  SendCallback,
  SendContext,
  SendResult,
} from './types.js';
