export { ingestWorkflow } from './ingest';
export { predictionWorkflow, reconcilePredictionJobsWorkflow } from './prediction';
export { recountWorkflow, retentionSweepWorkflow, trashPurgeWorkflow } from './samples';
