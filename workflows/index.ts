export { exportWorkflow, maintainExportsWorkflow } from './export';
export { ingestWorkflow } from './ingest';
export { predictionWorkflow, reconcilePredictionJobsWorkflow } from './prediction';
export { type RerunActivityInput, type RerunActivityResult, rerunActivityWorkflow } from './rerun';
export { recountWorkflow, retentionSweepWorkflow, trashPurgeWorkflow } from './samples';
export {
  reconcileSegmentationRunsWorkflow,
  segmentationMarkersWorkflow,
  segmentationWorkflow,
} from './segmentation';
