import { stat } from 'node:fs/promises';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import { workflowIds } from '../../schemas/temporal';
import { segmentationLayerFiles } from '../../storage/locator';
import { apiClient } from '../support/http';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * Segmentation's tiles in bands (each its own activity, run here in any order, one of them
 * twice) and the merge after them store the same bytes as the single `segmentTiles` activity,
 * on the run's shared real slide (CMU-1-Small-Region), and leave none of the bands' objects.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;

beforeAll(async () => {
  stack = await startStack({ sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

/** The service's own activities, as the worker builds them, with bands of two tiles. */
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
    segmentationBandTiles: 2,
  });
}

/** Every object under `prefix`, by its key relative to it, removed from the store. */
async function takeObjects(prefix: string): Promise<Map<string, Buffer>> {
  const objects = new Map<string, Buffer>();
  for await (const key of stack.store.list(prefix)) {
    objects.set(key.slice(prefix.length), Buffer.from((await stack.store.get(key))!));
    await stack.store.delete(key);
  }
  return objects;
}

test('bands in any order, one retried, then the merge: the bytes of the single activity', async () => {
  const activities = serviceActivities();
  const run = (activity: (input: never) => Promise<unknown>, input: unknown) =>
    new MockActivityEnvironment().run(activity as (input: unknown) => Promise<unknown>, input);
  // No worker runs: the workflow the API starts is stopped, and the activities run here instead.
  const started = await call('POST', `/samples/${sampleId}/segmentation`);
  expect(started.status).toBe(202);
  await stack.client.workflow.getHandle(workflowIds.segmentation(sampleId, 1)).terminate('run by the test');
  const [queued] = await stack.sql<{ id: string }[]>`
    SELECT id FROM segmentation_runs WHERE sample_id = ${sampleId}`;
  const runId = queued!.id;
  await run(activities.beginSegmentation, { runId });
  const [running] = await stack.sql<{ prefix: string }[]>`
    SELECT layer_prefix AS prefix FROM segmentation_runs WHERE id = ${runId}`;
  const objectsPrefix = `${running!.prefix}${segmentationLayerFiles.objects}`;

  await run(activities.segmentTiles, { runId });
  const single = await takeObjects(objectsPrefix);

  const plan = (await run(activities.planSegmentationBands, { runId })) as { tiles: number; bands: number };
  expect(plan.bands).toBeGreaterThan(2);
  expect(plan.bands).toBe(Math.ceil(plan.tiles / 2));
  const order = Array.from({ length: plan.bands }, (_, band) => band).reverse();
  for (const band of order) await run(activities.segmentTileBand, { runId, band });
  // A retried band skips the tiles it stored.
  const lastTile = path.join(stack.fsRoot, `${objectsPrefix}segmented/${plan.tiles - 1}.bin`);
  const stored = (await stat(lastTile)).mtimeMs;
  await run(activities.segmentTileBand, { runId, band: order[0]! });
  expect((await stat(lastTile)).mtimeMs).toBe(stored);
  await run(activities.mergeSegmentedTiles, { runId });
  const banded = await takeObjects(objectsPrefix);

  expect([...banded.keys()].sort()).toEqual([...single.keys()].sort());
  expect(single.has('index.json')).toBe(true);
  for (const [key, bytes] of single)
    expect({ key, same: banded.get(key)!.equals(bytes) }).toEqual({ key, same: true });
}, 300_000);
