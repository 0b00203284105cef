export { ingestWorkflow } from './ingest';
export { predictionWorkflow } from './prediction';
export { recountWorkflow, retentionSweepWorkflow, trashPurgeWorkflow } from './samples';
