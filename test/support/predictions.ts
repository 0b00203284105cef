import type { WorkflowEngine } from '../../api/workflow-engine';
import type { Sql } from '../../db';
import { insertSample } from './samples';

/**
 * A sample as ingest leaves it for pricing: `ready`, with its effective mpp and the tissue
 * patch count taken at `patchCountMpp` (default: that mpp). For tests of rules around pricing;
 * the real path (upload, ingest, count) is exercised in predict.test.ts.
 */
export async function insertPricedSample(
  sql: Sql,
  input: {
    organizationId: string;
    createdBy?: string | null;
    patchCount: number | null;
    mpp: number | null;
    patchCountMpp?: number | null;
    status?: Parameters<typeof insertSample>[1]['status'];
  },
): Promise<string> {
  const id = await insertSample(sql, {
    organizationId: input.organizationId,
    createdBy: input.createdBy ?? null,
    mppCalibrated: input.mpp,
    status: input.status ?? 'ready',
  });
  const countedAt = input.patchCountMpp === undefined ? input.mpp : input.patchCountMpp;
  await sql`INSERT INTO sample_slides (sample_id, format, vendor, levels, patch_count, patch_count_mpp)
    VALUES (${id}, 'tiff', 'aperio', ${sql.json([{ widthPx: 2000, heightPx: 1500, downsample: 1 }])},
      ${input.patchCount}, ${countedAt})`;
  return id;
}

/**
 * Wraps the real engine so that prediction and segmentation starts and prediction cancels are
 * recorded, and can be made to fail or to find no workflow, without any workflow running.
 */
export function recordingEngine() {
  const calls = { started: [] as string[], cancelled: [] as string[], segmentations: [] as string[] };
  const behaviour = {
    startFails: false,
    cancelAnswer: 'requested' as 'requested' | 'not_found',
  };
  const wrap = (real: WorkflowEngine): WorkflowEngine => ({
    ...real,
    async startPrediction(jobId) {
      if (behaviour.startFails) throw new Error('the workflow engine is unreachable');
      calls.started.push(jobId);
    },
    async cancelPrediction(jobId) {
      calls.cancelled.push(jobId);
      return behaviour.cancelAnswer;
    },
    async startSegmentation(run) {
      if (behaviour.startFails) throw new Error('the workflow engine is unreachable');
      calls.segmentations.push(run.id);
    },
  });
  return { calls, behaviour, wrap };
}
