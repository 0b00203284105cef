import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ensureSchedules } from '../../cli/runtime';
import { creditSummary } from '../../db/credits';
import { markExportWorkflowStarted, upsertExport } from '../../db/exports';
import { selectionKey } from '../../schemas/exports';
import { searchAttributeNames, taskQueueName, UPKEEP_MAINTENANCE, workflowIds } from '../../schemas/temporal';
import { stackActivities } from '../support/activities';
import { apiClient } from '../support/http';
import { insertPricedSample } from '../support/predictions';
import { insertJob, insertSample } from '../support/samples';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadBytes } from '../support/uploads';

/**
 * The reconciler of closed workflows on the real dev server: a job, an ingesting sample, a
 * segmentation run and an export whose workflows an operator terminates (as from the Temporal
 * UI or `temporal workflow terminate`) are settled by the next pass: a failed state with the
 * reason, the job's credits back exactly once; a second pass changes nothing. No worker runs
 * until the end, so every workflow is running, and stays so, until the test terminates it.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  call = apiClient(stack.api, stack.tenant.apiKey);
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

const reconciler = () => stackActivities(stack, stack.workflows.workflowState);

async function ledgerRows(jobId: string) {
  return stack.sql<{ kind: string; balance_delta: string; pending_delta: string }[]>`
    SELECT kind, balance_delta, pending_delta FROM credit_ledger WHERE job_id = ${jobId} ORDER BY id`;
}

/** One record of each kind, each with its workflow started by the API (or as the API does). */
async function activeRecords() {
  const { organizationId, userId } = stack.tenant;
  const priced = await insertPricedSample(stack.sql, {
    organizationId,
    createdBy: userId,
    patchCount: 21,
    mpp: 0.5,
  });
  const before = await creditSummary(stack.sql, organizationId);
  const submitted = await call('POST', '/predict', { uploadId: priced, markers: ['CD3', 'CD8'] });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;

  const bytes = await readFile(path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'));
  const upload = await uploadBytes(call, bytes, { filename: 'CMU-1-Small-Region.svs' });

  const segmented = await insertSample(stack.sql, { organizationId, createdBy: userId, mppCalibrated: 0.5 });
  const segmentation = await call('POST', `/samples/${segmented}/segmentation`);
  expect(segmentation.status).toBe(202);

  const exportedJob = await insertJob(stack.sql, {
    organizationId,
    sampleId: segmented,
    status: 'completed',
  });
  const selection = { includeHe: false, includeSegmentation: false, includeOriginalUpload: false };
  const row = await upsertExport(stack.sql, {
    jobId: exportedJob,
    format: 'ome-tiff',
    ...selection,
    organizationId,
    sampleId: segmented,
    layerId: null,
    status: 'pending',
    nativeSize: null,
    expiresAt: new Date(Date.now() + 3_600_000),
  });
  await stack.workflows.startExport(row);
  await markExportWorkflowStarted(stack.sql, row.id);

  return {
    before,
    jobId,
    sampleId: upload.id,
    segmentedSampleId: segmented,
    exportId: row.id,
    workflows: [
      workflowIds.prediction(jobId),
      workflowIds.ingest(upload.id),
      workflowIds.segmentation(segmented, 1),
      workflowIds.export(exportedJob, 'ome-tiff', selectionKey(selection)),
    ],
  };
}

test('terminated workflows: each record ends failed with the reason, credits refunded once, a second pass changes nothing', async () => {
  const records = await activeRecords();
  const { organizationId } = stack.tenant;
  const reserved = await creditSummary(stack.sql, organizationId);
  expect(reserved.pending).toBe(records.before.pending + 42);

  // Running workflows are left alone.
  const activities = reconciler();
  expect(await activities.settleClosedWorkflows({ olderThanSeconds: 0, closedForSeconds: 0 })).toEqual({
    checked: 4,
    jobs: 0,
    samples: 0,
    segmentationRuns: 0,
    exports: 0,
  });
  expect((await call('GET', `/jobs/${records.jobId}`)).json.status).toBe('queued');

  for (const id of records.workflows) {
    const handle = stack.client.workflow.getHandle(id);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await handle.terminate('an operator stopped it');
  }
  // Just closed: left to the next pass, since a live worker's activity may still be writing.
  expect(await activities.settleClosedWorkflows({ olderThanSeconds: 0 })).toMatchObject({
    checked: 4,
    jobs: 0,
  });

  expect(await activities.settleClosedWorkflows({ olderThanSeconds: 0, closedForSeconds: 0 })).toEqual({
    checked: 4,
    jobs: 1,
    samples: 1,
    segmentationRuns: 1,
    exports: 1,
  });

  const job = (await call('GET', `/jobs/${records.jobId}`)).json;
  expect(job).toMatchObject({ status: 'failed' });
  expect(job.errorMessage).toMatch(/terminated.*credits were released/);
  // The ledger balances: the reservation went back whole, nothing was spent.
  expect(await creditSummary(stack.sql, organizationId)).toEqual(records.before);
  const rows = await ledgerRows(records.jobId);
  expect(rows.map((r) => r.kind)).toEqual(['reserve', 'release']);
  expect(rows.reduce((sum, r) => sum + Number(r.pending_delta), 0)).toBe(0);

  const sample = (await call('GET', `/uploads/${records.sampleId}`)).json;
  expect(sample).toMatchObject({ status: 'deid_failed' });
  expect(sample.statusMessage).toMatch(/terminated/);

  const segmentation = (await call('GET', `/samples/${records.segmentedSampleId}/segmentation`)).json;
  expect(segmentation).toMatchObject({ status: 'failed' });
  expect(JSON.stringify(segmentation)).toMatch(/terminated/);

  const [exported] = await stack.sql`SELECT status, error FROM exports WHERE id = ${records.exportId}`;
  expect(exported).toMatchObject({ status: 'failed' });
  expect(exported!.error).toMatch(/terminated/);

  // A second pass finds nothing active and writes nothing.
  expect(await activities.settleClosedWorkflows({ olderThanSeconds: 0, closedForSeconds: 0 })).toEqual({
    checked: 0,
    jobs: 0,
    samples: 0,
    segmentationRuns: 0,
    exports: 0,
  });
  expect(await ledgerRows(records.jobId)).toEqual(rows);
  expect(await creditSummary(stack.sql, organizationId)).toEqual(records.before);
});

test('a job whose workflow failed while its user had asked to cancel ends cancelled and refunded', async () => {
  const { organizationId, userId } = stack.tenant;
  const priced = await insertPricedSample(stack.sql, {
    organizationId,
    createdBy: userId,
    patchCount: 5,
    mpp: 0.5,
  });
  const before = await creditSummary(stack.sql, organizationId);
  const jobId = (await call('POST', '/predict', { uploadId: priced, markers: ['CD3'] })).json.jobId as string;
  await stack.sql`UPDATE jobs SET cancel_requested_at = now() WHERE id = ${jobId}`;
  await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).terminate('stuck');
  const settled = await reconciler().settleClosedWorkflows({ olderThanSeconds: 0, closedForSeconds: 0 });
  expect(settled.jobs).toBe(1);
  expect((await call('GET', `/jobs/${jobId}`)).json.status).toBe('cancelled');
  expect(await creditSummary(stack.sql, organizationId)).toEqual(before);
});

test('the maintenance Schedule runs the reconcilers as one workflow that operators filter out with Upkeep', async () => {
  const workers = await stack.startWorker();
  const scheduleId = `${stack.taskQueuePrefix}-${workflowIds.maintenance}`;
  try {
    await ensureSchedules(stack.client, stack.taskQueuePrefix);
    const schedule = await stack.client.schedule.getHandle(scheduleId).describe();
    expect(schedule.spec.intervals?.map((interval) => interval.every)).toEqual([300_000]);
    expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'maintenanceWorkflow' });
    await stack.client.schedule.getHandle(scheduleId).trigger();

    const taskQueue = taskQueueName(stack.taskQueuePrefix, 'io');
    const upkeep = `${searchAttributeNames.upkeep} = "${UPKEEP_MAINTENANCE}" AND TaskQueue = "${taskQueue}"`;
    const runs = await eventually(async () => {
      const found = [];
      for await (const run of stack.client.workflow.list({ query: upkeep })) found.push(run);
      return found.length > 0 && found.every((run) => run.status.name === 'COMPLETED') ? found : undefined;
    });
    expect(runs.map((run) => run.type)).toEqual(['maintenanceWorkflow']);
    // Nothing was left to settle: the records of the tests above are all terminal.
    const result = await stack.client.workflow.getHandle(runs[0]!.workflowId, runs[0]!.runId).result();
    expect(result.closed).toEqual({ checked: 0, jobs: 0, samples: 0, segmentationRuns: 0, exports: 0 });

    // The operators' list of jobs: every workflow of this file but the maintenance run.
    const jobsOnly = `${searchAttributeNames.upkeep} IS NULL AND TaskQueue = "${taskQueue}"`;
    const types = new Set<string>();
    for await (const run of stack.client.workflow.list({ query: jobsOnly })) types.add(run.type);
    expect(types.has('predictionWorkflow')).toBe(true);
    expect(types.has('maintenanceWorkflow')).toBe(false);
  } finally {
    for (const id of [workflowIds.maintenance, workflowIds.retentionSweep, workflowIds.trashPurge]) {
      await stack.client.schedule.getHandle(`${stack.taskQueuePrefix}-${id}`).delete();
    }
    await workers.shutdown();
  }
});

/** Polls `probe` (visibility is eventually consistent) until it answers something. */
async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting for the workflow list');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

test('the retired one-minute reconciler Schedules of an earlier version are deleted', async () => {
  const retired = `${stack.taskQueuePrefix}-prediction-reconciler`;
  await stack.client.schedule.create({
    scheduleId: retired,
    spec: { intervals: [{ every: '1 minute' }] },
    action: {
      type: 'startWorkflow',
      workflowType: 'maintenanceWorkflow',
      taskQueue: `${stack.taskQueuePrefix}-unused-${randomUUID()}`,
      args: [{}],
    },
  });
  await ensureSchedules(stack.client, stack.taskQueuePrefix);
  try {
    await expect(stack.client.schedule.getHandle(retired).describe()).rejects.toThrow(/not found/i);
  } finally {
    for (const id of [workflowIds.maintenance, workflowIds.retentionSweep, workflowIds.trashPurge]) {
      await stack.client.schedule.getHandle(`${stack.taskQueuePrefix}-${id}`).delete();
    }
  }
});
