import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const io = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '2 minutes',
  retry: { maximumAttempts: 5, initialInterval: '2 seconds' },
});

export interface IngestInput {
  sampleId: string;
}

/**
 * Takes a sample from its last uploaded byte to `ready`. Today it assembles the uploaded
 * chunks into the original object; de-identification and preprocessing follow in the
 * ingest issue, as further steps of this same workflow.
 */
export async function ingestWorkflow(
  input: IngestInput,
): Promise<{ storageKey: string; contentSha256: string }> {
  const assembled = await io.assembleUpload({ sampleId: input.sampleId });
  return { storageKey: assembled.storageKey, contentSha256: assembled.contentSha256 };
}
