/** @jest-environment ./test/support/onnx-environment.js */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { creditSummary, grantCredits } from '../../db/credits';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;

beforeAll(async () => {
  stack = await startStack({ worker: true, sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

interface Frame {
  event: string;
  id?: string;
  data: string;
}

/** Reads SSE frames from a job stream until the server closes it. */
async function streamUntilEnd(jobId: string): Promise<Frame[]> {
  const response = await fetch(`${stack.api}/jobs/${jobId}/stream`, {
    headers: { authorization: `Bearer ${stack.tenant.apiKey}` },
  });
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const text = await response.text();
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const frame: Frame = { event: 'message', data: '' };
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(': ');
        const value = rest.join(': ');
        if (field === 'event') frame.event = value;
        if (field === 'id') frame.id = value;
        if (field === 'data') frame.data = value;
      }
      return frame;
    });
}

test('upload -> ready -> dry run -> submit -> stream to completed -> results read by zarr-python', async () => {
  const before = await creditSummary(stack.sql, stack.tenant.organizationId);
  const request = { uploadId: sampleId, markers: ['DAPI', 'CD3'] };
  const dryRun = await call('POST', '/predict', { ...request, dryRun: true });
  expect(dryRun.status).toBe(200);
  expect(dryRun.json.patchCount).toBeGreaterThan(0);
  expect(dryRun.json.estimatedCredits).toBe(dryRun.json.patchCount * 2);

  const submitted = await call('POST', '/predict', request);
  expect(submitted.status).toBe(202);
  expect(submitted.json).toMatchObject({ status: 'queued', reservedCredits: dryRun.json.estimatedCredits });
  const jobId = submitted.json.jobId as string;

  const frames = await streamUntilEnd(jobId);
  const statuses = frames.filter((f) => f.event === 'message').map((f) => JSON.parse(f.data).status);
  expect(statuses[0]).toBe('queued');
  const failure = (await call('GET', `/jobs/${jobId}`)).json.errorMessage;
  expect({ last: statuses.at(-1), failure }).toEqual({ last: 'completed', failure: null });
  for (const status of ['dispatching', 'preprocessing', 'running', 'postprocessing'])
    expect(statuses).toContain(status);
  const ids = frames.filter((f) => f.event === 'message').map((f) => Number(f.id));
  expect(ids).toEqual([...ids].sort((a, b) => a - b));
  expect(frames.at(-1)!.event).toBe('end');

  const job = await call('GET', `/jobs/${jobId}`);
  expect(job.json).toMatchObject({
    status: 'completed',
    progress: 1,
    resultsAvailable: true,
    markers: ['DAPI', 'CD3'],
  });

  // Spent exactly the reservation: balance down by the estimate, nothing pending.
  const after = await creditSummary(stack.sql, stack.tenant.organizationId);
  expect(after).toEqual({ balance: before.balance - dryRun.json.estimatedCredits, pending: before.pending });

  const results = await call('GET', `/jobs/${jobId}/results`);
  expect(results.status).toBe(200);
  const root = await fetch(results.json.resultUrl);
  expect(root.status).toBe(200);
  expect(((await root.json()) as { attributes: { ome: unknown } }).attributes.ome).toBeDefined();

  const store = path.join(stack.fsRoot, results.json.resultBasePath);
  const read = await runPythonJson<{
    markers: string[];
    shape: number[];
    max: number;
    nonzero: number;
    nan: number;
    omeSame: boolean;
    omeLevels: number;
  }>(
    `
import json, sys
import numpy as np
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
root = zarr.open_group(sys.argv[1], mode='r')
names = [m['name'] for m in root.attrs['ome']['multiscales']]
dapi = np.asarray(root['markers/DAPI/0'])
node = list(Reader(parse_url(sys.argv[1] + '/markers/DAPI'))())[0]
ome = np.asarray(node.data[0])
print(json.dumps({'markers': names, 'shape': list(dapi.shape), 'max': float(np.nanmax(dapi)), 'nonzero': int((dapi > 0).sum()), 'nan': int(np.isnan(dapi).sum()), 'omeSame': bool(np.array_equal(ome, dapi)), 'omeLevels': len(node.data)}))
`,
    [store],
  );
  expect(read.markers).toEqual(['DAPI', 'CD3']);
  expect(read.shape[0]).toBe(1);
  expect(read).toMatchObject({ nan: 0, omeSame: true });
  expect(read.omeLevels).toBeGreaterThan(1);
  expect(read.nonzero).toBeGreaterThan(0);
});

test('a job cancelled while running ends cancelled: reservation released, partial store removed', async () => {
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  const before = await creditSummary(stack.sql, stack.tenant.organizationId);
  const markers = ((await call('GET', '/markers')).json.markers as { name: string }[]).map((m) => m.name);
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;
  let status = 'queued';
  for (let i = 0; i < 400 && status !== 'running'; i++) {
    status = (await call('GET', `/jobs/${jobId}`)).json.status;
    expect(['queued', 'dispatching', 'preprocessing', 'running']).toContain(status);
    if (status !== 'running') await sleep(25);
  }
  const cancel = await call('POST', `/jobs/${jobId}/cancel`);
  expect(cancel.json).toEqual({ id: jobId, status: 'cancelled' });
  expect(await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result()).toEqual({
    status: 'cancelled',
  });
  expect((await call('GET', `/jobs/${jobId}`)).json).toMatchObject({
    status: 'cancelled',
    resultsAvailable: false,
  });
  expect(await creditSummary(stack.sql, stack.tenant.organizationId)).toEqual(before);
  expect((await call('GET', `/jobs/${jobId}/results`)).status).toBe(409);
  const cancelledAgain = await call('POST', `/jobs/${jobId}/cancel`);
  expect(cancelledAgain).toMatchObject({ status: 400, json: { error: 'job_already_terminal' } });
  // Let an activity still stopping finish its last write, then nothing of the store remains.
  await sleep(1500);
  const keys: string[] = [];
  for await (const key of stack.store.list(
    `orgs/${stack.tenant.organizationId}/samples/${sampleId}/jobs/${jobId}/`,
  ))
    keys.push(key);
  expect(keys).toEqual([]);
});
