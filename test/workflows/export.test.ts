import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { exportWorkflow } from '../../workflows';
import {
  stallPastHeartbeatTimeout,
  startTimeSkipping,
  withOwnServer,
  withWorkers,
} from '../support/time-skipping';

/**
 * The export workflow's outcomes with stand-in activities on the time-skipping test server:
 * a conversion that fails or times out on every attempt ends `failed` with a reason, and
 * nothing is published.
 */
type FailInput = Parameters<Activities['failExport']>[0];
type PublishInput = Parameters<Activities['publishExport']>[0];

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

async function exportWith(steps: Partial<Activities>, server: TestWorkflowEnvironment = env) {
  const published: PublishInput[] = [];
  const failed: FailInput[] = [];
  const stand: Partial<Activities> = {
    beginExport: async () => ({ active: true }),
    buildExport: async () => ({ key: 'exports/1/slide.ome.tiff', sizeBytes: 42 }),
    publishExport: async (input) => {
      published.push(input);
    },
    failExport: async (input) => {
      failed.push(input);
    },
    ...steps,
  };
  const result = await withWorkers(server, stand, (taskQueue) =>
    server.client.workflow.execute<typeof exportWorkflow>('exportWorkflow', {
      workflowId: `export-test-${randomUUID()}`,
      taskQueue,
      args: [{ exportId: randomUUID(), attempt: 1 }],
    }),
  );
  return { result, published, failed };
}

test('a conversion that succeeds is published with its key and size', async () => {
  const { result, published, failed } = await exportWith({});
  expect(result).toEqual({ status: 'ready' });
  expect(published).toEqual([
    expect.objectContaining({ attempt: 1, key: 'exports/1/slide.ome.tiff', sizeBytes: 42 }),
  ]);
  expect(failed).toEqual([]);
});

test('a conversion that fails on every attempt: three attempts, then failed with a reason, nothing published', async () => {
  let attempts = 0;
  const { result, published, failed } = await exportWith({
    buildExport: async () => {
      attempts += 1;
      throw new Error('ENOSPC: no space left on device');
    },
  });
  expect({ result, attempts, published }).toEqual({
    result: { status: 'failed' },
    attempts: 3,
    published: [],
  });
  expect(failed).toEqual([expect.objectContaining({ attempt: 1, error: expect.stringMatching(/attempts/) })]);
  expect(failed[0]!.error).not.toContain('ENOSPC');
});

test('a last attempt that stops heartbeating times out: failed, nothing published', async () => {
  let attempts = 0;
  const { result, published, failed } = await withOwnServer((server) =>
    exportWith(
      {
        buildExport: async () => {
          attempts += 1;
          if (attempts < 3) throw new Error('ENOSPC: no space left on device');
          await stallPastHeartbeatTimeout(server);
          return { key: 'late', sizeBytes: 1 };
        },
      },
      server,
    ),
  );
  expect({ result, attempts, published }).toEqual({
    result: { status: 'failed' },
    attempts: 3,
    published: [],
  });
  expect(failed).toHaveLength(1);
});

test('an export that moved on to a later attempt is left alone: superseded, nothing built', async () => {
  let built = 0;
  const { result, published, failed } = await exportWith({
    beginExport: async () => ({ active: false }),
    buildExport: async () => {
      built += 1;
      return { key: 'k', sizeBytes: 1 };
    },
  });
  expect({ result, built, published, failed }).toEqual({
    result: { status: 'superseded' },
    built: 0,
    published: [],
    failed: [],
  });
});
