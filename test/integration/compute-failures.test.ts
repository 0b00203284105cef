import { ApplicationFailure } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { findSlide } from '../../db/sample-slides';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * A fault of the input found by compute (here a corrupt H&E store) fails the activity for good,
 * typed by the compute error's tag, in every activity that calls compute: no retry, and the
 * reason is what the job or run records.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
const CORRUPT = { type: 'CorruptZarr', message: 'zarr.json is not JSON' };

beforeAll(async () => {
  // The run's shared slide, ingested once per run; this file corrupts its own clone's store.
  stack = await startStack({ sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
  const slide = await findSlide(stack.sql, sampleId);
  await stack.store.put(`${slide!.hePrefix}zarr.json`, new TextEncoder().encode('{"zarr_format": 3,'));
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

/** The service's own activities, as the worker builds them. */
function serviceActivities() {
  const nothing = async () => {};
  return createActivities({
    sql: stack.sql,
    store: stack.store,
    startPrediction: nothing,
    startSegmentation: nothing,
    startSegmentationMarkers: nothing,
    startExport: nothing,
    workflowState: async () => ({ state: 'running', closedAt: null }),
  });
}

/** What the activity threw, which must be an ApplicationFailure. */
async function failureOf(run: Promise<unknown>): Promise<ApplicationFailure> {
  const failure = await run.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(failure).toBeInstanceOf(ApplicationFailure);
  return failure as ApplicationFailure;
}

async function submitJob(): Promise<string> {
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI'] });
  expect(submitted.status).toBe(202);
  return submitted.json.jobId as string;
}

test('prediction and segmentation activities fail for good, typed by the compute error', async () => {
  const activities = serviceActivities();
  const environment = new MockActivityEnvironment();
  // No worker runs: the workflows the API starts wait, and the activities are run here instead.
  const jobId = await submitJob();
  await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).terminate('run by the test');
  expect(await environment.run(activities.dispatchJob, { jobId })).toEqual({ active: true });
  // Planning the bands reads the H&E pyramid's metadata, so the corrupt store stops it there.
  const prediction = await failureOf(environment.run(activities.planJob, { jobId }));
  expect(prediction).toMatchObject({ ...CORRUPT, nonRetryable: true });

  const started = await call('POST', `/samples/${sampleId}/segmentation`);
  expect(started.status).toBe(202);
  await stack.client.workflow.getHandle(workflowIds.segmentation(sampleId, 1)).terminate('run by the test');
  const [run] = await stack.sql<{ id: string }[]>`
    SELECT id FROM segmentation_runs WHERE sample_id = ${sampleId}`;
  const segmentation = await failureOf(environment.run(activities.planSegmentationBands, { runId: run!.id }));
  expect(segmentation).toMatchObject({ ...CORRUPT, nonRetryable: true });
});

test('on the real server a corrupt store fails the prediction at the first attempt, with the reason recorded', async () => {
  const workers = await stack.startWorker();
  try {
    const jobId = await submitJob();
    const handle = stack.client.workflow.getHandle(workflowIds.prediction(jobId));
    expect(await handle.result()).toEqual({ status: 'failed' });
    const job = await call('GET', `/jobs/${jobId}`);
    expect(job.json).toMatchObject({ status: 'failed', errorMessage: CORRUPT.message });

    const { events } = await handle.fetchHistory();
    const scheduled = new Map<string, string>();
    const attempts: number[] = [];
    let failure: temporal.api.failure.v1.IFailure | null | undefined;
    for (const event of events ?? []) {
      const { activityTaskScheduledEventAttributes: s, activityTaskStartedEventAttributes: a } = event;
      if (s) scheduled.set(String(event.eventId), s.activityType?.name ?? '');
      if (a && scheduled.get(String(a.scheduledEventId)) === 'planJob') attempts.push(a.attempt ?? 0);
      failure ??= event.activityTaskFailedEventAttributes?.failure;
    }
    expect(attempts).toEqual([1]);
    expect(failure?.applicationFailureInfo).toMatchObject({ type: CORRUPT.type, nonRetryable: true });
  } finally {
    await workers.shutdown();
  }
});
