export { ingestWorkflow } from './ingest';
