/** @jest-environment ./test/support/onnx-environment.js */
import { setTimeout as sleep } from 'node:timers/promises';
import { creditSummary, grantCredits } from '../../db/credits';
import { type JobWorkflowState, operatorMessages, workflowIds } from '../../schemas/temporal';
import { stackActivities } from '../support/activities';
import { apiClient } from '../support/http';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * The finding as an operator meets it: `temporal workflow terminate -w prediction-{jobId}` on a
 * job that is predicting on a live worker left it `running` with its credits reserved for good.
 * The reconciler of closed workflows ends it `failed` with the reason, the reservation back,
 * the partial store gone (after the worker's activity stopped writing), and a second pass
 * changes nothing.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let markers: string[];
/** The `state` query's answer while a job was predicting, once tiles were reported. */
let reported: JobWorkflowState | undefined;

beforeAll(async () => {
  stack = await startStack({ worker: true, sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
  markers = ((await call('GET', '/markers')).json.markers as { name: string }[]).map((m) => m.name);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

const reconciler = () => stackActivities(stack, stack.workflows.workflowState);

/** Submits a job and terminates its workflow while it is `running`; undefined if it finished first. */
async function terminatedWhileRunning(): Promise<string | undefined> {
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;
  for (;;) {
    const [job] = await stack.sql<{ status: string }[]>`SELECT status FROM jobs WHERE id = ${jobId}`;
    if (job!.status === 'running') break;
    if (['postprocessing', 'completed', 'partial_failed', 'failed'].includes(job!.status)) return undefined;
    await sleep(20);
  }
  const handle = stack.client.workflow.getHandle(workflowIds.prediction(jobId));
  // What the operator sees first: the `state` query, with the tiles the activity reported.
  for (let tries = 0; tries < 100 && !reported; tries += 1) {
    const state = await handle.query<JobWorkflowState>(operatorMessages.state).catch(() => undefined);
    if (state?.tilesDone) reported = state;
    else await sleep(20);
  }
  await handle.terminate('an operator stopped it from the web UI');
  const [job] = await stack.sql<{ status: string }[]>`SELECT status FROM jobs WHERE id = ${jobId}`;
  return job!.status === 'running' ? jobId : undefined;
}

async function storeKeys(jobId: string): Promise<string[]> {
  const keys: string[] = [];
  const prefix = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/jobs/${jobId}/`;
  for await (const key of stack.store.list(prefix)) keys.push(key);
  return keys;
}

test('a prediction terminated while running: failed with the reason, credits back once, no partial store left', async () => {
  const before = await creditSummary(stack.sql, stack.tenant.organizationId);
  let jobId: string | undefined;
  // On a loaded machine the slide can be predicted before the terminate lands: a fresh job then.
  for (let attempt = 0; attempt < 3 && !jobId; attempt += 1) jobId = await terminatedWhileRunning();
  if (!jobId) throw new Error('every job finished before its workflow could be terminated');

  expect(reported).toMatchObject({ status: 'running', step: 'predictJob' });
  expect(reported!.tilesDone).toBeGreaterThan(0);
  expect(reported!.tilesDone).toBeLessThanOrEqual(reported!.tiles!);

  // Left `running` for good until now: nothing but the reconciler ends it.
  await sleep(2000);
  expect((await call('GET', `/jobs/${jobId}`)).json.status).toBe('running');
  const held = await creditSummary(stack.sql, stack.tenant.organizationId);
  expect(held.pending).toBeGreaterThan(before.pending);

  const activities = reconciler();
  let settled = 0;
  for (let tries = 0; tries < 60 && settled === 0; tries += 1) {
    settled = (await activities.settleClosedWorkflows({ olderThanSeconds: 0, closedForSeconds: 5 })).jobs;
    if (settled === 0) await sleep(500);
  }
  expect(settled).toBe(1);

  const job = (await call('GET', `/jobs/${jobId}`)).json;
  expect(job.status).toBe('failed');
  expect(job.errorMessage).toMatch(/terminated/);
  // The ledger balances: what was held for this job is back; other jobs' settlements stand.
  const [ledger] = await stack.sql<{ pending: string; balance: string }[]>`
    SELECT coalesce(sum(pending_delta), 0) AS pending, coalesce(sum(balance_delta), 0) AS balance
    FROM credit_ledger WHERE job_id = ${jobId}`;
  expect({ pending: Number(ledger!.pending), balance: Number(ledger!.balance) }).toEqual({
    pending: 0,
    balance: 0,
  });
  expect((await creditSummary(stack.sql, stack.tenant.organizationId)).pending).toBe(before.pending);
  // The worker's activity stopped before the store was removed: nothing is written after.
  expect(await storeKeys(jobId)).toEqual([]);
  await sleep(2000);
  expect(await storeKeys(jobId)).toEqual([]);

  const rows = await stack.sql`SELECT * FROM credit_ledger WHERE job_id = ${jobId} ORDER BY id`;
  expect(await activities.settleClosedWorkflows({ olderThanSeconds: 0, closedForSeconds: 0 })).toMatchObject({
    jobs: 0,
  });
  expect(await stack.sql`SELECT * FROM credit_ledger WHERE job_id = ${jobId} ORDER BY id`).toEqual(rows);
});

test('a completed prediction answers the state query with its whole tile count', async () => {
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI'] });
  const handle = stack.client.workflow.getHandle(workflowIds.prediction(submitted.json.jobId));
  expect(await handle.result()).toEqual({ status: 'completed' });
  const state = await handle.query<JobWorkflowState>(operatorMessages.state);
  expect(state).toMatchObject({ status: 'completed', step: null, progress: 1 });
  expect(state.tilesDone).toBe(state.tiles);
  expect(state.tiles).toBeGreaterThan(0);
});
