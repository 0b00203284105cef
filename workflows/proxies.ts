import { ActivityCancellationType, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { siblingTaskQueue } from '../schemas/temporal';

/**
 * The activity proxies workflows share, one per timeout profile (STYLE.md: `io` with short
 * timeouts on the workflow's own queue, `compute` with long ones and a heartbeat timeout on
 * the sibling compute queue).
 */

/** Short database and store steps; ten attempts ride out a brief outage. */
export const ioActivities = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { maximumAttempts: 10, initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/**
 * A step that must happen whatever the outage (a terminal record, a settlement): it retries
 * without limit, so it must be idempotent.
 */
export const unfailingActivities = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * CPU-heavy steps on the compute queue beside the workflow's. Each heartbeats at least every
 * tile or shard run. `waitForCancellation`: a cancelled run has stopped writing before the
 * workflow's last step removes what it wrote.
 */
export function computeActivities(options: { maximumAttempts: number; waitForCancellation?: boolean }) {
  return proxyActivities<Activities>({
    taskQueue: siblingTaskQueue(workflowInfo().taskQueue, 'compute'),
    startToCloseTimeout: '12 hours',
    heartbeatTimeout: '2 minutes',
    retry: {
      maximumAttempts: options.maximumAttempts,
      initialInterval: '2 seconds',
      maximumInterval: '1 minute',
    },
    ...(options.waitForCancellation
      ? { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED }
      : {}),
  });
}
