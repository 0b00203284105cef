import { patched, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const io = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '2 minutes',
  retry: { maximumAttempts: 5, initialInterval: '2 seconds' },
});

/**
 * Recounts tissue patches after a change of mpp (`recount-{sampleId}`). A sample uploaded with
 * `autoSegment` but no scale was left unsegmented at the end of ingest (segmentation needs one):
 * with its scale now set, its segmentation starts here; one segmented at another scale is
 * segmented again at the new one.
 */
export async function recountWorkflow(input: { sampleId: string }): Promise<{ patchCount: number | null }> {
  const { patchCount } = await io.recountTissuePatches({ sampleId: input.sampleId });
  if (patched('auto-segmentation-once-scaled')) {
    try {
      await io.queueAutoSegmentation({ sampleId: input.sampleId });
    } catch {
      // Retried by the proxy already; the count stands, and a run is one POST away.
    }
  }
  return { patchCount };
}

/**
 * Run by a Schedule: moves expired samples into Trash, and drops expired OAuth protocol rows.
 * `asOf` replaces the clock in tests and operator re-runs; otherwise the workflow's own
 * (deterministic) start time is used.
 */
export async function retentionSweepWorkflow(input: { asOf?: string } = {}): Promise<{ trashed: number }> {
  const result = await io.trashExpired({ asOf: input.asOf ?? new Date().toISOString() });
  if (patched('oauth-payload-sweep')) await io.dropExpiredOAuthPayloads({});
  return result;
}

/** Run by a Schedule: permanently deletes samples whose 7-day Trash window has ended. */
export async function trashPurgeWorkflow(
  input: { asOf?: string; trashWindowDays?: number } = {},
): Promise<{ purged: number }> {
  return io.purgeTrashed({
    asOf: input.asOf ?? new Date().toISOString(),
    trashWindowDays: input.trashWindowDays ?? 7,
  });
}
