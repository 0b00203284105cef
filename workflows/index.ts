export { exportWorkflow } from './export';
export { ingestWorkflow } from './ingest';
export { maintenanceWorkflow } from './maintenance';
export { predictionWorkflow } from './prediction';
export { type RerunActivityInput, type RerunActivityResult, rerunActivityWorkflow } from './rerun';
export { recountWorkflow, retentionSweepWorkflow, trashPurgeWorkflow } from './samples';
export { segmentationMarkersWorkflow, segmentationWorkflow } from './segmentation';
