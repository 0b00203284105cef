import type { Sql } from '../db';
import type { ObjectStore } from '../storage';
import { createIngestActivities } from './ingest';
import { createPredictionActivities } from './prediction';
import { createRetentionActivities } from './retention';
import { createUploadActivities } from './uploads';

export interface ActivityDeps {
  sql: Sql;
  store: ObjectStore;
}

/** Every activity, bound to its dependencies; workflows proxy `ReturnType<typeof createActivities>`. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createUploadActivities(deps),
    ...createIngestActivities(deps),
    ...createPredictionActivities(deps),
    ...createRetentionActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
