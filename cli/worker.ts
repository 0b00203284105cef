import { createSql } from '../db';
import { loadConfig, requireProductionConfig } from './config';
import { runMain, untilSignal } from './main';
import {
  closeActivityThreads,
  connectClient,
  createLogger,
  createStore,
  ensureSchedules,
  ensureSearchAttributes,
  loadWorkflowBundle,
  startWorkers,
} from './runtime';

/**
 * Production worker process: polls the task queues of WORKER_QUEUES (default all), with the
 * activity slots of WORKER_*_CONCURRENCY; only an `io` worker loads the workflow bundle.
 */
runMain(async () => {
  const config = loadConfig();
  requireProductionConfig(config);
  const logger = createLogger(config, 'sps-worker');
  // Listened for from the start: a stop asked while the workers still start ends the process
  // once they have started, instead of being missed.
  const signalled = untilSignal();
  const sql = createSql(config.database.url, { max: config.database.poolSize });
  const store = createStore(config, config.signingSecret);
  const client = await connectClient(config);
  // Before any start that sets them: the API's starts fail on an unknown attribute.
  await ensureSearchAttributes(client, config.temporal.namespace);
  const workers = await startWorkers({
    address: config.temporal.address,
    namespace: config.temporal.namespace,
    taskQueuePrefix: config.temporal.taskQueuePrefix,
    sql,
    store,
    workflowBundle: config.worker.queues.includes('io')
      ? await loadWorkflowBundle(config.workflowBundlePath)
      : undefined,
    logger,
    exportJpegQuality: config.exportJpegQuality,
    queues: config.worker.queues,
    slots: config.worker.slots,
    fanOut: config.fanOut,
    workflowSettings: config.workflowSettings,
  });
  await ensureSchedules(client, config.temporal.taskQueuePrefix, config.maintenanceIntervalSeconds);
  await client.connection.close();
  logger.info({ namespace: config.temporal.namespace, queues: config.worker.queues }, 'worker polling');
  await Promise.race([signalled, workers.done]);
  await workers.shutdown();
  await closeActivityThreads();
  await sql.end({ timeout: 5 });
});
