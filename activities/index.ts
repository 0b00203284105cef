import type { Sql } from '../db';
import type { WorkflowRun } from '../schemas/temporal';
import type { ObjectStore } from '../storage';
import { createClosedWorkflowActivities } from './closed-workflows';
import { createExportBuildActivities } from './export-build';
import { createExportActivities, type ExportActivityDeps } from './exports';
import { mappingComputeFailures } from './failures';
import { createIngestActivities } from './ingest';
import { createPredictionActivities } from './prediction';
import { createReconcilerActivities } from './prediction-reconciler';
import { createRetentionActivities } from './retention';
import { createSegmentationActivities } from './segmentation';
import { createSegmentationStartActivities, type SegmentationStartDeps } from './segmentation-starts';
import { createUploadActivities } from './uploads';

export interface ActivityDeps extends SegmentationStartDeps, ExportActivityDeps {
  sql: Sql;
  store: ObjectStore;
  /** JPEG quality of the H&E in OME-TIFF exports; default 90. */
  exportJpegQuality?: number;
  /** Regions of one slide's pyramid built at once; default 4. */
  pyramidRegionsInFlight?: number;
  /** Tile bands of one segmentation run segmented at once; default 4. */
  segmentationBandsInFlight?: number;
  /** Tiles per segmentation band; default 16. */
  segmentationBandTiles?: number;
  /** Bands of one prediction job inferred at once; default 4. */
  predictionBandsInFlight?: number;
  /** Starts `prediction-{jobId}` (idempotent): the reconciler restarts jobs the API could not. */
  startPrediction: (jobId: string, job: { organizationId: string; sampleId: string }) => Promise<void>;
  /** `WorkflowEngine.workflowState`: the reconciler of closed workflows asks it. */
  workflowState: (workflowId: string) => Promise<WorkflowRun>;
}

/**
 * Every activity, bound to its dependencies, with compute faults failing for good
 * (activities/failures.ts); workflows proxy `ReturnType<typeof createActivities>`.
 */
export function createActivities(deps: ActivityDeps) {
  const ingest = createIngestActivities(deps);
  const segmentation = createSegmentationActivities(deps);
  const exports = createExportActivities(deps);
  return mappingComputeFailures({
    ...createUploadActivities(deps),
    ...ingest,
    ...createPredictionActivities(deps),
    ...createReconcilerActivities(deps),
    ...createClosedWorkflowActivities({
      ...deps,
      failIngest: ingest.failIngest,
      finishSegmentation: segmentation.finishSegmentation,
      failExport: exports.failExport,
    }),
    ...createRetentionActivities(deps),
    ...segmentation,
    ...createSegmentationStartActivities(deps),
    ...exports,
    ...createExportBuildActivities(deps),
  });
}

export type Activities = ReturnType<typeof createActivities>;
