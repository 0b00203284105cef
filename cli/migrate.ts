import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { ConfigError, loadConfig } from './config';
import { runMain } from './main';

runMain(async () => {
  const config = loadConfig();
  if (!config.database.url) throw new ConfigError('Invalid configuration:\n  DATABASE_URL: required');
  const sql = createSql(config.database.url, { max: 1 });
  try {
    const { applied } = await migrate(sql);
    process.stdout.write(
      applied.length > 0 ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n',
    );
  } finally {
    await sql.end({ timeout: 5 });
  }
});
