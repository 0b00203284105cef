import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection, ScheduleNotFoundError } from '@temporalio/client';
import { ensureSchedules } from '../../cli/runtime';
import { testEnv } from '../support/env';

/**
 * A Schedule retired by an upgrade may have started a run of a workflow type the bundle no
 * longer has; `ensureSchedules` deletes the Schedule and ends that run, which would otherwise
 * fail every task for ever. On the real Temporal dev server.
 */

let connection: Connection;
let client: Client;

beforeAll(async () => {
  connection = await Connection.connect({ address: testEnv().temporalAddress });
  client = new Client({ connection });
});

afterAll(async () => {
  await connection.close();
});

test('a retired Schedule is deleted and the run it left open is terminated', async () => {
  const prefix = `t${randomBytes(4).toString('hex')}`;
  const scheduleId = `${prefix}-prediction-reconciler`;
  const schedule = await client.schedule.create({
    scheduleId,
    spec: { intervals: [{ every: '1 hour' }] },
    // The type retired with the Schedule; no worker polls this queue, so the run stays open.
    action: {
      type: 'startWorkflow',
      workflowType: 'reconcilePredictionJobsWorkflow',
      taskQueue: `${prefix}-io`,
      args: [{}],
    },
  });
  await schedule.trigger();
  const query = `TemporalScheduledById = '${scheduleId}'`;
  const runs: { workflowId: string; runId: string }[] = [];
  for (let attempt = 0; runs.length === 0 && attempt < 200; attempt++) {
    for await (const run of client.workflow.list({ query })) runs.push(run);
    if (runs.length === 0) await sleep(100);
  }
  expect(runs).toHaveLength(1);

  await ensureSchedules(client, prefix);

  await expect(client.schedule.getHandle(scheduleId).describe()).rejects.toThrow(ScheduleNotFoundError);
  const run = runs[0]!;
  const described = await client.workflow.getHandle(run.workflowId, run.runId).describe();
  expect(described.status.name).toBe('TERMINATED');
  for (const id of ['retention-sweep', 'trash-purge', 'maintenance'])
    await client.schedule.getHandle(`${prefix}-${id}`).delete();
});
