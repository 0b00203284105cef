import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import { taskQueueKinds, taskQueueName } from '../../schemas/temporal';

/** The time-skipping test server that `npm test` provides (scripts/bootstrap.js). */
function testServerBinary(): string {
  const binary =
    process.env.TEMPORAL_TEST_SERVER ??
    path.join(os.homedir(), '.cache', 'sps', 'bin', 'temporal-test-server');
  if (!existsSync(binary)) {
    throw new Error(
      `the Temporal test server is not at ${binary}: run \`npm test\` once, or set TEMPORAL_TEST_SERVER`,
    );
  }
  return binary;
}

/**
 * The SDK's runtime, once per test file: errors only. Its default logs every worker's state
 * change and every activity failure these tests provoke on purpose, and the core warns that the
 * test server lacks a newer server's capability; in a suite's output they bury the failures.
 */
let runtimeInstalled = false;
function quietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({
    logger: new DefaultLogger('ERROR'),
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
  });
}

/**
 * A Temporal test server of this file's own, whose clock jumps ahead whenever every workflow
 * waits on a timer: retry backoffs and activity timeouts of hours pass in milliseconds.
 */
export function startTimeSkipping(): Promise<TestWorkflowEnvironment> {
  quietRuntime();
  return TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: testServerBinary() } },
  });
}

/**
 * An activity's body that works three minutes of the server's clock without a heartbeat: the
 * server times it out (heartbeat timeout two minutes). Ends early if the worker cancels it.
 * The server's clock sleep outlives the workflow and can hold the clock of a later run: a test
 * that stalls runs on a server of its own (`withOwnServer`).
 */
export async function stallPastHeartbeatTimeout(env: TestWorkflowEnvironment): Promise<void> {
  const sleep = env.sleep('3 minutes');
  pendingSleeps(env).add(sleep.catch(() => undefined));
  await Promise.race([sleep, Context.current().cancelled]);
}

/**
 * The server clock sleeps still running on each server. Teardown waits for them: a sleep cut
 * off by the server's exit is retried by the client on a timer, and that retry throws
 * outside any promise once the channel is closed ("Channel has been shut down").
 */
const sleepsOf = new WeakMap<TestWorkflowEnvironment, Set<Promise<unknown>>>();
function pendingSleeps(env: TestWorkflowEnvironment): Set<Promise<unknown>> {
  const sleeps = sleepsOf.get(env) ?? new Set<Promise<unknown>>();
  sleepsOf.set(env, sleeps);
  return sleeps;
}

/** Runs `work` on a time-skipping test server of its own, stopped afterwards. */
export async function withOwnServer<T>(work: (env: TestWorkflowEnvironment) => Promise<T>): Promise<T> {
  const env = await startTimeSkipping();
  try {
    return await work(env);
  } finally {
    await Promise.all(pendingSleeps(env));
    await env.teardown();
  }
}

/**
 * Runs `work` while workers on a fresh pair of queues (io and compute, as in production) run
 * the real workflow code with `activities` standing in for the real ones; answers the io queue.
 */
export async function withWorkers<T>(
  env: TestWorkflowEnvironment,
  activities: Partial<Activities>,
  work: (taskQueue: string) => Promise<T>,
): Promise<T> {
  const bundlePath = process.env.TEST_WORKFLOW_BUNDLE;
  if (!bundlePath) throw new Error('TEST_WORKFLOW_BUNDLE is unset: run test/workflows through jest');
  const workflowBundle = { code: await readFile(bundlePath, 'utf8') };
  const prefix = `w${randomBytes(4).toString('hex')}`;
  const workers = await Promise.all(
    taskQueueKinds.map((kind) =>
      Worker.create({
        connection: env.nativeConnection,
        taskQueue: taskQueueName(prefix, kind),
        workflowBundle,
        activities,
        // A cancel reaches an activity with a heartbeat's answer: send them at once.
        defaultHeartbeatThrottleInterval: 10,
        maxHeartbeatThrottleInterval: 10,
      }),
    ),
  );
  const running = workers.map((worker) => worker.run());
  try {
    return await work(taskQueueName(prefix, 'io'));
  } finally {
    for (const worker of workers) worker.shutdown();
    await Promise.all(running);
  }
}
