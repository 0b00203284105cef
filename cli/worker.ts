import { createSql } from '../db';
import { loadConfig, requireProductionConfig } from './config';
import { runMain, untilSignal } from './main';
import {
  connectClient,
  createLogger,
  createStore,
  ensureSchedules,
  ensureSearchAttributes,
  loadWorkflowBundle,
  startWorkers,
} from './runtime';

/** Production worker process: polls every task queue with one workflow bundle. */
runMain(async () => {
  const config = loadConfig();
  requireProductionConfig(config);
  const logger = createLogger(config, 'sps-worker');
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
    workflowBundle: await loadWorkflowBundle(config.workflowBundlePath),
    logger,
    exportJpegQuality: config.exportJpegQuality,
    predictionBandConcurrency: config.predictionBandConcurrency,
  });
  await ensureSchedules(client, config.temporal.taskQueuePrefix, config.maintenanceIntervalSeconds);
  await client.connection.close();
  logger.info({ namespace: config.temporal.namespace }, 'worker polling');
  await Promise.race([untilSignal(), workers.done]);
  await workers.shutdown();
  await sql.end({ timeout: 5 });
});
