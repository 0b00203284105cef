import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeSyntheticSvs } from '../../bench/synthetic-svs';
import type { RunningWorkers } from '../../cli/runtime';
import type { PyramidProgress } from '../../compute/pyramid';
import { workflowIds } from '../../schemas/temporal';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let slide: string;

beforeAll(async () => {
  stack = await startStack();
  call = apiClient(stack.api, stack.tenant.apiKey);
  // 8,500 x 8,500 px: 3 x 3 level-0 shards of 4096 px, four of them whole, so a build has a
  // middle to be stopped in (three whole shards are left after the first heartbeat).
  slide = path.join(testEnv().scratch, `resume-${randomBytes(4).toString('hex')}.svs`);
  await writeSyntheticSvs({
    source: path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'),
    out: slide,
    width: 8_500,
    height: 8_500,
    lowerLevels: [],
  });
});
afterAll(async () => {
  await stack?.close();
});

/** Every object under a sample's `he/`, by its key relative to `he/`. */
async function heObjects(sampleId: string): Promise<Map<string, Buffer>> {
  const prefix = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/he/`;
  const objects = new Map<string, Buffer>();
  for await (const key of stack.store.list(prefix)) {
    objects.set(key.slice(prefix.length), Buffer.from((await stack.store.get(key))!));
  }
  return objects;
}

/**
 * Waits until the pyramid's first region (the one that writes level-0 shard 0,0; at the
 * default limit the 2 x 2 whole shards of its column range) has heartbeated a token in its
 * middle: a shard stored, more to come. Other regions may be done, running or waiting.
 */
async function firstRegionHalfway(sampleId: string): Promise<void> {
  const handle = stack.client.workflow.getHandle(workflowIds.ingest(sampleId));
  for (let i = 0; i < 600; i++) {
    const { raw } = await handle.describe();
    for (const activity of raw.pendingActivities ?? []) {
      const data = activity.heartbeatDetails?.payloads?.[0]?.data;
      if (activity.activityType?.name !== 'buildHePyramidRegion' || !data) continue;
      const token = JSON.parse(Buffer.from(data).toString()) as PyramidProgress;
      // The region's name ends its token's layout: leaf 0, top 1, row 0, from column 0.
      const first = /\/0-1-0(-0-\d+)?$/.test(token.layout);
      if (first && token.done >= 1 && token.done < token.total) return;
    }
    await sleep(50);
  }
  throw new Error("the pyramid's first region never heartbeated halfway");
}

test('a worker stopped in the middle of the pyramid: the next one resumes from the heartbeat, same bytes', async () => {
  let workers: RunningWorkers = await stack.startWorker();
  const interrupted = await uploadFile(call, slide);
  await firstRegionHalfway(interrupted.id);
  await workers.shutdown();
  const stoppedAt = Date.now();

  workers = await stack.startWorker();
  try {
    const handle = stack.client.workflow.getHandle(workflowIds.ingest(interrupted.id));
    expect(await handle.result()).toEqual({ status: 'ready', statusMessage: null });
    const history = await handle.fetchHistory();
    const attempts = history.events
      ?.filter((event) => event.activityTaskStartedEventAttributes)
      .map((event) => event.activityTaskStartedEventAttributes?.attempt ?? 0);
    expect(Math.max(...(attempts ?? []))).toBeGreaterThan(1);

    // The first level-0 shard was finished before the stop and not written again.
    const firstShard = `orgs/${stack.tenant.organizationId}/samples/${interrupted.id}/he/0/c/0/0/0`;
    expect((await stat(path.join(stack.fsRoot, firstShard))).mtimeMs).toBeLessThan(stoppedAt);

    const clean = await uploadFile(call, slide);
    expect(await stack.client.workflow.getHandle(workflowIds.ingest(clean.id)).result()).toMatchObject({
      status: 'ready',
    });
    const resumed = await heObjects(interrupted.id);
    const reference = await heObjects(clean.id);
    expect([...resumed.keys()].sort()).toEqual([...reference.keys()].sort());
    for (const [key, bytes] of reference)
      expect({ key, same: resumed.get(key)!.equals(bytes) }).toEqual({ key, same: true });
  } finally {
    await workers.shutdown();
  }
}, 180_000);
