import { createSegmentationStartActivities } from '../../activities/segmentation-starts';
import { finishSegmentationRun } from '../../db/segmentation-runs';
import type { SampleStatus } from '../../schemas/enums';
import { JobStatusBody } from '../../schemas/jobs';
import { SampleDetail } from '../../schemas/samples';
import { SegmentationState } from '../../schemas/segmentation';
import { apiClient } from '../support/http';
import { recordingEngine } from '../support/predictions';
import { insertSample } from '../support/samples';
import { createTenant, startStack, type TestStack } from '../support/stack';

/**
 * The lifecycle rules of `POST/GET /samples/{id}/segmentation` and of segmentation runs seen
 * through `/jobs/{id}`, on a real database and HTTP, with workflow starts recorded instead of
 * run (the workflow itself runs end to end in segmentation-e2e.test.ts).
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
const engine = recordingEngine();
const COOLDOWN_SECONDS = 2;

beforeAll(async () => {
  stack = await startStack({
    workflows: engine.wrap,
    limits: { segmentationRetryCooldownSeconds: COOLDOWN_SECONDS },
  });
  call = apiClient(stack.api, stack.tenant.apiKey);
}, 60_000);
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  engine.behaviour.startFails = false;
});

const readySample = (extra: { status?: SampleStatus; mppCalibrated?: number | null } = {}) =>
  insertSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    mppCalibrated: 0.5,
    ...extra,
  });

/** Ends the sample's active run as a worker would. */
async function endRun(runId: string, status: 'completed' | 'failed' | 'cancelled') {
  if (status === 'completed') {
    await stack.sql`UPDATE segmentation_runs SET layer_prefix = 'orgs/x/', segmenter = 'classical-watershed@1'
      WHERE id = ${runId}`;
  }
  await finishSegmentationRun(stack.sql, {
    runId,
    status,
    instanceCount: status === 'completed' ? 7 : undefined,
    errorMessage: status === 'failed' ? 'tile 3 could not be read' : null,
  });
}

describe('segmentation state and start', () => {
  test('a new sample shows not_started, free of credits, in GET and in the sample detail', async () => {
    const id = await readySample();
    const state = await call('GET', `/samples/${id}/segmentation`);
    expect(state.status).toBe(200);
    expect(state.json).toEqual({
      status: 'not_started',
      retryable: false,
      creditCost: 0,
      job: null,
      layer: null,
    });
    const detail = await call('GET', `/samples/${id}`);
    expect(SampleDetail.parse(detail.json).segmentation.status).toBe('not_started');
  });

  test('POST queues run 1 and starts its workflow (202); a second POST reuses it', async () => {
    const id = await readySample();
    const first = await call('POST', `/samples/${id}/segmentation`);
    expect(first.status).toBe(202);
    const state = SegmentationState.parse(first.json);
    expect(state).toMatchObject({ status: 'queued', retryable: false, creditCost: 0, layer: null });
    expect(state.job).toMatchObject({ attempt: 1, status: 'queued' });
    expect(engine.calls.segmentations).toContain(state.job!.id);

    const again = await call('POST', `/samples/${id}/segmentation`);
    expect(again.status).toBe(202);
    expect(SegmentationState.parse(again.json).job!.id).toBe(state.job!.id);
    const [{ runs, started }] = (await stack.sql`
      SELECT count(*)::int AS runs, count(workflow_started_at)::int AS started
      FROM segmentation_runs WHERE sample_id = ${id}`) as [{ runs: number; started: number }];
    expect({ runs, started }).toEqual({ runs: 1, started: 1 });
    // Credit-free: nothing on the ledger.
    const [{ rows }] = (await stack.sql`
      SELECT count(*)::int AS rows FROM credit_ledger WHERE organization_id = ${stack.tenant.organizationId}
        AND kind <> 'grant'`) as [{ rows: number }];
    expect(rows).toBe(0);
  });

  test('50 racing POSTs make exactly one run', async () => {
    const id = await readySample();
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => call('POST', `/samples/${id}/segmentation`)),
    );
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([202]));
    const ids = new Set(answers.map((a) => SegmentationState.parse(a.json).job!.id));
    expect(ids.size).toBe(1);
  });

  test('completed work is reused with 200 and shows its layer', async () => {
    const id = await readySample();
    const run = SegmentationState.parse((await call('POST', `/samples/${id}/segmentation`)).json).job!;
    await endRun(run.id, 'completed');
    const reuse = await call('POST', `/samples/${id}/segmentation`);
    expect(reuse.status).toBe(200);
    const state = SegmentationState.parse(reuse.json);
    expect(state.status).toBe('completed');
    expect(state.job!.id).toBe(run.id);
    expect(state.layer).toMatchObject({ instanceCount: 7, modelVersion: 'classical-watershed@1' });
    expect(state.layer!.manifestUrl).toBe(
      `${stack.api}/samples/${id}/segmentation/${state.layer!.id}/manifest`,
    );
  });

  test('failed work: 429 retry_cooldown with retryAfterSeconds and Retry-After, then run 2 after the cooldown', async () => {
    const id = await readySample();
    const run = SegmentationState.parse((await call('POST', `/samples/${id}/segmentation`)).json).job!;
    await endRun(run.id, 'failed');
    const failed = SegmentationState.parse((await call('GET', `/samples/${id}/segmentation`)).json);
    expect(failed).toMatchObject({ status: 'failed', retryable: false });
    expect(failed.job!.errorMessage).toBe('tile 3 could not be read');

    const early = await call('POST', `/samples/${id}/segmentation`);
    expect(early.status).toBe(429);
    expect(early.json).toMatchObject({ error: 'retry_cooldown' });
    const wait = (early.json as { retryAfterSeconds: number }).retryAfterSeconds;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(COOLDOWN_SECONDS);
    expect(early.headers.get('retry-after')).toBe(String(wait));

    await new Promise((resolve) => setTimeout(resolve, COOLDOWN_SECONDS * 1000 + 100));
    expect(SegmentationState.parse((await call('GET', `/samples/${id}/segmentation`)).json).retryable).toBe(
      true,
    );
    const retry = await call('POST', `/samples/${id}/segmentation`);
    expect(retry.status).toBe(202);
    expect(SegmentationState.parse(retry.json).job).toMatchObject({ attempt: 2, status: 'queued' });
  });

  test('cancelled work may be retried at once', async () => {
    const id = await readySample();
    const run = SegmentationState.parse((await call('POST', `/samples/${id}/segmentation`)).json).job!;
    await endRun(run.id, 'cancelled');
    const state = SegmentationState.parse((await call('GET', `/samples/${id}/segmentation`)).json);
    expect(state).toMatchObject({ status: 'cancelled', retryable: true });
    const retry = await call('POST', `/samples/${id}/segmentation`);
    expect(retry.status).toBe(202);
    expect(SegmentationState.parse(retry.json).job!.attempt).toBe(2);
  });

  test('non-ready, trashed, unscaled, and other organizations’ samples cannot be mutated', async () => {
    const uploading = await readySample({ status: 'preprocessing' });
    expect(await call('POST', `/samples/${uploading}/segmentation`)).toMatchObject({
      status: 409,
      json: { error: 'sample_not_ready' },
    });
    const trashed = await readySample();
    await stack.sql`UPDATE samples SET trashed_at = now() WHERE id = ${trashed}`;
    expect(await call('POST', `/samples/${trashed}/segmentation`)).toMatchObject({
      status: 409,
      json: { error: 'sample_not_ready' },
    });
    const unscaled = await readySample({ mppCalibrated: null });
    expect(await call('POST', `/samples/${unscaled}/segmentation`)).toMatchObject({
      status: 409,
      json: { error: 'mpp_required' },
    });
    const other = await createTenant(stack.sql);
    const foreign = await insertSample(stack.sql, {
      organizationId: other.organizationId,
      mppCalibrated: 0.5,
    });
    expect((await call('POST', `/samples/${foreign}/segmentation`)).status).toBe(404);
    expect((await call('GET', `/samples/${foreign}/segmentation`)).status).toBe(404);
    const [{ runs }] = (await stack.sql`
      SELECT count(*)::int AS runs FROM segmentation_runs
      WHERE sample_id IN ${stack.sql([uploading, trashed, unscaled, foreign])}`) as [{ runs: number }];
    expect(runs).toBe(0);
  });

  test('a start that fails after the commit is left queued, and the reconciler starts it', async () => {
    const id = await readySample();
    engine.behaviour.startFails = true;
    const answer = await call('POST', `/samples/${id}/segmentation`);
    expect(answer.status).toBe(202);
    const runId = SegmentationState.parse(answer.json).job!.id;
    const started: string[] = [];
    const reconciler = createSegmentationStartActivities({
      sql: stack.sql,
      startSegmentation: async (run) => void started.push(run.id),
      startSegmentationMarkers: async () => {},
    });
    await reconciler.reconcileSegmentationRuns({ olderThanSeconds: 0 });
    expect(started).toContain(runId);
    const [row] = await stack.sql<{ startedAt: Date | null }[]>`
      SELECT workflow_started_at AS "startedAt" FROM segmentation_runs WHERE id = ${runId}`;
    expect(row!.startedAt).not.toBeNull();
  });
});

describe('segmentation runs through /jobs/{id}', () => {
  test('GET reads a run as a credit-free job; cancel is 409 while active, 400 once terminal', async () => {
    const id = await readySample();
    const run = SegmentationState.parse((await call('POST', `/samples/${id}/segmentation`)).json).job!;
    const job = await call('GET', `/jobs/${run.id}`);
    expect(job.status).toBe(200);
    expect(JobStatusBody.parse(job.json)).toMatchObject({
      id: run.id,
      status: 'queued',
      reservedCredits: 0,
      resultsAvailable: false,
    });
    expect(await call('POST', `/jobs/${run.id}/cancel`)).toMatchObject({
      status: 409,
      json: { error: 'segmentation_active' },
    });
    expect(await call('GET', `/jobs/${run.id}/results`)).toMatchObject({
      status: 409,
      json: { error: 'results_not_ready' },
    });
    await endRun(run.id, 'failed');
    expect(await call('POST', `/jobs/${run.id}/cancel`)).toMatchObject({
      status: 400,
      json: { error: 'job_already_terminal', status: 'failed' },
    });
    const other = apiClient(stack.api, (await createTenant(stack.sql)).apiKey);
    expect((await other('GET', `/jobs/${run.id}`)).status).toBe(404);
  });
});

describe('automatic segmentation', () => {
  /** The starts a worker makes, without the workflows they would start. */
  const starts = () =>
    createSegmentationStartActivities({
      sql: stack.sql,
      startSegmentation: async () => {},
      startSegmentationMarkers: async () => {},
    });

  test('queues run 1 only for a ready sample that asked for it, once', async () => {
    const wanted = await readySample();
    await stack.sql`UPDATE samples SET auto_segment = true WHERE id = ${wanted}`;
    const declined = await readySample();
    await stack.sql`UPDATE samples SET auto_segment = false WHERE id = ${declined}`;

    const first = await starts().queueAutoSegmentation({ sampleId: wanted });
    expect(first.runId).not.toBeNull();
    expect((await starts().queueAutoSegmentation({ sampleId: wanted })).runId).toBeNull();
    expect((await starts().queueAutoSegmentation({ sampleId: declined })).runId).toBeNull();
    const state = SegmentationState.parse((await call('GET', `/samples/${wanted}/segmentation`)).json);
    expect(state.job).toMatchObject({ id: first.runId, attempt: 1 });
  });

  test('a layer made at another scale than the sample now has is made again; an active run is not', async () => {
    const id = await readySample();
    const first = SegmentationState.parse((await call('POST', `/samples/${id}/segmentation`)).json);
    await stack.sql`UPDATE samples SET mpp_override = 0.25 WHERE id = ${id}`;
    // Run 1 was queued at 0.5: still running, it is the sample's one active run.
    expect((await starts().queueAutoSegmentation({ sampleId: id })).runId).toBeNull();
    await endRun(first.job!.id, 'completed');
    const second = await starts().queueAutoSegmentation({ sampleId: id });
    const [run] = await stack.sql<{ attempt: number; mpp: number }[]>`
      SELECT attempt, mpp FROM segmentation_runs WHERE id = ${second.runId}`;
    expect(run).toEqual({ attempt: 2, mpp: 0.25 });
    await endRun(second.runId!, 'completed');
    expect((await starts().queueAutoSegmentation({ sampleId: id })).runId).toBeNull();

    // A client's POST likewise: reused at the sample's scale, made again at another.
    const reused = await call('POST', `/samples/${id}/segmentation`);
    expect({ status: reused.status, attempt: reused.json.job.attempt }).toEqual({ status: 200, attempt: 2 });
    await stack.sql`UPDATE samples SET mpp_override = 0.3 WHERE id = ${id}`;
    const again = await call('POST', `/samples/${id}/segmentation`);
    expect({ status: again.status, attempt: again.json.job.attempt, layer: again.json.layer }).toEqual({
      status: 202,
      attempt: 3,
      layer: null,
    });
  });

  test('waits for a scale: a slide whose file gave none gets its run once mpp is set', async () => {
    const unscaled = await readySample({ mppCalibrated: null });
    await stack.sql`UPDATE samples SET auto_segment = true WHERE id = ${unscaled}`;
    expect((await starts().queueAutoSegmentation({ sampleId: unscaled })).runId).toBeNull();
    const before = SegmentationState.parse((await call('GET', `/samples/${unscaled}/segmentation`)).json);
    expect(before).toMatchObject({ status: 'not_started', job: null });
    await stack.sql`UPDATE samples SET mpp_override = 0.5 WHERE id = ${unscaled}`;
    expect((await starts().queueAutoSegmentation({ sampleId: unscaled })).runId).not.toBeNull();
  });
});
