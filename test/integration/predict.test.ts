import { startQueuedJobs } from '../../activities/prediction-reconciler';
import { creditSummary } from '../../db/credits';
import { markerCatalog } from '../../models/registry';
import { PredictionDryRun, PredictionSubmitted } from '../../schemas/jobs';
import { SampleJob } from '../../schemas/samples';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { insertPricedSample, recordingEngine } from '../support/predictions';
import { insertSample } from '../support/samples';
import {
  createTenant,
  SHARED_SLIDES_SETUP_MS,
  startStack,
  type Tenant,
  type TestStack,
} from '../support/stack';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
const engine = recordingEngine();
/** CMU-1-Small-Region.svs, ingested to `ready` by the real worker (shared slides). */
let slideId: string;
let slidePatches: number;

beforeAll(async () => {
  stack = await startStack({ worker: true, workflows: engine.wrap, sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  slideId = stack.sharedSample('CMU-1-Small-Region.svs');
  expect((await call('GET', `/samples/${slideId}`)).json.status).toBe('ready');
  const [slide] = await stack.sql<{ patchCount: number }[]>`
    SELECT patch_count AS "patchCount" FROM sample_slides WHERE sample_id = ${slideId}`;
  slidePatches = slide!.patchCount;
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

beforeEach(() => {
  engine.behaviour.startFails = false;
});

const ledgerOf = (organizationId: string) =>
  stack.sql<{ kind: string; jobId: string | null; balanceDelta: string; pendingDelta: string }[]>`
    SELECT kind, job_id AS "jobId", balance_delta AS "balanceDelta", pending_delta AS "pendingDelta"
    FROM credit_ledger WHERE organization_id = ${organizationId} ORDER BY id`;

async function tenantWith(credits: number, options: { cap?: number } = {}) {
  const tenant = await createTenant(stack.sql, { credits });
  if (options.cap !== undefined)
    await stack.sql`UPDATE organizations SET active_job_cap = ${options.cap} WHERE id = ${tenant.organizationId}`;
  return { tenant, call: apiClient(stack.api, tenant.apiKey) };
}

const pricedSample = (tenant: Tenant, patchCount: number | null, mpp: number | null = 0.5, extra = {}) =>
  insertPricedSample(stack.sql, {
    organizationId: tenant.organizationId,
    createdBy: tenant.userId,
    patchCount,
    mpp,
    ...extra,
  });

describe('POST /predict on a real ingested slide', () => {
  test('the dry run prices patches x markers, writes nothing, and equals the reservation', async () => {
    expect(slidePatches).toBeGreaterThan(0);
    const markers = ['CD3', 'CD8', 'PanCK'];
    const before = await creditSummary(stack.sql, stack.tenant.organizationId);
    const ledgerBefore = (await ledgerOf(stack.tenant.organizationId)).length;

    const dry = await call('POST', '/predict', { uploadId: slideId, markers, dryRun: true });
    expect(dry.status).toBe(200);
    expect(PredictionDryRun.safeParse(dry.json).success).toBe(true);
    expect(dry.json).toEqual({
      dryRun: true,
      patchCount: slidePatches,
      markerCount: 3,
      estimatedCredits: slidePatches * 3,
      orgBalance: before.balance,
      orgPending: before.pending,
    });
    expect((await ledgerOf(stack.tenant.organizationId)).length).toBe(ledgerBefore);
    const [{ count }] =
      (await stack.sql`SELECT count(*)::int AS count FROM jobs WHERE sample_id = ${slideId}`) as [
        { count: number },
      ];
    expect(count).toBe(0);
    expect(engine.calls.started).toEqual([]);

    const submitted = await call('POST', '/predict', { uploadId: slideId, markers });
    expect(submitted.status).toBe(202);
    expect(PredictionSubmitted.safeParse(submitted.json).success).toBe(true);
    expect(submitted.json).toEqual({
      jobId: expect.any(String),
      reservedCredits: dry.json.estimatedCredits,
      status: 'queued',
    });
    const jobId = submitted.json.jobId as string;
    expect(engine.calls.started).toEqual([jobId]);

    const after = await creditSummary(stack.sql, stack.tenant.organizationId);
    expect(after).toEqual({ balance: before.balance, pending: before.pending + dry.json.estimatedCredits });
    const ledger = await ledgerOf(stack.tenant.organizationId);
    expect(ledger.slice(ledgerBefore)).toEqual([
      { kind: 'reserve', jobId, balanceDelta: '0', pendingDelta: String(dry.json.estimatedCredits) },
    ]);

    const [job] = await stack.sql`SELECT * FROM jobs WHERE id = ${jobId}`;
    expect(job).toMatchObject({
      organization_id: stack.tenant.organizationId,
      sample_id: slideId,
      created_by: stack.tenant.userId,
      status: 'queued',
      progress: null,
      model: 'v0.7',
      markers,
      marker_count: 3,
      patch_count: slidePatches,
      reserved_credits: String(dry.json.estimatedCredits),
      cancel_requested_at: null,
      settled_at: null,
      results_available: false,
    });
    expect(job!.mpp).toBeCloseTo(0.499, 3);
    expect(job!.workflow_started_at).toBeInstanceOf(Date);
    const events = await stack.sql`SELECT seq, status, progress FROM job_events WHERE job_id = ${jobId}`;
    expect(events).toEqual([{ seq: 1, status: 'queued', progress: null }]);

    const status = await call('GET', `/jobs/${jobId}`);
    expect(status.status).toBe(200);
    expect(SampleJob.safeParse(status.json).success).toBe(true);
    expect(status.json).toMatchObject({
      id: jobId,
      status: 'queued',
      progress: null,
      reservedCredits: dry.json.estimatedCredits,
      markers,
      startedAt: null,
      completedAt: null,
      errorMessage: null,
      resultsAvailable: false,
    });
    const detail = await call('GET', `/samples/${slideId}`);
    expect(detail.json.jobCount).toBe(1);
    expect(detail.json.jobs).toEqual([status.json]);
    // The sample list's facets see the job.
    const ids = async (query: string) =>
      ((await call('GET', `/samples?${query}`)).json.items as { id: string }[]).map((item) => item.id);
    expect(await ids('workflow=in_flight')).toContain(slideId);
    expect(await ids('workflow=ready_no_job')).not.toContain(slideId);
    expect(await ids('marker=CD8:requested&marker=PanCK:requested')).toContain(slideId);
    expect(await ids('marker=CD8:completed')).not.toContain(slideId);
    expect(await ids('marker=Ki67:requested')).not.toContain(slideId);
  });

  test('a PATCH of mpp reprices after the recount; a count at another mpp is 409 meanwhile', async () => {
    const patched = await call('PATCH', `/samples/${slideId}`, { mpp: 0.998 });
    expect(patched.status).toBe(200);
    const recount = await stack.client.workflow.getHandle(workflowIds.recount(slideId)).result();
    expect(recount.patchCount).toBeGreaterThan(slidePatches * 3);
    const fresh = await call('POST', '/predict', { uploadId: slideId, markers: ['CD3'], dryRun: true });
    expect(fresh.status).toBe(200);
    expect(fresh.json.patchCount).toBe(recount.patchCount);

    // As while the recount is still running: the stored count belongs to the old mpp.
    await stack.sql`UPDATE sample_slides SET patch_count_mpp = 0.499 WHERE sample_id = ${slideId}`;
    for (const dryRun of [true, false]) {
      const stale = await call('POST', '/predict', { uploadId: slideId, markers: ['CD3'], dryRun });
      expect(stale.status).toBe(409);
      // It passes by itself: the answer says when to ask again.
      expect(stale.json).toMatchObject({
        error: 'sample_not_ready',
        message: expect.stringMatching(/recount/),
        retryAfterSeconds: 2,
      });
      expect(stale.headers.get('retry-after')).toBe('2');
    }
  });
});

describe('POST /predict: body, model and marker rules', () => {
  let sampleId: string;
  beforeAll(async () => {
    sampleId = await pricedSample(stack.tenant, 10);
  });

  test('the model: default v0.7; v0.4 and v0.5 sunset with currentDefault; anything else unknown', async () => {
    const ok = await call('POST', '/predict', {
      uploadId: sampleId,
      markers: ['CD3'],
      model: 'v0.7',
      dryRun: true,
    });
    expect(ok.status).toBe(200);
    for (const model of ['v0.4', 'v0.5']) {
      const sunset = await call('POST', '/predict', {
        uploadId: sampleId,
        markers: ['CD3'],
        model,
        dryRun: true,
      });
      expect(sunset.status).toBe(400);
      expect(sunset.json).toMatchObject({ error: 'model_sunset', currentDefault: 'v0.7' });
      expect(sunset.json.message).toContain(model);
    }
    for (const model of ['v0.6', 'v1', 'V0.7', '', 'gpt-4']) {
      const unknown = await call('POST', '/predict', { uploadId: sampleId, markers: ['CD3'], model });
      expect({ model, status: unknown.status, error: unknown.json.error }).toEqual({
        model,
        status: 400,
        error: 'unknown_model',
      });
    }
    expect(await stack.sql`SELECT id FROM jobs WHERE sample_id = ${sampleId}`).toHaveLength(0);
  });

  test('markers: outside the catalog 400 with unknownMarkers; outside the entitlement 403', async () => {
    const unknown = await call('POST', '/predict', {
      uploadId: sampleId,
      markers: ['CD3', 'NOPE', 'cd8'],
      dryRun: true,
    });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({ error: 'unknown_markers', unknownMarkers: ['NOPE', 'cd8'] });
    // A name off by case or punctuation only is named back as the catalog spells it.
    expect(unknown.json.message).toBe(
      'not in the marker catalog: NOPE, cd8 (names are exact: did you mean CD8?)',
    );
    const punctuated = await call('POST', '/predict', {
      uploadId: sampleId,
      markers: ['pdl1', 'NOPE'],
      dryRun: true,
    });
    expect(punctuated.json.message).toBe(
      'not in the marker catalog: pdl1, NOPE (names are exact: did you mean PD-L1?)',
    );

    const { tenant, call: other } = await tenantWith(1000);
    const otherSample = await pricedSample(tenant, 10);
    await stack.sql`UPDATE organizations SET marker_entitlement = ${['CD3', 'CD8']} WHERE id = ${tenant.organizationId}`;
    const entitled = await other('POST', '/predict', {
      uploadId: otherSample,
      markers: ['CD3', 'CD8'],
      dryRun: true,
    });
    expect(entitled.status).toBe(200);
    const refused = await other('POST', '/predict', {
      uploadId: otherSample,
      markers: ['CD3', 'Ki67', 'PanCK'],
    });
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({
      error: 'marker_not_available',
      unavailableMarkers: ['Ki67', 'PanCK'],
    });
    // The catalog is checked first: an unknown name is 400 even when others are not entitled.
    const both = await other('POST', '/predict', { uploadId: otherSample, markers: ['Ki67', 'NOPE'] });
    expect(both.json).toMatchObject({ error: 'unknown_markers', unknownMarkers: ['NOPE'] });
    expect((await ledgerOf(tenant.organizationId)).map((row) => row.kind)).toEqual(['grant']);
  });

  test('1 to 512 distinct markers; strict body; bad values 422, bad shapes 400', async () => {
    const catalog = markerCatalog().map((marker) => marker.name);
    const cases: [unknown, number, string][] = [
      [{ uploadId: sampleId, markers: [] }, 422, 'validation_failed'],
      [
        { uploadId: sampleId, markers: Array.from({ length: 513 }, (_, i) => `M${i}`) },
        422,
        'validation_failed',
      ],
      [{ uploadId: sampleId, markers: ['CD3', 'CD3'] }, 422, 'validation_failed'],
      [{ uploadId: sampleId }, 422, 'validation_failed'],
      [{ uploadId: 'not-a-uuid', markers: ['CD3'] }, 422, 'validation_failed'],
      [{ uploadId: sampleId, markers: ['CD3'], dryRun: 'true' }, 422, 'validation_failed'],
      [{ uploadId: sampleId, markers: ['CD3'], model: null }, 422, 'validation_failed'],
      [{ uploadId: sampleId, markers: [3] }, 422, 'validation_failed'],
      [{ uploadId: sampleId, markers: ['CD3'], dryRun: true, priority: 'high' }, 400, 'invalid_request'],
      [{ sampleId, markers: ['CD3'] }, 400, 'invalid_request'],
      [{}, 400, 'invalid_request'],
      [[], 400, 'invalid_request'],
      ['{"uploadId": ', 400, 'invalid_request'],
    ];
    for (const [body, status, error] of cases) {
      const response = await call('POST', '/predict', body);
      expect({ body, status: response.status, error: response.json?.error }).toEqual({ body, status, error });
    }
    // 512 unknown names are a size the body accepts: the catalog answers.
    const many = await call('POST', '/predict', {
      uploadId: sampleId,
      markers: Array.from({ length: 512 }, (_, i) => `M${i}`),
      dryRun: true,
    });
    expect(many.status).toBe(400);
    expect(many.json.error).toBe('unknown_markers');
    const all = await call('POST', '/predict', { uploadId: sampleId, markers: catalog, dryRun: true });
    expect(all.json).toMatchObject({ markerCount: catalog.length, estimatedCredits: 10 * catalog.length });
    const query = await call('POST', '/predict?dryRun=true', { uploadId: sampleId, markers: ['CD3'] });
    expect(query.status).toBe(400);
  });
});

describe('POST /predict: the sample', () => {
  test('of another organization, or none: 404', async () => {
    const { tenant } = await tenantWith(1000);
    const foreign = await pricedSample(tenant, 10);
    for (const uploadId of [foreign, '00000000-0000-4000-8000-000000000000']) {
      const response = await call('POST', '/predict', { uploadId, markers: ['CD3'], dryRun: true });
      expect(response.status).toBe(404);
      expect(response.json.error).toBe('not_found');
      expect((await call('POST', '/predict', { uploadId, markers: ['CD3'] })).status).toBe(404);
    }
  });

  test('still uploading, failed, or in Trash: 409 sample_not_ready', async () => {
    for (const status of ['uploading', 'upload_failed', 'deid_failed', 'preprocess_failed'] as const) {
      const id = await pricedSample(stack.tenant, 10, 0.5, { status });
      const response = await call('POST', '/predict', { uploadId: id, markers: ['CD3'] });
      expect({ status, code: response.status, error: response.json.error }).toEqual({
        status,
        code: 409,
        error: 'sample_not_ready',
      });
    }
    const trashed = await pricedSample(stack.tenant, 10);
    await call('DELETE', `/samples/${trashed}`);
    const response = await call('POST', '/predict', { uploadId: trashed, markers: ['CD3'], dryRun: true });
    expect(response.status).toBe(409);
    expect(response.json).toMatchObject({
      error: 'sample_not_ready',
      message: expect.stringMatching(/Trash/),
    });
  });

  test('before ready: the dry run is 409, a submission reserves every grid position of the slide', async () => {
    const { tenant, call: tenantCall } = await tenantWith(300);
    for (const status of ['deid_running', 'preprocessing'] as const) {
      // insertSample's slide: 2000 x 1500 px at 0.5 µm, a grid of 224 px: 9 x 7 positions.
      const id = await pricedSample(tenant, null, 0.5, { status });
      const dry = await tenantCall('POST', '/predict', { uploadId: id, markers: ['CD3'], dryRun: true });
      expect({ code: dry.status, error: dry.json.error }).toEqual({ code: 409, error: 'sample_not_ready' });
      const estimate = await tenantCall('POST', '/predict/estimate', { uploadId: id, markers: ['CD3'] });
      expect({ code: estimate.status, error: estimate.json.error }).toEqual({
        code: 409,
        error: 'sample_not_ready',
      });
      const submitted = await tenantCall('POST', '/predict', { uploadId: id, markers: ['CD3', 'CD8'] });
      expect(submitted.status).toBe(202);
      expect(submitted.json).toMatchObject({ status: 'queued', reservedCredits: 63 * 2 });
      const [job] = await stack.sql`
        SELECT patch_count, reserved_credits::int AS reserved, price_provisional FROM jobs
        WHERE id = ${submitted.json.jobId}`;
      expect(job).toEqual({ patch_count: 63, reserved: 126, price_provisional: true });
    }
    expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: 300, pending: 252 });
    // The upper bound is checked against the credits like any price.
    const another = await pricedSample(tenant, null, 0.5, { status: 'deid_running' });
    const refused = await tenantCall('POST', '/predict', {
      uploadId: another,
      markers: ['CD3', 'CD8', 'PanCK'],
    });
    expect(refused.json).toMatchObject({ error: 'insufficient_credits', required: 63 * 3 });
    // No header read yet, or no scale in it.
    await stack.sql`UPDATE samples SET width_px = NULL, height_px = NULL WHERE id = ${another}`;
    const unread = await tenantCall('POST', '/predict', { uploadId: another, markers: ['CD3'] });
    expect({ code: unread.status, error: unread.json.error }).toEqual({
      code: 409,
      error: 'sample_not_ready',
    });
    const unscaled = await pricedSample(tenant, null, null, { status: 'deid_running' });
    const noMpp = await tenantCall('POST', '/predict', { uploadId: unscaled, markers: ['CD3'] });
    expect({ code: noMpp.status, error: noMpp.json.error }).toEqual({ code: 409, error: 'mpp_required' });
  });

  test('POST /predict/estimate is the dry run under its older name', async () => {
    const markers = ['CD3', 'CD8'];
    const sample = await pricedSample(stack.tenant, 17);
    const dry = await call('POST', '/predict', { uploadId: sample, markers, dryRun: true });
    const estimate = await call('POST', '/predict/estimate', { uploadId: sample, markers });
    expect(estimate.status).toBe(200);
    expect(estimate.json).toEqual(dry.json);
    expect(estimate.json).toMatchObject({ patchCount: 17, estimatedCredits: 34 });
    const extra = await call('POST', '/predict/estimate', { uploadId: sample, markers, dryRun: false });
    expect(extra.status).toBe(400);
  });

  test('no usable mpp: 409 mpp_required; a count missing or taken at another mpp: 409 sample_not_ready', async () => {
    const noScale = await pricedSample(stack.tenant, null, null);
    const unscaled = await call('POST', '/predict', { uploadId: noScale, markers: ['CD3'], dryRun: true });
    expect(unscaled.status).toBe(409);
    expect(unscaled.json.error).toBe('mpp_required');

    const uncounted = await pricedSample(stack.tenant, null, 0.5);
    const stale = await pricedSample(stack.tenant, 10, 0.5, { patchCountMpp: 0.25 });
    const bare = await insertSample(stack.sql, {
      organizationId: stack.tenant.organizationId,
      mppCalibrated: 0.5,
    });
    for (const id of [uncounted, stale, bare]) {
      const response = await call('POST', '/predict', { uploadId: id, markers: ['CD3'] });
      expect(response.status).toBe(409);
      expect(response.json).toMatchObject({
        error: 'sample_not_ready',
        message: expect.stringMatching(/recount/),
      });
    }
    // A user override wins over the calibrated value, as in the sample detail's mpp.
    await stack.sql`UPDATE samples SET mpp_override = 0.25 WHERE id = ${stale}`;
    const overridden = await call('POST', '/predict', { uploadId: stale, markers: ['CD3'], dryRun: true });
    expect(overridden.json).toMatchObject({ patchCount: 10, estimatedCredits: 10 });
  });

  test('a sample with no tissue prices at 0 and can be submitted', async () => {
    const empty = await pricedSample(stack.tenant, 0);
    const submitted = await call('POST', '/predict', { uploadId: empty, markers: ['CD3', 'CD8'] });
    expect(submitted.status).toBe(202);
    expect(submitted.json.reservedCredits).toBe(0);
  });
});

describe('POST /predict: credits and the active-job cap', () => {
  test('402 insufficient_credits with required when the estimate exceeds balance minus pending', async () => {
    const { tenant, call: other } = await tenantWith(100);
    const sampleId = await pricedSample(tenant, 30);
    const first = await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3', 'CD8'] });
    expect(first.status).toBe(202);
    expect(first.json.reservedCredits).toBe(60);
    // 40 left: a 60-credit job does not fit, a 30-credit one does.
    const dry = await other('POST', '/predict', {
      uploadId: sampleId,
      markers: ['CD3', 'CD8'],
      dryRun: true,
    });
    expect(dry.json).toMatchObject({ estimatedCredits: 60, orgBalance: 100, orgPending: 60 });
    const refused = await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3', 'CD8'] });
    expect(refused.status).toBe(402);
    expect(refused.json).toMatchObject({
      error: 'insufficient_credits',
      required: 60,
      retryAfterSeconds: null,
    });
    const fits = await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] });
    expect(fits.status).toBe(202);
    expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: 100, pending: 90 });
    const jobs = await stack.sql`SELECT id FROM jobs WHERE organization_id = ${tenant.organizationId}`;
    expect(jobs).toHaveLength(2);
  });

  test("429 rate_limited with retryAfterSeconds over the organization's active-job cap", async () => {
    const { tenant, call: other } = await tenantWith(10_000, { cap: 2 });
    const sampleId = await pricedSample(tenant, 5);
    for (let i = 0; i < 2; i += 1)
      expect((await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] })).status).toBe(202);
    const over = await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] });
    expect(over.status).toBe(429);
    expect(over.json).toMatchObject({ error: 'rate_limited', retryAfterSeconds: 30, required: null });
    expect(over.headers.get('retry-after')).toBe('30');
    // A dry run is not a submission: the cap does not apply.
    expect(
      (await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'], dryRun: true })).status,
    ).toBe(200);
    // A terminal job frees its place.
    await stack.sql`UPDATE jobs SET status = 'failed' WHERE id = (
      SELECT id FROM jobs WHERE organization_id = ${tenant.organizationId} LIMIT 1)`;
    expect((await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] })).status).toBe(202);
  });

  test('100 submissions racing for the last credits: exactly k accepted, the ledger never overdraws', async () => {
    const perJob = 7 * 2;
    const k = 13;
    const { tenant, call: other } = await tenantWith(perJob * k + perJob - 1, { cap: 1000 });
    const sampleId = await pricedSample(tenant, 7);
    const answers = await Promise.all(
      Array.from({ length: 100 }, () =>
        other('POST', '/predict', { uploadId: sampleId, markers: ['CD3', 'CD8'] }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 202)).toHaveLength(k);
    expect(statuses.filter((status) => status === 402)).toHaveLength(100 - k);
    for (const refused of answers.filter((answer) => answer.status === 402))
      expect(refused.json).toMatchObject({ error: 'insufficient_credits', required: perJob });

    // Submissions of one organization commit one at a time (its row lock), so the ledger's id
    // order is its commit order: every prefix is a committed state.
    const ledger = await ledgerOf(tenant.organizationId);
    let balance = 0;
    let pending = 0;
    for (const row of ledger) {
      balance += Number(row.balanceDelta);
      pending += Number(row.pendingDelta);
      expect(balance).toBeGreaterThanOrEqual(pending);
    }
    expect({ balance, pending }).toEqual({ balance: perJob * k + perJob - 1, pending: perJob * k });
    expect(ledger.filter((row) => row.kind === 'reserve')).toHaveLength(k);
    const jobs = await stack.sql`SELECT id FROM jobs WHERE organization_id = ${tenant.organizationId}`;
    expect(new Set(jobs.map((job) => job.id))).toEqual(
      new Set(answers.filter((answer) => answer.status === 202).map((answer) => answer.json.jobId)),
    );
  });
});

describe('the workflow start after the commit', () => {
  test('a failed start still answers 202; the reconciler starts the job later, once', async () => {
    const { tenant, call: other } = await tenantWith(1000);
    const sampleId = await pricedSample(tenant, 5);
    engine.behaviour.startFails = true;
    const submitted = await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] });
    expect(submitted.status).toBe(202);
    const jobId = submitted.json.jobId as string;
    const [row] = await stack.sql`SELECT status, workflow_started_at FROM jobs WHERE id = ${jobId}`;
    expect(row).toEqual({ status: 'queued', workflow_started_at: null });
    expect(engine.calls.started).not.toContain(jobId);

    const started: string[] = [];
    const startPrediction = async (id: string) => {
      started.push(id);
    };
    // Too young: the API's own start may still be on its way.
    expect(await startQueuedJobs({ sql: stack.sql, startPrediction })).toEqual({
      started: 0,
      cancelled: 0,
      failed: 0,
    });
    const failing = async () => {
      throw new Error('still unreachable');
    };
    const failed = await startQueuedJobs(
      { sql: stack.sql, startPrediction: failing },
      { olderThanSeconds: 0 },
    );
    expect(failed.failed).toBeGreaterThanOrEqual(1);
    const run = await startQueuedJobs({ sql: stack.sql, startPrediction }, { olderThanSeconds: 0 });
    expect(started).toContain(jobId);
    expect(run.started).toBe(started.length);
    const [after] = await stack.sql`SELECT workflow_started_at FROM jobs WHERE id = ${jobId}`;
    expect(after!.workflow_started_at).toBeInstanceOf(Date);
    started.length = 0;
    await startQueuedJobs({ sql: stack.sql, startPrediction }, { olderThanSeconds: 0 });
    expect(started).toEqual([]);
  });

  test('a queued job with a cancel request and no workflow is cancelled and refunded, not started', async () => {
    const { tenant, call: other } = await tenantWith(1000);
    const sampleId = await pricedSample(tenant, 5);
    engine.behaviour.startFails = true;
    const jobId = (await other('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] })).json
      .jobId as string;
    await stack.sql`UPDATE jobs SET cancel_requested_at = now() WHERE id = ${jobId}`;
    const started: string[] = [];
    const result = await startQueuedJobs(
      { sql: stack.sql, startPrediction: async (id) => void started.push(id) },
      { olderThanSeconds: 0 },
    );
    expect(started).not.toContain(jobId);
    expect(result.cancelled).toBeGreaterThanOrEqual(1);
    expect((await other('GET', `/jobs/${jobId}`)).json.status).toBe('cancelled');
    expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: 1000, pending: 0 });
  });
});
