import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Client,
  Connection,
  isGrpcServiceError,
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  type ScheduleOptions,
  ScheduleOverlapPolicy,
  WorkflowNotFoundError,
} from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type WorkerOptions,
} from '@temporalio/worker';
import pino, { type Logger } from 'pino';
import { createActivities } from '../activities';
import { createApp } from '../api/app';
import { createApiServer } from '../api/slow-clients';
import { createWorkflowEngine, isEngineUnavailable, searchAttributes } from '../api/workflow-engine';
import { closeModelSessions } from '../compute/prediction';
import { closeClassicalThreads } from '../compute/segmentation';
import type { Sql } from '../db';
import {
  searchAttributeNames,
  type TaskQueueKind,
  taskQueueKinds,
  taskQueueName,
  UPKEEP_MAINTENANCE,
  type WorkflowSettingsMemo,
  workflowIds,
} from '../schemas/temporal';
import { createObjectStore, type ObjectStore } from '../storage';
import { type Config, WORKER_SLOT_DEFAULTS } from './config';
import { spreadingSlots } from './spread-slots';

export function createLogger(config: Pick<Config, 'logLevel'>, name: string): Logger {
  return pino({ name, level: config.logLevel });
}

/**
 * The signing secret: configured in production; in development generated once and kept in
 * the data directory, so links and sessions survive a restart.
 */
export async function resolveSigningSecret(config: Config): Promise<string> {
  if (config.signingSecret) return config.signingSecret;
  const file = path.join(config.dataDir, 'signing-secret');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(config.dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  await writeFile(file, secret, { mode: 0o600 });
  return secret;
}

export function createStore(config: Config, signingSecret: string): ObjectStore {
  if (config.storage.backend === 's3') return createObjectStore({ backend: 's3', s3: config.storage });
  return createObjectStore({
    backend: 'fs',
    fs: { root: config.storage.root, publicBaseUrl: config.http.publicBaseUrl, signingSecret },
  });
}

export async function connectClient(config: Config & { temporal: { address: string } }): Promise<Client> {
  const connection = await Connection.connect({ address: config.temporal.address });
  return new Client({ connection, namespace: config.temporal.namespace });
}

/** Bundles the workflow code once per process (or loads a bundle prebuilt by `npm run build`). */
export async function loadWorkflowBundle(prebuiltPath?: string): Promise<{ code: string }> {
  if (prebuiltPath && existsSync(prebuiltPath)) return { code: await readFile(prebuiltPath, 'utf8') };
  return bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    logger: new DefaultLogger('WARN'),
  });
}

/** How long a task a worker started keeps its next slot closed (spreadingSlots). */
const SLOT_SETTLE_MS = 250;

/**
 * The slots of one queue's worker. The compute and inference queues' tasks are long (regions,
 * bands) and are handed out to idle workers first (spreadingSlots, one poll at a time); the io
 * queue's are short and many, taken as fast as they come.
 */
function slotOptions(kind: TaskQueueKind, slots: number): Partial<WorkerOptions> {
  if (kind === 'io') return { maxConcurrentActivityTaskExecutions: slots };
  return {
    maxConcurrentActivityTaskPolls: 1,
    tuner: {
      activityTaskSlotSupplier: spreadingSlots(slots, SLOT_SETTLE_MS),
      // An activity-only worker polls no workflow tasks; the SDK still wants their suppliers.
      workflowTaskSlotSupplier: { type: 'fixed-size', numSlots: 1 },
      localActivityTaskSlotSupplier: { type: 'fixed-size', numSlots: 1 },
      nexusTaskSlotSupplier: { type: 'fixed-size', numSlots: 1 },
    },
  };
}

let temporalRuntimeInstalled = false;

/**
 * The SDK's warning for a worker given no workflows: the compute and inference queues' workers
 * run activities only, by design.
 */
const ACTIVITY_ONLY_WORKER = 'No workflows registered, not polling for workflow tasks';

/** Sends the Temporal SDK's own warnings and errors to our logger (once per process). */
function installTemporalRuntime(logger: Logger): void {
  if (temporalRuntimeInstalled) return;
  temporalRuntimeInstalled = true;
  Runtime.install({
    logger: new DefaultLogger('WARN', (entry) => {
      const level =
        entry.message === ACTIVITY_ONLY_WORKER ? 'debug' : entry.level === 'ERROR' ? 'error' : 'warn';
      logger[level]({ ...entry.meta, sdk: 'temporal' }, entry.message);
    }),
  });
}

/**
 * The Schedules: expired samples into Trash every 15 minutes, samples past the 7-day Trash
 * window purged every hour, and the reconcilers (`maintenanceWorkflow`) every 5 minutes (or
 * `MAINTENANCE_INTERVAL_SECONDS`). Their
 * workflows carry `Upkeep = maintenance`, so that operators list jobs without them
 * (docs/operations.md). Every worker may call it: a Schedule that exists is brought to this
 * definition, and the per-reconciler Schedules of earlier versions are deleted.
 */
export async function ensureSchedules(
  client: Client,
  taskQueuePrefix: string,
  maintenanceIntervalSeconds = 300,
): Promise<void> {
  const taskQueue = taskQueueName(taskQueuePrefix, 'io');
  const idOf = (id: string) => (taskQueuePrefix === '' ? id : `${taskQueuePrefix}-${id}`);
  const schedules = [
    { id: workflowIds.retentionSweep, workflowType: 'retentionSweepWorkflow', every: '15 minutes' },
    { id: workflowIds.trashPurge, workflowType: 'trashPurgeWorkflow', every: '1 hour' },
    {
      id: workflowIds.maintenance,
      workflowType: 'maintenanceWorkflow',
      every: `${maintenanceIntervalSeconds}s`,
    },
  ] as const;
  for (const schedule of schedules) {
    const definition = {
      spec: { intervals: [{ every: schedule.every }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action: {
        type: 'startWorkflow' as const,
        workflowType: schedule.workflowType,
        taskQueue,
        args: [{}],
        typedSearchAttributes: [{ key: searchAttributes.upkeep, value: UPKEEP_MAINTENANCE }],
      },
    };
    await ensureSchedule(client, idOf(schedule.id), definition);
  }
  for (const retired of RETIRED_SCHEDULES) {
    try {
      await client.schedule.getHandle(idOf(retired)).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
    await terminateRetiredRuns(client, idOf(retired));
  }
}

/**
 * Ends the runs a retired Schedule started that are still open: their workflow type is gone
 * from the bundle, so every task they get fails and they would stay running for ever.
 */
async function terminateRetiredRuns(client: Client, scheduleId: string): Promise<void> {
  const query = `TemporalScheduledById = '${scheduleId}' AND ExecutionStatus = 'Running'`;
  for await (const run of client.workflow.list({ query })) {
    try {
      await client.workflow
        .getHandle(run.workflowId, run.runId)
        .terminate(`its Schedule ${scheduleId} is retired`);
    } catch (err) {
      // Closed since it was listed.
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
}

/** Half a minute of attempts, a second apart, while the server cannot answer yet. */
const SCHEDULE_ATTEMPTS = 30;
const SCHEDULE_RETRY_MS = 1000;

/**
 * Creates the Schedule, or brings the existing one to `definition`. A server not reachable yet,
 * or one just restarted that cannot describe a Schedule yet (describing asks the Schedule's
 * workflow, which it may not be running yet), answers UNAVAILABLE or DEADLINE_EXCEEDED: such
 * a failure is retried for half a minute. Any other (a missing namespace, a refused
 * definition) will not go away by waiting, so it fails at once, naming the Schedule.
 */
async function ensureSchedule(
  client: Client,
  scheduleId: string,
  definition: Omit<ScheduleOptions, 'scheduleId'>,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await createOrUpdateSchedule(client, scheduleId, definition);
      return;
    } catch (err) {
      if (!isEngineUnavailable(err) || attempt === SCHEDULE_ATTEMPTS) {
        throw new Error(`could not create or update the Schedule ${scheduleId}: ${reasonOf(err)}`, {
          cause: err,
        });
      }
      await sleep(SCHEDULE_RETRY_MS);
    }
  }
}

async function createOrUpdateSchedule(
  client: Client,
  scheduleId: string,
  definition: Omit<ScheduleOptions, 'scheduleId'>,
): Promise<void> {
  try {
    await client.schedule.create({ scheduleId, ...definition });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, ...definition }));
  }
}

/** The client's message ("Failed to describe schedule") with the server's answer under it. */
function reasonOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
}

/** The one-minute Schedule of each reconciler, before `maintenance` took them over. */
const RETIRED_SCHEDULES = ['prediction-reconciler', 'segmentation-reconciler', 'export-reconciler'];

/** `temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD`; the proto enum is not re-exported. */
const INDEXED_VALUE_TYPE_KEYWORD = 2;
/** gRPC ALREADY_EXISTS. */
const GRPC_ALREADY_EXISTS = 6;

/**
 * Registers our search attributes in the namespace (the dev server gets them at start, an
 * external server here). Every worker may call it: an attribute that exists is left alone.
 */
export async function ensureSearchAttributes(client: Client, namespace: string): Promise<void> {
  const { customAttributes } = await client.connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.values(searchAttributeNames).filter((name) => !(name in (customAttributes ?? {})));
  if (missing.length === 0) return;
  try {
    await client.connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((name) => [name, INDEXED_VALUE_TYPE_KEYWORD])),
    });
  } catch (err) {
    // Another worker registered them between the list and the add.
    if (!(isGrpcServiceError(err) && err.code === GRPC_ALREADY_EXISTS)) throw err;
  }
}

/**
 * Ends the threads this process's activities keep for the next job (model sessions,
 * segmentation's pool), once its workers have shut down: a worker process that stops, `npm
 * start` stopping, a test file that is done. The next activity opens them afresh.
 */
export async function closeActivityThreads(): Promise<void> {
  await closeModelSessions();
  await closeClassicalThreads();
}

export interface RunningWorkers {
  shutdown(): Promise<void>;
  done: Promise<void>;
}

/**
 * One worker per task queue polled, all in this process, sharing one connection. Workflows
 * start on `io` only, so only the `io` worker runs workflow code (and needs the bundle).
 */
export async function startWorkers(options: {
  address: string;
  namespace: string;
  taskQueuePrefix: string;
  sql: Sql;
  store: ObjectStore;
  /** Required when `queues` includes `io`. */
  workflowBundle?: { code: string };
  logger: Logger;
  /** The queues to poll (WORKER_QUEUES); default every one. */
  queues?: readonly TaskQueueKind[];
  /** Activity slots per queue (WORKER_*_CONCURRENCY); default WORKER_SLOT_DEFAULTS. */
  slots?: Readonly<Record<TaskQueueKind, number>>;
  /** JPEG quality of the H&E in OME-TIFF exports (EXPORT_JPEG_QUALITY); default 90. */
  exportJpegQuality?: number;
  /** Activities of one job run at once (PYRAMID_REGIONS_PER_JOB, SEGMENTATION_BANDS_PER_JOB, PREDICTION_BANDS_PER_JOB). */
  fanOut?: { pyramidRegions: number; segmentationBands: number; predictionBands: number };
  /**
   * The longest an activity's heartbeat waits to be sent (default 5 s): what a crash can lose.
   * Tests that stop a worker at a heartbeat use less, as their slides are done in seconds.
   */
  maxHeartbeatThrottleMs?: number;
  /** What the workflows these workers start are told of the deployment (Config.workflowSettings). */
  workflowSettings?: WorkflowSettingsMemo;
}): Promise<RunningWorkers> {
  const queues = options.queues ?? taskQueueKinds;
  const slots = options.slots ?? WORKER_SLOT_DEFAULTS;
  if (queues.includes('io') && !options.workflowBundle)
    throw new Error('the io queue needs a workflow bundle');
  installTemporalRuntime(options.logger);
  const connection = await NativeConnection.connect({ address: options.address });
  // The reconciler's activity starts prediction workflows, as the API does.
  const clientConnection = await Connection.connect({ address: options.address });
  const engine = createWorkflowEngine(
    new Client({ connection: clientConnection, namespace: options.namespace }),
    { taskQueuePrefix: options.taskQueuePrefix, settings: options.workflowSettings },
  );
  const activities = createActivities({
    sql: options.sql,
    store: options.store,
    startPrediction: engine.startPrediction,
    startSegmentation: engine.startSegmentation,
    startSegmentationMarkers: engine.startSegmentationMarkers,
    startExport: engine.startExport,
    workflowState: engine.workflowState,
    exportJpegQuality: options.exportJpegQuality,
    pyramidRegionsInFlight: options.fanOut?.pyramidRegions,
    segmentationBandsInFlight: options.fanOut?.segmentationBands,
    predictionBandsInFlight: options.fanOut?.predictionBands,
  });
  const workers = await Promise.all(
    queues.map((kind) =>
      Worker.create({
        connection,
        namespace: options.namespace,
        taskQueue: taskQueueName(options.taskQueuePrefix, kind),
        ...(kind === 'io' ? { workflowBundle: options.workflowBundle } : {}),
        activities,
        ...slotOptions(kind, slots[kind]),
        // Cancels reach an activity with a heartbeat's answer, and a retry resumes from the last
        // heartbeat that reached the server: send them often (the SDK's default waits up to 60 s).
        defaultHeartbeatThrottleInterval: Math.min(1000, options.maxHeartbeatThrottleMs ?? 5000),
        maxHeartbeatThrottleInterval: options.maxHeartbeatThrottleMs ?? 5000,
      }),
    ),
  );
  const done = Promise.all(workers.map((worker) => worker.run())).then(async () => {
    await connection.close();
    await clientConnection.close();
  });
  return {
    done,
    async shutdown() {
      for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}

/** How long shutdown waits for requests in flight before closing job streams and the rest. */
const STREAM_DRAIN_MS = 2000;

export interface RunningApi {
  server: Server;
  url: string;
  close(): Promise<void>;
}

export async function startApi(options: {
  config: Config;
  sql: Sql;
  store: ObjectStore;
  client: Client;
  signingSecret: string;
  logger: Logger;
}): Promise<RunningApi> {
  const { config } = options;
  const app = createApp({
    sql: options.sql,
    store: options.store,
    logger: options.logger,
    workflows: createWorkflowEngine(options.client, {
      taskQueuePrefix: config.temporal.taskQueuePrefix,
      settings: config.workflowSettings,
    }),
    settings: {
      publicBaseUrl: config.http.publicBaseUrl,
      appUrl: config.http.appUrl,
      signingSecret: options.signingSecret,
      oauth: config.oauth,
      metricsToken: config.metricsToken,
      limits: config.limits,
    },
  });
  const server = createApiServer(app, config.limits, options.logger);
  await new Promise<void>((resolve) => server.listen(config.http.port, config.http.host, resolve));
  return {
    server,
    url: config.http.publicBaseUrl,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        // Job streams never go idle: give requests in flight a moment, then cut what is left
        // (a stream's client reconnects elsewhere with Last-Event-ID and misses nothing).
        setTimeout(() => server.closeAllConnections(), STREAM_DRAIN_MS).unref();
      }),
  };
}
