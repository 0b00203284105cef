import path from 'node:path';
import { buildHePyramid } from '../../compute/pyramid';
import { openTiffSlide } from '../../compute/slide';
import { storeSource } from '../../compute/source';
import { memoryStore } from '../../compute/zarr';
import { findIngestSample } from '../../db/sample-slides';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

/**
 * Ingest builds the H&E pyramid in regions, each its own activity (the upper levels from the
 * rows below them read back from the store): the stored bytes are those of the one-call build
 * of the same de-identified slide, for real slides from ../shared/data/wsi.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
});
afterAll(async () => {
  await stack?.close();
});

/** Every object under `prefix`, by its key relative to it. */
async function objectsUnder(prefix: string): Promise<Map<string, Buffer>> {
  const objects = new Map<string, Buffer>();
  for await (const key of stack.store.list(prefix)) {
    objects.set(key.slice(prefix.length), Buffer.from((await stack.store.get(key))!));
  }
  return objects;
}

test.each(['OS-1-detail.ome.tif', 'CMU-1-Small-Region.svs'])(
  '%s: the pyramid built by regions has the bytes of the single build',
  async (file) => {
    const sample = await uploadFile(call, path.join(SHARED_WSI, file));
    const handle = stack.client.workflow.getHandle(workflowIds.ingest(sample.id));
    expect(await handle.result()).toEqual({ status: 'ready', statusMessage: null });
    const history = await handle.fetchHistory();
    const regions = history.events?.filter(
      (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'buildHePyramidRegion',
    );
    // One band of level-0 rows, then a region per level pair above it, each read back.
    expect(regions?.length).toBeGreaterThan(1);

    const stored = (await findIngestSample(stack.sql, sample.id))!;
    const info = await stack.store.stat(stored.storageKey);
    const slide = await openTiffSlide(storeSource(stack.store, stored.storageKey, info!.sizeBytes));
    const reference = memoryStore();
    const mpp = stored.mppOverride ?? stored.mppCalibrated;
    await buildHePyramid({ image: slide, sink: reference, mpp, name: 'H&E' });

    const built = await objectsUnder(`orgs/${stack.tenant.organizationId}/samples/${sample.id}/he/`);
    expect([...built.keys()].sort()).toEqual([...reference.map.keys()].sort());
    for (const [key, bytes] of reference.map)
      expect({ key, same: built.get(key)!.equals(bytes) }).toEqual({ key, same: true });
  },
  120_000,
);
