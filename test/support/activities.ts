import { type ActivityDeps, createActivities } from '../../activities';
import type { TestStack } from './stack';

/**
 * The service's activities over a test stack's database and store, as the worker builds them,
 * for tests that call activities directly: nothing may start a workflow, and the reconciler of
 * closed workflows asks `workflowState` when one is given.
 */
export function stackActivities(stack: TestStack, workflowState?: ActivityDeps['workflowState']) {
  const unused = async (): Promise<never> => {
    throw new Error('a test of activities called directly starts no workflow');
  };
  return createActivities({
    sql: stack.sql,
    store: stack.store,
    startPrediction: unused,
    startSegmentation: unused,
    startSegmentationMarkers: unused,
    startExport: unused,
    workflowState: workflowState ?? unused,
  });
}
