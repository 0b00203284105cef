import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { writeSyntheticSvs } from '../../bench/synthetic-svs';
import { buildHePyramid, planHePyramid } from '../../compute/pyramid';
import { openTiffSlide } from '../../compute/slide';
import { storeSource } from '../../compute/source';
import { memoryStore } from '../../compute/zarr';
import { findIngestSample } from '../../db/sample-slides';
import { workflowIds } from '../../schemas/temporal';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

/**
 * Ingest builds the H&E pyramid in regions, each its own activity (the upper levels from the
 * rows below them read back from the store): the stored bytes are those of the one-call build
 * of the same de-identified slide, for real slides from ../shared/data/wsi (one shard row each:
 * one region) and for a synthetic one of three shard rows and columns (two bands, each cut into
 * two column ranges, then a region reading their level-1 shards back for every level above).
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let synthetic: string;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  synthetic = path.join(testEnv().scratch, `regions-${randomBytes(4).toString('hex')}.svs`);
  await writeSyntheticSvs({
    source: path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'),
    out: synthetic,
    width: 9_000,
    height: 8_500,
    lowerLevels: [],
  });
});
afterAll(async () => {
  await stack?.close();
  if (synthetic) await rm(synthetic, { force: true });
});

/** Every object under `prefix`, by its key relative to it. */
async function objectsUnder(prefix: string): Promise<Map<string, Buffer>> {
  const objects = new Map<string, Buffer>();
  for await (const key of stack.store.list(prefix)) {
    objects.set(key.slice(prefix.length), Buffer.from((await stack.store.get(key))!));
  }
  return objects;
}

test.each([
  ['OS-1-detail.ome.tif', () => path.join(SHARED_WSI, 'OS-1-detail.ome.tif'), 1],
  ['CMU-1-Small-Region.svs', () => path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'), 1],
  ['a synthetic 9,000 x 8,500 px SVS', () => synthetic, 5],
])(
  '%s: the pyramid built by regions has the bytes of the single build',
  async (_name, file, regionCount) => {
    const sample = await uploadFile(call, file());
    const handle = stack.client.workflow.getHandle(workflowIds.ingest(sample.id));
    expect(await handle.result()).toEqual({ status: 'ready', statusMessage: null });
    const history = await handle.fetchHistory();
    const regions = history.events?.filter(
      (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'buildHePyramidRegion',
    );
    expect(regions?.length).toBe(regionCount);

    const stored = (await findIngestSample(stack.sql, sample.id))!;
    const info = await stack.store.stat(stored.storageKey);
    const slide = await openTiffSlide(storeSource(stack.store, stored.storageKey, info!.sizeBytes));
    // As the worker plans it: at least as many regions a stage as its 4 run at once.
    const stages = planHePyramid(slide.widthPx, slide.heightPx, { bandLevels: 1, regionsPerStage: 4 });
    expect(stages.reduce((n, stage) => n + stage.rows * (stage.columns?.length ?? 1), 0)).toBe(regionCount);
    const reference = memoryStore();
    const mpp = stored.mppOverride ?? stored.mppCalibrated;
    await buildHePyramid({ image: slide, sink: reference, mpp, name: 'H&E' });

    const built = await objectsUnder(`orgs/${stack.tenant.organizationId}/samples/${sample.id}/he/`);
    expect([...built.keys()].sort()).toEqual([...reference.map.keys()].sort());
    for (const [key, bytes] of reference.map)
      expect({ key, same: built.get(key)!.equals(bytes) }).toEqual({ key, same: true });
  },
  240_000,
);
