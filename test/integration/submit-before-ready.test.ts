/** @jest-environment ./test/support/onnx-environment.js */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { creditSummary } from '../../db/credits';
import { creditGridPositions } from '../../models/registry';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { insertSample } from '../support/samples';
import { createTenant, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

/**
 * DECISIONS.md, Submitting before the sample is ready: the upper-bound reservation, the wait in
 * `dispatching`, the exact settlement, the failed sample, the cancel while waiting, and the
 * ledger balancing to the credit on every path, with the real worker.
 */
let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ worker: true });
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

async function tenantWith(credits: number) {
  const tenant = await createTenant(stack.sql, { credits });
  await stack.sql`UPDATE organizations SET active_job_cap = 1000 WHERE id = ${tenant.organizationId}`;
  return { tenant, call: apiClient(stack.api, tenant.apiKey) };
}

const ledgerOf = (jobId: string) =>
  stack.sql<{ kind: string; balanceDelta: number; pendingDelta: number }[]>`
    SELECT kind, balance_delta::int AS "balanceDelta", pending_delta::int AS "pendingDelta"
    FROM credit_ledger WHERE job_id = ${jobId} ORDER BY id`;

const outcomeOf = (jobId: string) =>
  stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result() as Promise<{ status: string }>;

async function jobStatus(call: ReturnType<typeof apiClient>, jobId: string): Promise<string> {
  return (await call('GET', `/jobs/${jobId}`)).json.status as string;
}

async function untilStatus(call: ReturnType<typeof apiClient>, jobId: string, status: string) {
  for (let i = 0; i < 300 && (await jobStatus(call, jobId)) !== status; i++) await sleep(200);
  expect(await jobStatus(call, jobId)).toBe(status);
}

/** A sample whose every byte is in and whose header was read (2000 x 1500 px at 0.5 µm): 63 positions. */
const preparingSample = (organizationId: string) =>
  insertSample(stack.sql, { organizationId, status: 'deid_running', mppCalibrated: 0.5 });
const UPPER_BOUND = creditGridPositions(2000, 1500, 0.5);

test('100 racing submissions on samples not yet ready never overdraw', async () => {
  expect(UPPER_BOUND).toBe(63);
  const credits = 2000;
  const { tenant, call } = await tenantWith(credits);
  const samples = await Promise.all(
    Array.from({ length: 100 }, () => preparingSample(tenant.organizationId)),
  );
  const answers = await Promise.all(
    samples.map((uploadId) => call('POST', '/predict', { uploadId, markers: ['CD3'] })),
  );
  const accepted = answers.filter((answer) => answer.status === 202);
  const refused = answers.filter((answer) => answer.status !== 202);
  expect(accepted.length).toBe(Math.floor(credits / UPPER_BOUND));
  for (const answer of accepted) expect(answer.json.reservedCredits).toBe(UPPER_BOUND);
  for (const answer of refused)
    expect(answer.json).toMatchObject({ error: 'insufficient_credits', required: 63 });
  const held = await creditSummary(stack.sql, tenant.organizationId);
  expect(held).toEqual({ balance: credits, pending: accepted.length * UPPER_BOUND });

  // Every one waits in dispatching; cancelling them all gives everything back.
  const jobIds = accepted.map((answer) => answer.json.jobId as string);
  for (const jobId of jobIds) await untilStatus(call, jobId, 'dispatching');
  for (const jobId of jobIds) expect((await call('POST', `/jobs/${jobId}/cancel`)).status).toBe(200);
  for (const jobId of jobIds) expect((await outcomeOf(jobId)).status).toBe('cancelled');
  expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: credits, pending: 0 });
}, 600_000);

test('a cancel while waiting refunds the whole upper bound', async () => {
  const { tenant, call } = await tenantWith(500);
  const sampleId = await preparingSample(tenant.organizationId);
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['CD3', 'CD8'] });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;
  await untilStatus(call, jobId, 'dispatching');
  expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: 500, pending: 126 });
  await call('POST', `/jobs/${jobId}/cancel`);
  expect(await outcomeOf(jobId)).toEqual({ status: 'cancelled' });
  expect(await ledgerOf(jobId)).toEqual([
    { kind: 'reserve', balanceDelta: 0, pendingDelta: 126 },
    { kind: 'release', balanceDelta: 0, pendingDelta: -126 },
  ]);
  expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: 500, pending: 0 });
});

test('a sample that fails fails the job with its reason and a full refund', async () => {
  const { tenant, call } = await tenantWith(500);
  for (const status of ['deid_failed', 'preprocess_failed'] as const) {
    const sampleId = await preparingSample(tenant.organizationId);
    const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['CD3'] });
    const jobId = submitted.json.jobId as string;
    await untilStatus(call, jobId, 'dispatching');
    // As ingest's failIngest leaves it.
    await stack.sql`UPDATE samples SET status = ${status}, status_message = 'the file is not a slide'
      WHERE id = ${sampleId}`;
    expect(await outcomeOf(jobId)).toEqual({ status: 'failed' });
    const job = (await call('GET', `/jobs/${jobId}`)).json;
    expect(job).toMatchObject({ status: 'failed', resultsAvailable: false });
    expect(job.errorMessage).toBe(`the sample ended ${status}: the file is not a slide`);
    expect(await ledgerOf(jobId)).toEqual([
      { kind: 'reserve', balanceDelta: 0, pendingDelta: 63 },
      { kind: 'release', balanceDelta: 0, pendingDelta: -63 },
    ]);
  }
  expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({ balance: 500, pending: 0 });
});

test('submitted right after the last byte: waits in dispatching, settles to the dry run on the ready sample, completes', async () => {
  const { tenant, call } = await tenantWith(100_000);
  const upload = await uploadFile(call, path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'));
  // `complete` waits for the size read from the header.
  const completed = await call('POST', `/uploads/${upload.id}/complete`);
  expect(completed.json).toMatchObject({ widthPx: 2220, heightPx: 2967 });
  const submitted = await call('POST', '/predict', { uploadId: upload.id, markers: ['DAPI', 'CD3'] });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;
  const [sample] = await stack.sql<
    { mpp: number }[]
  >`SELECT mpp_calibrated AS mpp FROM samples WHERE id = ${upload.id}`;
  const upperBound = creditGridPositions(2220, 2967, sample!.mpp) * 2;
  expect(submitted.json.reservedCredits).toBe(upperBound);

  expect(await outcomeOf(jobId)).toEqual({ status: 'completed' });
  const dryRun = await call('POST', '/predict', {
    uploadId: upload.id,
    markers: ['DAPI', 'CD3'],
    dryRun: true,
  });
  expect(dryRun.status).toBe(200);
  const exact = dryRun.json.estimatedCredits as number;
  expect(exact).toBeGreaterThan(0);
  expect(exact).toBeLessThan(upperBound);
  const job = (await call('GET', `/jobs/${jobId}`)).json;
  expect(job).toMatchObject({ status: 'completed', reservedCredits: exact });
  expect(await ledgerOf(jobId)).toEqual([
    { kind: 'reserve', balanceDelta: 0, pendingDelta: upperBound },
    { kind: 'reprice', balanceDelta: 0, pendingDelta: exact - upperBound },
    { kind: 'spend', balanceDelta: -exact, pendingDelta: -exact },
  ]);
  expect(await creditSummary(stack.sql, tenant.organizationId)).toEqual({
    balance: 100_000 - exact,
    pending: 0,
  });

  // The statuses it went through, in order: it waited in dispatching before preprocessing.
  const events = await stack.sql<{ status: string }[]>`
    SELECT status FROM job_events WHERE job_id = ${jobId} ORDER BY seq`;
  const order = [...new Set(events.map((event) => event.status))];
  expect(order).toEqual(['queued', 'dispatching', 'preprocessing', 'running', 'postprocessing', 'completed']);
}, 300_000);
