/** @jest-environment ./test/support/onnx-environment.js */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { runAdminCommand, UsageError } from '../../cli/admin-commands';
import { RerunError } from '../../cli/rerun';
import { findJobById } from '../../db/jobs';
import { workflowIds } from '../../schemas/temporal';
import { objectKeys } from '../../storage/locator';
import { apiClient } from '../support/http';
import { insertJob, insertSample } from '../support/samples';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;

const admin = (argv: string[]) =>
  runAdminCommand(stack.sql, argv, async () => ({
    client: stack.client,
    taskQueuePrefix: stack.taskQueuePrefix,
  }));

/** Workflow ids listed by a visibility query; visibility lags a moment behind a start. */
async function listed(client: Client, query: string, expected: number): Promise<string[]> {
  let ids: string[] = [];
  for (let attempt = 0; attempt < 50; attempt++) {
    ids = [];
    for await (const execution of client.workflow.list({ query })) ids.push(execution.workflowId);
    if (ids.length >= expected) break;
    await sleep(200);
  }
  return ids.sort();
}

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  // OS-1's detail (1101 px a side): the re-runs hold for any slide, and a small one is quick.
  sampleId = (await uploadFile(call, path.join(SHARED_WSI, 'OS-1-detail.ome.tif'))).id;
  await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI', 'CD3'] });
  expect(submitted.status).toBe(202);
  jobId = submitted.json.jobId as string;
  expect(await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result()).toEqual({
    status: 'completed',
  });
});
afterAll(async () => {
  await stack?.close();
});

test('ingest and prediction workflows are found by their organization, sample and job', async () => {
  expect(await listed(stack.client, `JobId = "${jobId}"`, 1)).toEqual([workflowIds.prediction(jobId)]);
  expect(await listed(stack.client, `SampleId = "${sampleId}"`, 2)).toEqual(
    [workflowIds.ingest(sampleId), workflowIds.prediction(jobId)].sort(),
  );
  const org = await listed(stack.client, `OrganizationId = "${stack.tenant.organizationId}"`, 2);
  expect(org).toEqual(expect.arrayContaining([workflowIds.ingest(sampleId), workflowIds.prediction(jobId)]));
});

test('job rerun --step postprocess rebuilds a deleted level-1 object byte for byte, job untouched', async () => {
  const prefix = objectKeys.predictionStore(stack.tenant.organizationId, sampleId, jobId);
  const levelOne: string[] = [];
  for await (const key of stack.store.list(`${prefix}markers/DAPI/1/`))
    if (!key.endsWith('zarr.json')) levelOne.push(key);
  expect(levelOne.length).toBeGreaterThan(0);
  const key = levelOne[0]!;
  const before = await stack.store.get(key);
  expect(before?.byteLength).toBeGreaterThan(0);
  await stack.store.delete(key);
  expect(await stack.store.get(key)).toBeUndefined();
  const jobBefore = await findJobById(stack.sql, jobId);

  const printed = await admin(['job', 'rerun', '--job', jobId, '--step', 'postprocess']);
  expect(printed).toMatchObject({ step: 'postprocess', result: { active: true } });
  expect(String(printed.workflowId)).toMatch(new RegExp(`^rerun-job-${jobId}-postprocess-\\d+$`));

  const after = await stack.store.get(key);
  expect(after && Buffer.from(after).equals(Buffer.from(before!))).toBe(true);
  expect(await findJobById(stack.sql, jobId)).toEqual(jobBefore);
  // The re-run belongs to the job's story in the web UI.
  expect(await listed(stack.client, `JobId = "${jobId}"`, 2)).toEqual(
    [workflowIds.prediction(jobId), String(printed.workflowId)].sort(),
  );
});

test('sample rerun --step tissue recounts the same patches', async () => {
  const [slide] = await stack.sql`SELECT patch_count FROM sample_slides WHERE sample_id = ${sampleId}`;
  const printed = await admin(['sample', 'rerun', '--sample', sampleId, '--step', 'tissue']);
  expect(printed).toMatchObject({ step: 'tissue', result: { patchCount: slide!.patch_count } });
});

test('a step that makes no sense in the current state is refused, and nothing starts', async () => {
  const failed = await insertJob(stack.sql, {
    organizationId: stack.tenant.organizationId,
    sampleId,
    status: 'failed',
  });
  await expect(admin(['job', 'rerun', '--job', failed, '--step', 'postprocess'])).rejects.toThrow(
    new RerunError(
      `job ${failed} is failed and has no results: only the steps of a completed or partially failed job can be re-run`,
    ),
  );
  const preprocessing = await insertSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    status: 'preprocessing',
  });
  await expect(admin(['sample', 'rerun', '--sample', preprocessing, '--step', 'pyramid'])).rejects.toThrow(
    /is preprocessing: only a ready sample's pyramid step can be re-run/,
  );
  await expect(admin(['job', 'rerun', '--job', jobId, '--step', 'tissue'])).rejects.toThrow(UsageError);
  await expect(
    runAdminCommand(stack.sql, ['job', 'rerun', '--job', jobId, '--step', 'predict']),
  ).rejects.toThrow(/needs the workflow engine/);
  expect(await listed(stack.client, `JobId = "${failed}"`, 0)).toEqual([]);
});
