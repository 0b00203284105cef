import { createSql } from '../db';
import { ADMIN_USAGE, runAdminCommand, UsageError } from './admin-commands';
import { ConfigError, loadConfig } from './config';
import { runMain } from './main';

runMain(async () => {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv.includes('--help')) {
    process.stdout.write(`${ADMIN_USAGE}\n`);
    return;
  }
  const config = loadConfig();
  if (!config.database.url) throw new ConfigError('Invalid configuration:\n  DATABASE_URL: required');
  const sql = createSql(config.database.url, { max: 1 });
  try {
    process.stdout.write(`${JSON.stringify(await runAdminCommand(sql, argv), null, 2)}\n`);
  } catch (err) {
    if (err instanceof UsageError) throw new ConfigError(err.message);
    throw err;
  } finally {
    await sql.end({ timeout: 5 });
  }
});
