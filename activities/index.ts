import type { Sql } from '../db';
import type { ObjectStore } from '../storage';
import { createIngestActivities } from './ingest';
import { createPredictionActivities } from './prediction';
import { createReconcilerActivities } from './prediction-reconciler';
import { createRetentionActivities } from './retention';
import { createUploadActivities } from './uploads';

export interface ActivityDeps {
  sql: Sql;
  store: ObjectStore;
  /** Starts `prediction-{jobId}` (idempotent): the reconciler restarts jobs the API could not. */
  startPrediction: (jobId: string, job: { organizationId: string; sampleId: string }) => Promise<void>;
}

/** Every activity, bound to its dependencies; workflows proxy `ReturnType<typeof createActivities>`. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createUploadActivities(deps),
    ...createIngestActivities(deps),
    ...createPredictionActivities(deps),
    ...createReconcilerActivities(deps),
    ...createRetentionActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
