import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultPayloadConverter } from '@temporalio/common';
import type { RunningWorkers } from '../../cli/runtime';
import { SegmentationState } from '../../schemas/segmentation';
import { workflowIds } from '../../schemas/temporal';
import { segmentationLayerFiles } from '../../storage/locator';
import { apiClient } from '../support/http';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
/**
 * The same slide twice: this file's upload is interrupted while segmenting; the reference is the
 * processed shared sample, segmented without interruption once per run (test/support/shared-slides.ts).
 */
let interrupted: string;
let reference: string;

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  reference = stack.processedSample().sampleId;
  const workers = await stack.startWorker();
  try {
    interrupted = (await uploadFile(call, path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'))).id;
    await stack.client.workflow.getHandle(workflowIds.ingest(interrupted)).result();
  } finally {
    await workers.shutdown();
  }
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

async function start(sampleId: string): Promise<SegmentationState> {
  const answer = await call('POST', `/samples/${sampleId}/segmentation`);
  expect(answer.status).toBe(202);
  return SegmentationState.parse(answer.json);
}

/** Waits until a running band of tiles has heartbeated a stored tile. */
async function tilesCheckpoint(sampleId: string): Promise<void> {
  const handle = stack.client.workflow.getHandle(workflowIds.segmentation(sampleId, 1));
  for (let i = 0; i < 2400; i++) {
    const { raw } = await handle.describe();
    const band = raw.pendingActivities?.find((a) => a.activityType?.name === 'segmentTileBand');
    const payload = band?.heartbeatDetails?.payloads?.[0];
    if (payload && defaultPayloadConverter.fromPayload<{ tile: number }>(payload).tile >= 0) return;
    await sleep(25);
  }
  throw new Error('segmentTileBand never heartbeated a finished tile');
}

/** The mask store's objects (keys relative to it), for a byte-for-byte comparison. */
async function maskObjects(sampleId: string): Promise<Map<string, Buffer>> {
  const [row] = await stack.sql<{ prefix: string }[]>`
    SELECT layer_prefix AS prefix FROM segmentation_runs WHERE sample_id = ${sampleId} AND status = 'completed'`;
  const prefix = `${row!.prefix}${segmentationLayerFiles.mask}`;
  const objects = new Map<string, Buffer>();
  for await (const key of stack.store.list(prefix)) {
    objects.set(key.slice(prefix.length), Buffer.from((await stack.store.get(key))!));
  }
  return objects;
}

test('a worker stopped while segmenting tiles: the next one resumes, and the mask equals an uninterrupted run', async () => {
  let workers: RunningWorkers = await stack.startWorker();
  await start(interrupted);
  await tilesCheckpoint(interrupted);
  await workers.shutdown();

  workers = await stack.startWorker();
  try {
    const handle = stack.client.workflow.getHandle(workflowIds.segmentation(interrupted, 1));
    expect(await handle.result()).toEqual({ status: 'completed' });
    const history = await handle.fetchHistory();
    const attempts = history.events
      ?.filter((event) => event.activityTaskStartedEventAttributes)
      .map((event) => event.activityTaskStartedEventAttributes?.attempt ?? 0);
    expect(Math.max(...(attempts ?? []))).toBeGreaterThan(1);
    // A band's retry skips the tiles it stored: segmentation-bands.test.ts checks that.

    const referenceState = SegmentationState.parse(
      (await call('GET', `/samples/${reference}/segmentation`)).json,
    );
    expect(referenceState.status).toBe('completed');
    const resumed = await maskObjects(interrupted);
    const clean = await maskObjects(reference);
    expect([...resumed.keys()].sort()).toEqual([...clean.keys()].sort());
    for (const [key, bytes] of clean) {
      if (key === 'zarr.json') continue;
      expect({ key, same: resumed.get(key)!.equals(bytes) }).toEqual({ key, same: true });
    }
    const states = await Promise.all(
      [interrupted, reference].map(async (id) =>
        SegmentationState.parse((await call('GET', `/samples/${id}/segmentation`)).json),
      ),
    );
    expect(states[0]!.layer!.instanceCount).toBe(states[1]!.layer!.instanceCount);
  } finally {
    await workers.shutdown();
  }
}, 300_000);
