import {
  ActivityCancellationType,
  type ActivityInterfaceFor,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { siblingTaskQueue, type WorkflowSettingsMemo } from '../schemas/temporal';

/**
 * The activity proxies workflows share, one per timeout profile (STYLE.md: `io` with short
 * timeouts on the workflow's own queue, `compute` with long ones and a heartbeat timeout on
 * a sibling queue: `inference` or `compute`, by the activity's name below).
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
 * The steps that load or run a model go to the `inference` queue, every other heavy step to
 * `compute`: the one place an activity is given a queue (docs/operations.md, Sizing workers).
 */
const inferenceSteps: ReadonlySet<string> = new Set<keyof Activities>(['dispatchJob', 'predictJob']);

/**
 * How long a compute step may go without a heartbeat before the server retries it elsewhere:
 * the time a killed worker's step waits. The starter's setting (memo), else two minutes.
 */
function computeHeartbeatTimeout(): number | string {
  const memo = workflowInfo().memo as WorkflowSettingsMemo | undefined;
  const seconds = memo?.computeHeartbeatTimeoutSeconds;
  return typeof seconds === 'number' ? seconds * 1000 : '2 minutes';
}

/**
 * CPU-heavy steps on the queues beside the workflow's. Each heartbeats at least every
 * tile or shard run. `waitForCancellation`: a cancelled run has stopped writing before the
 * workflow's last step removes what it wrote.
 */
export function computeActivities(options: {
  maximumAttempts: number;
  waitForCancellation?: boolean;
  /** Steps sent to `inference` besides the model's own (a workflow's choice, behind a patch). */
  alsoOnInference?: readonly (keyof Activities)[];
}): ActivityInterfaceFor<Activities> {
  const own = workflowInfo().taskQueue;
  const heartbeatTimeout = computeHeartbeatTimeout();
  const onQueue = (kind: 'compute' | 'inference') =>
    proxyActivities<Activities>({
      taskQueue: siblingTaskQueue(own, kind),
      startToCloseTimeout: '12 hours',
      heartbeatTimeout,
      retry: {
        maximumAttempts: options.maximumAttempts,
        initialInterval: '2 seconds',
        maximumInterval: '1 minute',
      },
      ...(options.waitForCancellation
        ? { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED }
        : {}),
    });
  const queues = { compute: onQueue('compute'), inference: onQueue('inference') };
  const onInference = new Set<string>([...inferenceSteps, ...(options.alsoOnInference ?? [])]);
  return new Proxy({} as ActivityInterfaceFor<Activities>, {
    get: (_, name) => Reflect.get(onInference.has(name as string) ? queues.inference : queues.compute, name),
  });
}
