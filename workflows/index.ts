export { ingestWorkflow } from './ingest';
export { recountWorkflow, retentionSweepWorkflow, trashPurgeWorkflow } from './samples';
