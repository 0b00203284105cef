import type { Client } from '@temporalio/client';
import { createSql } from '../db';
import { ADMIN_USAGE, runAdminCommand, UsageError } from './admin-commands';
import { ConfigError, loadConfig } from './config';
import { withDevStack } from './dev-stack';
import { runMain } from './main';
import { RerunError } from './rerun';
import { connectClient } from './runtime';

runMain(async () => {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv.includes('--help')) {
    process.stdout.write(`${ADMIN_USAGE}\n`);
    return;
  }
  const config = await withDevStack(loadConfig());
  const sql = createSql(config.database.url, { max: 1 });
  let client: Client | undefined;
  // Only the re-runs talk to Temporal; the other commands work without it.
  const temporal = async () => {
    const address = config.temporal.address;
    if (!address)
      throw new ConfigError('Invalid configuration:\n  TEMPORAL_ADDRESS: required to re-run a step');
    client = await connectClient({ ...config, temporal: { ...config.temporal, address } });
    return { client, taskQueuePrefix: config.temporal.taskQueuePrefix };
  };
  try {
    process.stdout.write(`${JSON.stringify(await runAdminCommand(sql, argv, temporal), null, 2)}\n`);
  } catch (err) {
    if (err instanceof UsageError || err instanceof RerunError) throw new ConfigError(err.message);
    throw err;
  } finally {
    await client?.connection.close();
    await sql.end({ timeout: 5 });
  }
});
