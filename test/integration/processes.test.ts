import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../cli/ports';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testEnv } from '../support/env';
import { sendWhole } from '../support/uploads';

/**
 * The production entry points as separate processes, from the build that `npm test` makes
 * first: migrate, admin, api and worker, wired only by environment variables.
 */
const dist = path.join(__dirname, '..', '..', 'dist', 'cli');
let db: TestDatabase;
let env: Record<string, string>;

function runToEnd(script: string, args: string[], extraEnv: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [path.join(dist, script), ...args], {
      env: { PATH: process.env.PATH ?? '', ...extraEnv },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

beforeAll(async () => {
  if (!existsSync(path.join(dist, 'api.js')))
    throw new Error('dist/ is missing: run the suite with `npm test`');
  db = await createTestDatabase({ empty: true });
  env = {
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: testEnv().temporalAddress,
    TEMPORAL_TASK_QUEUE_PREFIX: `p${randomBytes(4).toString('hex')}`,
    SIGNING_SECRET: randomBytes(24).toString('hex'),
    STORAGE_FS_ROOT: path.join(testEnv().scratch, `objects-${randomBytes(4).toString('hex')}`),
    LOG_LEVEL: 'warn',
  };
});
afterAll(async () => {
  await db?.drop();
});

test('a missing variable stops a production process with a clear message', async () => {
  const result = await runToEnd('api.js', [], {});
  expect(result.code).toBe(1);
  expect(result.stderr).toContain('DATABASE_URL: required');
  expect(result.stderr).toContain('SIGNING_SECRET: required');
  const bad = await runToEnd('api.js', [], { ...env, PORT: 'eighty' });
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/PORT: /);
});

test('migrate, admin, api and worker run apart and together serve an upload to the end', async () => {
  const migrated = await runToEnd('migrate.js', [], env);
  expect(migrated.stdout).toContain('applied: 0001-create-core');
  expect((await runToEnd('migrate.js', [], env)).stdout).toContain('up to date');

  const admin = async (...args: string[]) => JSON.parse((await runToEnd('admin.js', args, env)).stdout);
  const org = await admin('org', 'create', '--name', 'Process Lab', '--credits', '10');
  const user = await admin(
    'user',
    'create',
    '--email',
    'p@lab.org',
    '--org',
    org.organizationId,
    '--role',
    'owner',
  );
  const key = await admin('key', 'create', '--org', org.organizationId, '--user', user.userId);
  const usage = await runToEnd('admin.js', ['org', 'create'], env);
  expect(usage.code).toBe(1);
  expect(usage.stderr).toContain('--name');

  const port = await freePort();
  const api = spawn(process.execPath, [path.join(dist, 'api.js')], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: 'inherit',
  });
  const worker = spawn(process.execPath, [path.join(dist, 'worker.js')], {
    env: { ...process.env, ...env },
    stdio: 'inherit',
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 120; i++) {
      const ready = await fetch(`${base}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const bytes = randomBytes(300_000);
    const created = await fetch(`${base}/api/v1/uploads`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ filename: 'p.svs', fileSize: bytes.length, contentType: 'image/tiff' }),
    });
    const upload = (await created.json()) as { id: string; uploadUrl: string };
    const put = await sendWhole(upload.uploadUrl, bytes);
    expect(put.status).toBe(200);
    // The hash is recorded with the last byte; the worker's part is ingest ending the sample's
    // preparation (these bytes are no slide). Waiting for that end, not for a status other than
    // `deid_running`, keeps the worker from being stopped while it still starts.
    const preparing = ['uploading', 'deid_running', 'preprocessing'];
    let row: { content_sha256: string | null; status: string } | undefined;
    for (let i = 0; i < 300 && (!row || preparing.includes(row.status)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      [row] = await db.sql<{ content_sha256: string | null; status: string }[]>`
        SELECT content_sha256, status FROM samples WHERE id = ${upload.id}`;
    }
    expect(preparing).not.toContain(row?.status);
    expect(row?.content_sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
  } finally {
    api.kill('SIGTERM');
    worker.kill('SIGTERM');
  }
  expect(await exited(api)).toBe(0);
  expect(await exited(worker)).toBe(0);
}, 120_000);
