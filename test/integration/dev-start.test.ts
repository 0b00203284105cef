import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from '../../cli/ports';
import { testEnv } from '../support/env';

/**
 * `npm start` as a user runs it (the built `dev start`, which `npm test` builds first): its own
 * embedded PostgreSQL and Temporal dev server on a fresh data folder, the API and a worker, the
 * printed URLs and demo key; Ctrl-C stops everything; a second start reuses the data.
 */
const devScript = path.join(__dirname, '..', '..', 'dist', 'cli', 'dev.js');

interface Started {
  child: ChildProcess;
  apiUrl: string;
  apiKey: string;
}

function start(env: Record<string, string>): Promise<Started> {
  // Neither DATABASE_URL nor TEMPORAL_ADDRESS: start brings its own, as on a fresh machine.
  const { DATABASE_URL: _database, TEMPORAL_ADDRESS: _temporal, ...inherited } = process.env;
  const child = spawn(process.execPath, [devScript, 'start'], { env: { ...inherited, ...env } });
  let stdout = '';
  let stderr = '';
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const api = /API:\s+(\S+)\/api\/v1/.exec(stdout);
      const key = /Demo API key:\s+(\S+)/.exec(stdout);
      if (api && key) resolve({ child, apiUrl: `${api[1]}/api/v1`, apiKey: key[1]! });
    });
    child.once('exit', (code) => reject(new Error(`dev start exited with ${code}:\n${stdout}\n${stderr}`)));
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', (code) => resolve(code));
    child.kill('SIGINT');
  });
}

test('npm start runs everything, prints the API, the UI and a key; Ctrl-C stops it; a restart reuses the data', async () => {
  const dataDir = path.join(testEnv().scratch, `dev-start-${randomBytes(4).toString('hex')}`);
  await mkdir(dataDir, { recursive: true });
  const env = {
    SPS_DATA_DIR: dataDir,
    PORT: String(await freePort()),
    SPS_DEV_POSTGRES_PORT: String(await freePort()),
    SPS_DEV_TEMPORAL_PORT: String(await freePort()),
    SPS_DEV_TEMPORAL_UI_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  };
  const first = await start(env);
  const uploads = await fetch(`${first.apiUrl}/uploads`, {
    headers: { authorization: `Bearer ${first.apiKey}` },
  });
  expect(uploads.status).toBe(200);
  const created = await fetch(`${first.apiUrl}/uploads`, {
    method: 'POST',
    headers: { authorization: `Bearer ${first.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ filename: 'kept.svs', fileSize: 1000, contentType: 'image/tiff' }),
  });
  expect(created.status).toBe(200);
  expect(await stop(first.child)).toBe(0);

  const second = await start(env);
  try {
    expect(second.apiKey).toBe(first.apiKey);
    const listed = await fetch(`${second.apiUrl}/uploads`, {
      headers: { authorization: `Bearer ${second.apiKey}` },
    });
    const body = (await listed.json()) as { uploads: { filename: string }[] };
    expect(body.uploads.map((upload) => upload.filename)).toEqual(['kept.svs']);
  } finally {
    expect(await stop(second.child)).toBe(0);
  }
}, 240_000);
