import { request } from 'node:http';
import { createWorkflowEngine } from '../../api/workflow-engine';
import { creditSummary, settleJob } from '../../db/credits';
import { recordJobProgress } from '../../db/jobs';
import { SampleJob } from '../../schemas/samples';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { insertPricedSample, recordingEngine } from '../support/predictions';
import { createTenant, startStack, type Tenant, type TestStack } from '../support/stack';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;
const engine = recordingEngine();

beforeAll(async () => {
  stack = await startStack({ workflows: engine.wrap });
  call = apiClient(stack.api, stack.tenant.apiKey);
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  engine.behaviour.cancelAnswer = 'requested';
});

/** A fresh organization with `credits`, a priced sample (10 patches) and its client. */
async function organization(credits = 1000) {
  const tenant = await createTenant(stack.sql, { credits });
  const sampleId = await insertPricedSample(stack.sql, {
    organizationId: tenant.organizationId,
    createdBy: tenant.userId,
    patchCount: 10,
    mpp: 0.5,
  });
  return { tenant, sampleId, call: apiClient(stack.api, tenant.apiKey) };
}

async function submit(
  org: { sampleId: string; call: ReturnType<typeof apiClient> },
  markers = ['CD3', 'CD8'],
) {
  const response = await org.call('POST', '/predict', { uploadId: org.sampleId, markers });
  expect(response.status).toBe(202);
  return response.json.jobId as string;
}

const eventsOf = (jobId: string) =>
  stack.sql<{ seq: number; status: string; progress: number | null; resultStoragePath: string | null }[]>`
    SELECT seq, status, progress, result_storage_path AS "resultStoragePath" FROM job_events
    WHERE job_id = ${jobId} ORDER BY seq`;

const ledgerOf = (jobId: string) =>
  stack.sql<{ kind: string; balanceDelta: string; pendingDelta: string }[]>`
    SELECT kind, balance_delta AS "balanceDelta", pending_delta AS "pendingDelta" FROM credit_ledger
    WHERE job_id = ${jobId} ORDER BY id`;

/** GET with the path exactly as written: fetch would resolve `..` and `%2e%2e` before sending. */
function rawGet(path: string, tenant: Tenant, headers: Record<string, string> = {}) {
  const url = new URL(stack.baseUrl);
  return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>(
    (resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'GET',
          headers: { authorization: `Bearer ${tenant.apiKey}`, ...headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
          );
        },
      );
      req.on('error', reject);
      req.end();
    },
  );
}

describe('GET /jobs/{id}', () => {
  test('the sample job body, exactly; other organizations and malformed ids are 404', async () => {
    const org = await organization();
    const jobId = await submit(org);
    const response = await org.call('GET', `/jobs/${jobId}`);
    expect(response.status).toBe(200);
    expect(SampleJob.safeParse(response.json).success).toBe(true);
    expect(Object.keys(response.json).sort()).toEqual(
      [
        'id',
        'status',
        'progress',
        'reservedCredits',
        'markers',
        'createdAt',
        'startedAt',
        'completedAt',
        'errorMessage',
        'resultsAvailable',
      ].sort(),
    );
    expect(response.json).toMatchObject({
      id: jobId,
      status: 'queued',
      reservedCredits: 20,
      markers: ['CD3', 'CD8'],
    });

    for (const path of [
      `/jobs/${jobId}`,
      `/jobs/${jobId}/results`,
      `/jobs/${jobId}/results/files/zarr.json`,
    ]) {
      const foreign = await call('GET', path);
      expect({ path, status: foreign.status, error: foreign.json.error }).toEqual({
        path,
        status: 404,
        error: 'not_found',
      });
    }
    expect((await call('POST', `/jobs/${jobId}/cancel`)).status).toBe(404);
    expect((await org.call('GET', '/jobs/not-a-uuid')).status).toBe(404);
    expect((await org.call('GET', '/jobs/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await org.call('GET', `/jobs/${jobId}?verbose=1`)).status).toBe(400);
  });

  test('the OpenAPI document lists the job endpoints', async () => {
    const document = (await call('GET', '/openapi.json')).json;
    for (const path of [
      '/api/v1/predict',
      '/api/v1/jobs/{id}',
      '/api/v1/jobs/{id}/cancel',
      '/api/v1/jobs/{id}/results',
      '/api/v1/jobs/{id}/results/files/{path}',
    ]) {
      expect(document.paths[path]).toBeDefined();
    }
    expect(Object.keys(document.paths['/api/v1/predict'].post.responses).sort()).toEqual(
      ['200', '202', '400', '401', '402', '403', '404', '409', '422', '429', '503'].sort(),
    );
  });
});

describe('recordJobProgress: the workflow moves the job and appends its events', () => {
  test('through the lifecycle: timestamps, progress from running on, one event per change', async () => {
    const org = await organization();
    const jobId = await submit(org);
    // Progress before `running` is not shown (DECISIONS.md: null until running).
    expect(await recordJobProgress(stack.sql, { jobId, status: 'dispatching', progress: 0.3 })).toBe(true);
    expect(await recordJobProgress(stack.sql, { jobId, status: 'preprocessing' })).toBe(true);
    let job = (await org.call('GET', `/jobs/${jobId}`)).json;
    expect(job).toMatchObject({ status: 'preprocessing', progress: null, startedAt: null });

    expect(await recordJobProgress(stack.sql, { jobId, status: 'running' })).toBe(true);
    job = (await org.call('GET', `/jobs/${jobId}`)).json;
    expect(job).toMatchObject({ status: 'running', progress: 0, completedAt: null });
    expect(Date.parse(job.startedAt)).toBeGreaterThanOrEqual(Date.parse(job.createdAt));

    expect(await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.5 })).toBe(true);
    // The same report again changes nothing and appends nothing.
    expect(await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.5 })).toBe(true);
    expect(await recordJobProgress(stack.sql, { jobId, status: 'postprocessing', progress: 0.9 })).toBe(true);
    // Back in the lifecycle: refused, nothing written.
    expect(await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.95 })).toBe(false);
    const prefix = `orgs/${org.tenant.organizationId}/jobs/${jobId}/result`;
    expect(
      await recordJobProgress(stack.sql, {
        jobId,
        status: 'completed',
        resultPrefix: prefix,
        resultsAvailable: true,
      }),
    ).toBe(true);
    job = (await org.call('GET', `/jobs/${jobId}`)).json;
    expect(job).toMatchObject({
      status: 'completed',
      progress: 1,
      resultsAvailable: true,
      errorMessage: null,
    });
    expect(Date.parse(job.completedAt)).toBeGreaterThanOrEqual(Date.parse(job.startedAt));

    // Terminal: never moves again.
    expect(await recordJobProgress(stack.sql, { jobId, status: 'failed', errorMessage: 'late' })).toBe(false);
    expect(await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.1 })).toBe(false);
    expect((await org.call('GET', `/jobs/${jobId}`)).json).toEqual(job);

    expect(await eventsOf(jobId)).toEqual([
      { seq: 1, status: 'queued', progress: null, resultStoragePath: null },
      { seq: 2, status: 'dispatching', progress: null, resultStoragePath: null },
      { seq: 3, status: 'preprocessing', progress: null, resultStoragePath: null },
      { seq: 4, status: 'running', progress: 0, resultStoragePath: null },
      { seq: 5, status: 'running', progress: 0.5, resultStoragePath: null },
      { seq: 6, status: 'postprocessing', progress: 0.9, resultStoragePath: null },
      { seq: 7, status: 'completed', progress: 1, resultStoragePath: `${prefix}/` },
    ]);
  });

  test('a failure keeps its message and progress; bad reports are refused', async () => {
    const org = await organization();
    const jobId = await submit(org);
    await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.4 });
    expect(
      await recordJobProgress(stack.sql, { jobId, status: 'failed', errorMessage: '12 % of patches failed' }),
    ).toBe(true);
    expect((await org.call('GET', `/jobs/${jobId}`)).json).toMatchObject({
      status: 'failed',
      progress: 0.4,
      errorMessage: '12 % of patches failed',
      resultsAvailable: false,
    });
    const other = await submit(org);
    await expect(
      recordJobProgress(stack.sql, { jobId: other, status: 'running', progress: 1.5 }),
    ).rejects.toThrow(/progress/);
    await expect(
      recordJobProgress(stack.sql, { jobId: other, status: 'completed', resultsAvailable: true }),
    ).rejects.toThrow(/resultPrefix/);
    await expect(
      recordJobProgress(stack.sql, { jobId: '00000000-0000-4000-8000-000000000000', status: 'running' }),
    ).rejects.toThrow(/not found/);
    expect((await org.call('GET', `/jobs/${other}`)).json.status).toBe('queued');
  });
});

describe('settleJob: the reservation is settled exactly once', () => {
  test('completed spends it; failed and cancelled release it; partial_failed splits it', async () => {
    const org = await organization(10_000);
    const cases = [
      { outcome: 'completed' as const, spent: 20, released: 0 },
      { outcome: 'failed' as const, spent: 0, released: 20 },
      { outcome: 'cancelled' as const, spent: 0, released: 20 },
      { outcome: 'partial_failed' as const, succeededFraction: 0.96, spent: 19, released: 1 },
    ];
    for (const { spent, released, ...input } of cases) {
      const jobId = await submit(org);
      const result = await settleJob(stack.sql, { jobId, ...input });
      expect(result).toEqual({ settled: true, spent, released });
      const expected = [{ kind: 'reserve', balanceDelta: '0', pendingDelta: '20' }];
      if (spent > 0)
        expected.push({ kind: 'spend', balanceDelta: String(-spent), pendingDelta: String(-spent) });
      if (released > 0)
        expected.push({ kind: 'release', balanceDelta: '0', pendingDelta: String(-released) });
      expect(await ledgerOf(jobId)).toEqual(expected);
    }
    // 19 + 20 spent; nothing left pending.
    expect(await creditSummary(stack.sql, org.tenant.organizationId)).toEqual({
      balance: 10_000 - 39,
      pending: 0,
    });
  });

  test('a second call, or two at once, settle once', async () => {
    const org = await organization();
    const jobId = await submit(org);
    expect((await settleJob(stack.sql, { jobId, outcome: 'completed' })).settled).toBe(true);
    expect(await settleJob(stack.sql, { jobId, outcome: 'completed' })).toEqual({
      settled: false,
      spent: 0,
      released: 0,
    });
    expect(await settleJob(stack.sql, { jobId, outcome: 'failed' })).toMatchObject({ settled: false });
    expect((await ledgerOf(jobId)).map((row) => row.kind)).toEqual(['reserve', 'spend']);

    const racing = await submit(org);
    const results = await Promise.all(
      Array.from({ length: 5 }, () => settleJob(stack.sql, { jobId: racing, outcome: 'cancelled' })),
    );
    expect(results.filter((result) => result.settled)).toHaveLength(1);
    expect((await ledgerOf(racing)).map((row) => row.kind)).toEqual(['reserve', 'release']);
    expect(await creditSummary(stack.sql, org.tenant.organizationId)).toEqual({ balance: 980, pending: 0 });
    const [row] = await stack.sql`SELECT settled_at FROM jobs WHERE id = ${racing}`;
    expect(row!.settled_at).toBeInstanceOf(Date);
  });

  test('the ledger stays append-only, and a sample with settled jobs can still be deleted', async () => {
    const org = await organization();
    const jobId = await submit(org);
    await settleJob(stack.sql, { jobId, outcome: 'completed' });
    await expect(
      stack.sql`UPDATE credit_ledger SET balance_delta = 0 WHERE job_id = ${jobId}`,
    ).rejects.toThrow(/append-only/);
    await expect(stack.sql`DELETE FROM credit_ledger WHERE job_id = ${jobId}`).rejects.toThrow(/append-only/);
    // A purge deletes the sample row; its jobs go with it, the ledger keeps their history.
    await stack.sql`DELETE FROM samples WHERE id = ${org.sampleId}`;
    expect(await stack.sql`SELECT 1 FROM jobs WHERE id = ${jobId}`).toHaveLength(0);
    expect((await ledgerOf(jobId)).map((row) => row.kind)).toEqual(['reserve', 'spend']);
    expect(await creditSummary(stack.sql, org.tenant.organizationId)).toEqual({ balance: 980, pending: 0 });
  });
});

describe('POST /jobs/{id}/cancel', () => {
  test('an active job: the cancel is recorded and the workflow asked to cancel; repeatable', async () => {
    const org = await organization();
    const jobId = await submit(org);
    await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.2 });
    const response = await org.call('POST', `/jobs/${jobId}/cancel`);
    expect(response.status).toBe(200);
    expect(response.json).toEqual({ id: jobId, status: 'cancelled' });
    expect(engine.calls.cancelled).toContain(jobId);
    const [row] = await stack.sql`SELECT status, cancel_requested_at FROM jobs WHERE id = ${jobId}`;
    expect(row!.cancel_requested_at).toBeInstanceOf(Date);
    // The workflow does the rest (status, refund) in its non-cancellable scope.
    expect(row!.status).toBe('running');
    const again = await org.call('POST', `/jobs/${jobId}/cancel`);
    expect(again.json).toEqual({ id: jobId, status: 'cancelled' });
    const [same] = await stack.sql`SELECT cancel_requested_at FROM jobs WHERE id = ${jobId}`;
    expect(same!.cancel_requested_at).toEqual(row!.cancel_requested_at);

    // As the workflow would: cancelled, then released.
    await recordJobProgress(stack.sql, { jobId, status: 'cancelled' });
    await settleJob(stack.sql, { jobId, outcome: 'cancelled' });
    const terminal = await org.call('POST', `/jobs/${jobId}/cancel`);
    expect(terminal.status).toBe(400);
    expect(terminal.json).toMatchObject({ error: 'job_already_terminal', status: 'cancelled' });
    expect(await creditSummary(stack.sql, org.tenant.organizationId)).toEqual({ balance: 1000, pending: 0 });
  });

  test('a terminal job is 400 job_already_terminal with its status', async () => {
    const org = await organization();
    for (const status of ['completed', 'partial_failed', 'failed'] as const) {
      const jobId = await submit(org);
      if (status === 'completed' || status === 'partial_failed') {
        await recordJobProgress(stack.sql, { jobId, status, resultPrefix: 'x/', resultsAvailable: true });
      } else await recordJobProgress(stack.sql, { jobId, status });
      const before = engine.calls.cancelled.length;
      const response = await org.call('POST', `/jobs/${jobId}/cancel`);
      expect(response.status).toBe(400);
      expect(response.json).toMatchObject({ error: 'job_already_terminal', status });
      expect(engine.calls.cancelled.length).toBe(before);
    }
  });

  test('a job with no workflow (its start failed, or the workflow is gone) is cancelled and refunded at once', async () => {
    const org = await organization();
    const jobId = await submit(org);
    engine.behaviour.cancelAnswer = 'not_found';
    const response = await org.call('POST', `/jobs/${jobId}/cancel`);
    expect(response.json).toEqual({ id: jobId, status: 'cancelled' });
    expect((await org.call('GET', `/jobs/${jobId}`)).json).toMatchObject({
      status: 'cancelled',
      completedAt: expect.any(String),
    });
    expect((await ledgerOf(jobId)).map((row) => row.kind)).toEqual(['reserve', 'release']);
    expect(await creditSummary(stack.sql, org.tenant.organizationId)).toEqual({ balance: 1000, pending: 0 });
    expect((await eventsOf(jobId)).map((event) => event.status)).toEqual(['queued', 'cancelled']);
  });
});

describe('results', () => {
  /** A job completed by hand, as the workflow would leave it, with a small store written. */
  async function completedJob(org: Awaited<ReturnType<typeof organization>>) {
    const jobId = await submit(org);
    const prefix = `orgs/${org.tenant.organizationId}/jobs/${jobId}/result.zarr/`;
    const root = new TextEncoder().encode(
      JSON.stringify({ zarr_format: 3, node_type: 'group', attributes: {} }),
    );
    const chunk = Uint8Array.from({ length: 1000 }, (_, i) => i % 251);
    await stack.store.put(`${prefix}zarr.json`, root);
    await stack.store.put(`${prefix}markers/CD3/0/c/0/0/0`, chunk);
    await recordJobProgress(stack.sql, { jobId, status: 'running', progress: 0.5 });
    return { jobId, prefix, root, chunk };
  }

  test('409 results_not_ready before results; then a signed zarr.json URL (1 h) and the base path', async () => {
    const org = await organization();
    const { jobId, prefix, root } = await completedJob(org);
    const early = await org.call('GET', `/jobs/${jobId}/results`);
    expect(early.status).toBe(409);
    expect(early.json.error).toBe('results_not_ready');
    const earlyFile = await org.call('GET', `/jobs/${jobId}/results/files/zarr.json`);
    expect(earlyFile.status).toBe(409);

    await recordJobProgress(stack.sql, {
      jobId,
      status: 'completed',
      resultPrefix: prefix,
      resultsAvailable: true,
    });
    const before = Date.now();
    const response = await org.call('GET', `/jobs/${jobId}/results`);
    expect(response.status).toBe(200);
    expect(Object.keys(response.json).sort()).toEqual(['expiresAt', 'resultBasePath', 'resultUrl']);
    expect(response.json.resultBasePath).toBe(prefix.slice(0, -1));
    const expiresAt = Date.parse(response.json.expiresAt);
    expect(expiresAt - before).toBeGreaterThan(3590_000);
    expect(expiresAt - before).toBeLessThan(3610_000);
    const signed = await fetch(response.json.resultUrl);
    expect(signed.status).toBe(200);
    expect(new Uint8Array(await signed.arrayBuffer())).toEqual(root);
  });

  test('a failed job has no results: 409', async () => {
    const org = await organization();
    const jobId = await submit(org);
    await recordJobProgress(stack.sql, { jobId, status: 'failed', errorMessage: 'boom' });
    const response = await org.call('GET', `/jobs/${jobId}/results`);
    expect(response.status).toBe(409);
    expect(response.json).toMatchObject({
      error: 'results_not_ready',
      message: expect.stringMatching(/failed/),
    });
  });

  test('files of the store stream, with Range; traversal and foreign stores are 404', async () => {
    const org = await organization();
    const { jobId, prefix, root, chunk } = await completedJob(org);
    await recordJobProgress(stack.sql, {
      jobId,
      status: 'completed',
      resultPrefix: prefix,
      resultsAvailable: true,
    });
    // A neighbour: another job's store of the same organization, and a sample's object.
    const neighbour = await completedJob(org);
    await recordJobProgress(stack.sql, {
      jobId: neighbour.jobId,
      status: 'completed',
      resultPrefix: neighbour.prefix,
      resultsAvailable: true,
    });
    await stack.store.put(
      `orgs/${org.tenant.organizationId}/jobs/${jobId}/secret.txt`,
      new Uint8Array([1, 2, 3]),
    );

    const base = `/api/v1/jobs/${jobId}/results/files`;
    const json = await rawGet(`${base}/zarr.json`, org.tenant);
    expect(json.status).toBe(200);
    expect(json.headers['content-type']).toMatch(/application\/json/);
    expect(new Uint8Array(json.body)).toEqual(root);

    const whole = await rawGet(`${base}/markers/CD3/0/c/0/0/0`, org.tenant);
    expect(whole.status).toBe(200);
    expect(whole.headers['content-type']).toBe('application/octet-stream');
    expect(new Uint8Array(whole.body)).toEqual(chunk);
    // Normalised: empty and `.` segments are dropped.
    const collapsed = await rawGet(`${base}/./markers//CD3/./0/c/0/0/0`, org.tenant);
    expect(collapsed.status).toBe(200);
    expect(new Uint8Array(collapsed.body)).toEqual(chunk);

    const tail = await rawGet(`${base}/markers/CD3/0/c/0/0/0`, org.tenant, { range: 'bytes=-16' });
    expect(tail.status).toBe(206);
    expect(tail.headers['content-range']).toBe('bytes 984-999/1000');
    expect(new Uint8Array(tail.body)).toEqual(chunk.subarray(984));
    const middle = await rawGet(`${base}/markers/CD3/0/c/0/0/0`, org.tenant, { range: 'bytes=10-19' });
    expect(new Uint8Array(middle.body)).toEqual(chunk.subarray(10, 20));

    const attempts = [
      `${base}/../secret.txt`,
      `${base}/%2e%2e/secret.txt`,
      `${base}/%2E%2E%2Fsecret.txt`,
      `${base}/markers/../../secret.txt`,
      `${base}/markers/../zarr.json`,
      `${base}/markers%2F..%2F..%2Fsecret.txt`,
      `${base}/..%5csecret.txt`,
      `${base}//etc/passwd`,
      `${base}/%2Fetc%2Fpasswd`,
      `${base}/../../../${neighbour.jobId}/result.zarr/zarr.json`,
      `${base}/../result.zarr/../secret.txt`,
      `${base}/%00`,
      `${base}/missing.json`,
      `${base}/markers`,
      `${base}/markers/CD3`,
    ];
    for (const path of attempts) {
      const response = await rawGet(path, org.tenant);
      expect({ path, status: response.status }).toEqual({ path, status: 404 });
    }
    // The neighbour's files are reached through the neighbour's own id only.
    expect((await rawGet(`/api/v1/jobs/${neighbour.jobId}/results/files/zarr.json`, org.tenant)).status).toBe(
      200,
    );
    // Another organization: 404 for the id, whatever the path.
    expect((await rawGet(`${base}/zarr.json`, stack.tenant)).status).toBe(404);
  });
});

describe('the workflow engine: prediction starts and cancels', () => {
  test('starts prediction-{jobId} once, by name with {jobId}; cancels it; an unknown one is not_found', async () => {
    // No worker polls this prefix, so the workflow is only created, never run.
    const real = createWorkflowEngine(stack.client, { taskQueuePrefix: `idle${Date.now()}` });
    const jobId = '11111111-2222-4333-8444-555555555555';
    const subject = {
      organizationId: stack.tenant.organizationId,
      sampleId: '66666666-2222-4333-8444-555555555555',
    };
    await real.startPrediction(jobId, subject);
    await real.startPrediction(jobId, subject);
    const handle = stack.client.workflow.getHandle(workflowIds.prediction(jobId));
    const description = await handle.describe();
    expect(description).toMatchObject({ type: 'predictionWorkflow', status: { name: 'RUNNING' } });
    expect(await real.cancelPrediction(jobId)).toBe('requested');
    await handle.terminate('test over');
    // A closed workflow is never started again under its id, and cannot be cancelled.
    await real.startPrediction(jobId, subject);
    expect((await handle.describe()).runId).toBe(description.runId);
    expect(await real.cancelPrediction(jobId)).toBe('not_found');
    expect(await real.cancelPrediction('99999999-2222-4333-8444-555555555555')).toBe('not_found');
  });
});
