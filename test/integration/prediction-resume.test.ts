/** @jest-environment ./test/support/onnx-environment.js */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultPayloadConverter } from '@temporalio/common';
import type { RunningWorkers } from '../../cli/runtime';
import { creditSummary, grantCredits } from '../../db/credits';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let markers: string[];

beforeAll(async () => {
  stack = await startStack({ sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
  markers = ((await call('GET', '/markers')).json.markers as { name: string }[]).map((m) => m.name);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

async function submit(): Promise<string> {
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers });
  expect(submitted.status).toBe(202);
  return submitted.json.jobId as string;
}

/** Every object of a job's store, by its key relative to the store. */
async function storeObjects(jobId: string): Promise<Map<string, Buffer>> {
  const prefix = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/jobs/${jobId}/`;
  const objects = new Map<string, Buffer>();
  for await (const key of stack.store.list(prefix)) {
    objects.set(key.slice(prefix.length), Buffer.from((await stack.store.get(key))!));
  }
  return objects;
}

/**
 * Waits until the running predictJob attempt has heartbeated a token with a finished shard (true),
 * or the workflow has ended without one reaching the server (false).
 */
async function predictionCheckpoint(jobId: string): Promise<boolean> {
  const handle = stack.client.workflow.getHandle(workflowIds.prediction(jobId));
  for (let i = 0; i < 1200; i++) {
    const { raw, status } = await handle.describe();
    const run = raw.pendingActivities?.find((a) => a.activityType?.name === 'predictJob');
    const payload = run?.heartbeatDetails?.payloads?.[0];
    if (payload && defaultPayloadConverter.fromPayload<{ shardsDone: number }>(payload).shardsDone >= 1)
      return true;
    if (status.name !== 'RUNNING') return false;
    await sleep(25);
  }
  throw new Error('predictJob never heartbeated a finished shard');
}

/**
 * Whether predictJob is still to finish, as the stopped worker left it. The slide is predicted in
 * a second or two: on a loaded machine the stop can come after the activity's last shard.
 */
async function predictionPending(jobId: string): Promise<boolean> {
  const { raw } = await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).describe();
  return raw.pendingActivities?.some((a) => a.activityType?.name === 'predictJob') ?? false;
}

test('a worker stopped in the middle of inference: the next one resumes and writes the same store', async () => {
  const before = await creditSummary(stack.sql, stack.tenant.organizationId);
  const jobs: string[] = [];
  let interrupted: string | undefined;
  let stoppedAt = 0;
  let workers: RunningWorkers = await stack.startWorker();
  try {
    // A stop that comes after the activity's last shard tests nothing: a fresh job then.
    for (let attempt = 0; attempt < 3 && !interrupted; attempt++) {
      const jobId = await submit();
      jobs.push(jobId);
      if (!(await predictionCheckpoint(jobId))) continue;
      await workers.shutdown();
      stoppedAt = Date.now();
      if (await predictionPending(jobId)) interrupted = jobId;
      workers = await stack.startWorker();
    }
    expect(interrupted).toBeDefined();

    const handle = stack.client.workflow.getHandle(workflowIds.prediction(interrupted!));
    expect(await handle.result()).toEqual({ status: 'completed' });
    const history = await handle.fetchHistory();
    const attempts = history.events
      ?.filter((event) => event.activityTaskStartedEventAttributes)
      .map((event) => event.activityTaskStartedEventAttributes?.attempt ?? 0);
    expect(Math.max(...(attempts ?? []))).toBeGreaterThan(1);
    // The shard finished before the stop was not made again: the retry resumed, not restarted.
    const firstShard = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/jobs/${interrupted}/markers/DAPI/0/c/0/0/0`;
    expect((await stat(path.join(stack.fsRoot, firstShard))).mtimeMs).toBeLessThan(stoppedAt);

    const clean = await submit();
    jobs.push(clean);
    for (const jobId of jobs) {
      expect(await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result()).toEqual({
        status: 'completed',
      });
    }
    const resumed = await storeObjects(interrupted!);
    const reference = await storeObjects(clean);
    expect([...resumed.keys()].sort()).toEqual([...reference.keys()].sort());
    for (const [key, bytes] of reference) {
      expect({ key, same: resumed.get(key)!.equals(bytes) }).toEqual({ key, same: true });
    }
    // Charged once each, for exactly the reservation, and nothing left pending.
    const after = await creditSummary(stack.sql, stack.tenant.organizationId);
    const [reserved] = await stack.sql<{ total: number }[]>`
      SELECT sum(reserved_credits)::int AS total FROM jobs WHERE id IN ${stack.sql(jobs)}`;
    expect(after).toEqual({ balance: before.balance - reserved!.total, pending: before.pending });
  } finally {
    await workers.shutdown();
  }
}, 180_000);
