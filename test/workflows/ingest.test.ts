import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import type { ingestWorkflow } from '../../workflows';
import {
  stallPastHeartbeatTimeout,
  startTimeSkipping,
  withOwnServer,
  withWorkers,
} from '../support/time-skipping';

/**
 * The ingest workflow's retry and failure paths with stand-in activities on the time-skipping
 * test server: which status a failing step leaves, after how many attempts, and with which reason.
 */
type FailInput = Parameters<Activities['failIngest']>[0];

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startTimeSkipping();
});
afterAll(async () => {
  await env?.teardown();
});

interface Calls {
  deidentify: number;
  pyramid: number;
  finished: number;
  failed: FailInput[];
}

/** Runs ingest with each step succeeding unless `steps` replaces it; answers what was called. */
async function ingestWith(steps: Partial<Activities>, server: TestWorkflowEnvironment = env) {
  const calls: Calls = { deidentify: 0, pyramid: 0, finished: 0, failed: [] };
  const stand: Partial<Activities> = {
    assembleUpload: async () => ({ status: 'assembled', storageKey: 'k', sizeBytes: 1, contentSha256: 'x' }),
    readSlideHeader: async () => {},
    deidentifySlide: async () => ({ storageKey: 'k' }),
    probeSlide: async () => ({}) as Awaited<ReturnType<Activities['probeSlide']>>,
    // No regions: the pyramid is the one activity these tests count (ingest-regions.test.ts has them).
    planHePyramidRegions: async () => ({ widthPx: 0, heightPx: 0, stages: null, regionsInFlight: 1 }),
    buildHePyramid: async () => ({ levels: 1 }),
    detectTissue: async () => ({ patchCount: 10 }),
    finishIngest: async () => {
      calls.finished += 1;
    },
    failIngest: async (input) => {
      calls.failed.push(input);
    },
    queueAutoSegmentation: async () => ({ runId: null }),
    ...steps,
  };
  const counted: Partial<Activities> = {
    ...stand,
    deidentifySlide: (input) => {
      calls.deidentify += 1;
      return stand.deidentifySlide!(input);
    },
    buildHePyramid: (input) => {
      calls.pyramid += 1;
      return stand.buildHePyramid!(input);
    },
  };
  const result = await withWorkers(server, counted, (taskQueue) =>
    server.client.workflow.execute<typeof ingestWorkflow>('ingestWorkflow', {
      workflowId: `ingest-test-${randomUUID()}`,
      taskQueue,
      args: [{ sampleId: randomUUID() }],
    }),
  );
  return { result, calls };
}

test('de-identification fails on every attempt: five attempts, deid_failed with a reason that tells no internals', async () => {
  const { result, calls } = await ingestWith({
    deidentifySlide: async () => {
      throw new Error('EIO: i/o error, read /var/lib/objects');
    },
  });
  expect(result.status).toBe('deid_failed');
  expect(calls).toMatchObject({ deidentify: 5, pyramid: 0, finished: 0 });
  expect(calls.failed).toEqual([
    expect.objectContaining({ status: 'deid_failed', message: result.statusMessage }),
  ]);
  expect(result.statusMessage).toMatch(/attempts/);
  expect(result.statusMessage).not.toContain('EIO');
});

test('de-identification passes on its second attempt: the sample becomes ready', async () => {
  let attempts = 0;
  const { result, calls } = await ingestWith({
    deidentifySlide: async () => {
      attempts += 1;
      if (attempts === 1) throw new Error('socket hang up');
      return { storageKey: 'k' };
    },
  });
  expect(result).toEqual({ status: 'ready', statusMessage: null });
  expect(calls).toMatchObject({ deidentify: 2, pyramid: 1, finished: 1, failed: [] });
});

test("a file at fault fails at once with the reader's own message", async () => {
  const { result, calls } = await ingestWith({
    deidentifySlide: async () => {
      // What activities/failures.ts makes of a ComputeError: its code as the failure's type.
      throw ApplicationFailure.create({
        message: 'the file is not a TIFF or DICOM slide',
        type: 'NotTiff',
        nonRetryable: true,
      });
    },
  });
  expect(result).toEqual({ status: 'deid_failed', statusMessage: 'the file is not a TIFF or DICOM slide' });
  expect(calls.deidentify).toBe(1);
});

test('the last attempt at the pyramid stops heartbeating and times out: preprocess_failed', async () => {
  let attempts = 0;
  const { result, calls } = await withOwnServer((server) =>
    ingestWith(
      {
        buildHePyramid: async () => {
          attempts += 1;
          if (attempts < 5) throw new Error('socket hang up');
          await stallPastHeartbeatTimeout(server);
          return { levels: 1 };
        },
      },
      server,
    ),
  );
  expect(result.status).toBe('preprocess_failed');
  expect(calls).toMatchObject({ deidentify: 1, pyramid: 5, finished: 0 });
  expect(calls.failed).toEqual([
    expect.objectContaining({ status: 'preprocess_failed', message: result.statusMessage }),
  ]);
});

test('an automatic segmentation that cannot be queued after its retries leaves the sample ready', async () => {
  let attempts = 0;
  const { result } = await ingestWith({
    queueAutoSegmentation: async () => {
      attempts += 1;
      throw new Error('connection terminated unexpectedly');
    },
  });
  expect(result).toEqual({ status: 'ready', statusMessage: null });
  expect(attempts).toBe(5);
});
