import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../../cli/config';
import { recordDevStack, withDevStack } from '../../../cli/dev-stack';

let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'sps-dev-stack-'));
});
afterEach(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

const stack = {
  databaseUrl: 'postgres://postgres:postgres@127.0.0.1:5999/sps',
  temporalAddress: '127.0.0.1:7999',
};

test('admin takes the database and Temporal of the npm start stack running from the data directory', async () => {
  const record = await recordDevStack(dataDir, stack);
  expect((await stat(path.join(dataDir, 'dev-stack.json'))).mode & 0o777).toBe(0o600);
  const config = await withDevStack(loadConfig({ SPS_DATA_DIR: dataDir }));
  expect(config.database.url).toBe(stack.databaseUrl);
  expect(config.temporal.address).toBe(stack.temporalAddress);

  const own = await withDevStack(loadConfig({ SPS_DATA_DIR: dataDir, TEMPORAL_ADDRESS: 'temporal:7233' }));
  expect(own.temporal.address).toBe('temporal:7233');

  await record.stop();
  await expect(withDevStack(loadConfig({ SPS_DATA_DIR: dataDir }))).rejects.toThrow(
    new ConfigError(
      `Invalid configuration:\n  DATABASE_URL: required; no \`npm start\` runs from ${dataDir} ` +
        '(start one there, or set DATABASE_URL to your database)',
    ),
  );
});

test('DATABASE_URL wins over a running stack', async () => {
  await recordDevStack(dataDir, stack);
  const url = 'postgres://u:p@db.example:5432/sps';
  const config = await withDevStack(loadConfig({ SPS_DATA_DIR: dataDir, DATABASE_URL: url }));
  expect(config.database.url).toBe(url);
  expect(config.temporal.address).toBeUndefined();
});

test('a record left by a stack that died, or cut short, is no stack', async () => {
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;
  const file = path.join(dataDir, 'dev-stack.json');
  await writeFile(file, JSON.stringify({ pid: gone, ...stack }));
  await expect(withDevStack(loadConfig({ SPS_DATA_DIR: dataDir }))).rejects.toThrow(/no `npm start` runs/);
  await writeFile(file, `{"pid": ${process.pid}, "databaseUrl": "postgres://`);
  await expect(withDevStack(loadConfig({ SPS_DATA_DIR: dataDir }))).rejects.toThrow(/no `npm start` runs/);
});
