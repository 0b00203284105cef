import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';

/**
 * What a failed step tells the person who asked for it. A failure that is final (non-retryable:
 * the input's fault, such as a compute error, or a state the activity refuses) carries a message
 * written for them; one that ran out of retries carries the service's internals, so `fallback`
 * is told instead.
 */
export function reasonOf(err: unknown, fallback: string): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure && cause.nonRetryable) return cause.message;
  return fallback;
}
