/** @jest-environment ./test/support/onnx-environment.js */
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import { creditSummary } from '../../db/credits';
import { findJobById } from '../../db/jobs';
import { objectKeys } from '../../storage/locator';
import { stackActivities } from '../support/activities';
import { apiClient } from '../support/http';
import { recordingEngine } from '../support/predictions';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * The prediction activities one by one in a mock activity context, on the real database and
 * store and an ingested slide: a cancel that reaches `predictJob` mid-run stops it, and the
 * settlement that follows refunds the reservation and removes the partial store. No workflow
 * runs (the engine only records starts).
 */
let stack: TestStack;
let activities: Activities;
let call: ReturnType<typeof apiClient>;
let sampleId: string;

beforeAll(async () => {
  stack = await startStack({ sharedSlides: true, workflows: recordingEngine().wrap });
  call = apiClient(stack.api, stack.tenant.apiKey);
  sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
  activities = stackActivities(stack);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

async function storedKeys(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of stack.store.list(prefix)) keys.push(key);
  return keys;
}

test('a cancel mid-inference stops predictJob; the cancelled settlement refunds and removes the partial store', async () => {
  const before = await creditSummary(stack.sql, stack.tenant.organizationId);
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI', 'CD3'] });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;
  const reserved = await creditSummary(stack.sql, stack.tenant.organizationId);
  expect(reserved.pending).toBeGreaterThan(before.pending);

  expect(await new MockActivityEnvironment().run(activities.dispatchJob, { jobId })).toEqual({
    active: true,
  });
  expect(await new MockActivityEnvironment().run(activities.planJob, { jobId })).toMatchObject({
    active: true,
  });

  // Cancelled at its first heartbeat: a batch is written, the rest is not.
  const predicting = new MockActivityEnvironment();
  let heartbeats = 0;
  predicting.on('heartbeat', () => {
    heartbeats += 1;
    predicting.cancel();
  });
  await expect(predicting.run(activities.predictJob, { jobId })).rejects.toBeInstanceOf(CancelledFailure);
  expect(heartbeats).toBeGreaterThan(0);
  expect((await findJobById(stack.sql, jobId))?.status).toBe('running');
  const prefix = objectKeys.predictionStore(stack.tenant.organizationId, sampleId, jobId);
  expect((await storedKeys(prefix)).length).toBeGreaterThan(0);

  await new MockActivityEnvironment().run(activities.finishJob, { jobId, outcome: 'cancelled' as const });
  const job = await findJobById(stack.sql, jobId);
  expect({ status: job?.status, resultsAvailable: job?.resultsAvailable }).toEqual({
    status: 'cancelled',
    resultsAvailable: false,
  });
  expect(await creditSummary(stack.sql, stack.tenant.organizationId)).toEqual(before);
  expect(await storedKeys(prefix)).toEqual([]);

  // A retried settlement (the workflow's step retries until it succeeds) changes nothing.
  await new MockActivityEnvironment().run(activities.finishJob, { jobId, outcome: 'cancelled' as const });
  expect(await creditSummary(stack.sql, stack.tenant.organizationId)).toEqual(before);
});
