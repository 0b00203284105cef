import { createSql } from '../db';
import { loadConfig, requireProductionConfig } from './config';
import { runMain, untilSignal } from './main';
import { connectClient, createLogger, createStore, startApi } from './runtime';

/** Production API process: DATABASE_URL, TEMPORAL_ADDRESS and SIGNING_SECRET are required. */
runMain(async () => {
  const config = loadConfig();
  requireProductionConfig(config);
  const logger = createLogger(config, 'sps-api');
  const sql = createSql(config.database.url, { max: config.database.poolSize });
  const store = createStore(config, config.signingSecret);
  const client = await connectClient(config);
  const api = await startApi({ config, sql, store, client, signingSecret: config.signingSecret, logger });
  logger.info({ url: api.url }, 'api listening');
  await untilSignal();
  await api.close();
  await client.connection.close();
  await sql.end({ timeout: 5 });
});
