import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import pino from 'pino';
import { type ApiSettings, createApp } from '../../api/app';
import { createWorkflowEngine, type WorkflowEngine } from '../../api/workflow-engine';
import { createOrganizationWithOwner } from '../../cli/admin-commands';
import { closeActivityThreads, type RunningWorkers, startWorkers } from '../../cli/runtime';
import type { Sql } from '../../db';
import { createObjectStore, type ObjectStore } from '../../storage';
import { createTestDatabase, type TestDatabase } from './database';
import { testEnv } from './env';
import {
  cloneSharedSlides,
  type ProcessedSample,
  type SharedSlideName,
  type SharedSlidesClone,
} from './shared-slides';

/**
 * The API's and workers' errors go to SPS_TEST_API_LOG when it is set (`npm test` sets it), for
 * the summary reporter to print every 500; otherwise nowhere. One file handle per process.
 */
let errorLog: pino.DestinationStream | undefined;
function apiLogger() {
  const file = process.env.SPS_TEST_API_LOG;
  if (!file) return pino({ level: 'silent' });
  errorLog ??= pino.destination({ dest: file, append: true, sync: true });
  return pino({ level: 'error' }, errorLog);
}

export interface Tenant {
  organizationId: string;
  userId: string;
  apiKey: string;
  keyId: string;
}

/** An organization with an owner and an API key, made through the admin commands. */
export async function createTenant(
  sql: Sql,
  options: { credits?: number; expirationDays?: number } = {},
): Promise<Tenant> {
  const tag = randomBytes(4).toString('hex');
  return createOrganizationWithOwner(sql, {
    name: `org-${tag}`,
    email: `owner-${tag}@example.com`,
    ...options,
  });
}

export const defaultTestSettings: Omit<ApiSettings, 'publicBaseUrl' | 'appUrl' | 'signingSecret'> = {
  limits: {
    ratePerSecond: 1000,
    rateBurst: 10_000,
    jsonBodyBytes: 64 * 1024,
    uploadMaxBytes: 10 * 1024 ** 3,
    uploadChunkMaxBytes: 64 * 1024 ** 2,
    uploadSessionTtlSeconds: 3600,
  },
};

export interface TestStack {
  baseUrl: string;
  api: string;
  db: TestDatabase;
  sql: Sql;
  store: ObjectStore;
  /** The filesystem store's root folder: a key is a file below it (for external readers). */
  fsRoot: string;
  client: Client;
  workflows: WorkflowEngine;
  taskQueuePrefix: string;
  /** Starts a worker of this stack's queues (for tests that stop and restart workers). */
  startWorker(): Promise<RunningWorkers>;
  /**
   * Starts another API process on this stack's store and workflows (a replica, tighter limits,
   * a broken database): the stack's settings with `settings` over them, and `sql` if given.
   */
  startApi(options: { settings?: Partial<ApiSettings>; sql?: Sql }): Promise<ExtraApi>;
  tenant: Tenant;
  /** The id of a shared slide's sample (`sharedSlides` stacks only). */
  sharedSample(name: SharedSlideName): string;
  /** The segmented and predicted sample (`sharedSlides: 'processed'` stacks only). */
  processedSample(): ProcessedSample;
  signingSecret: string;
  close(): Promise<void>;
}

export interface ExtraApi {
  baseUrl: string;
  /** `${baseUrl}/api/v1`. */
  api: string;
  close(): Promise<void>;
}

function listen(server: Server): Promise<number> {
  // The worker's CPU-bound activities share this process's event loop with the server and the
  // test's own fetch. After a loop stalled past the 5 s keep-alive default, the test's next
  // request and the server's idle-socket timer came due together and the request met a closed
  // socket (ECONNRESET, segmentation-e2e under load). A separate API process has no such stall.
  server.keepAliveTimeout = 120_000;
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : 0);
    }),
  );
}

async function workflowBundle(): Promise<{ code: string }> {
  const prebuilt = testEnv().workflowBundle;
  if (prebuilt) return { code: await readFile(prebuilt, 'utf8') };
  return bundleWorkflowCode({
    workflowsPath: require.resolve('../../workflows'),
    logger: new DefaultLogger('WARN'),
  });
}

/**
 * The timeout of a `beforeAll` that starts a `sharedSlides` stack: it may wait for the run's
 * templates to be built (by itself or another file), which takes minutes on a loaded machine.
 */
export const SHARED_SLIDES_SETUP_MS = 600_000;

export interface StackOptions {
  limits?: Partial<ApiSettings['limits']>;
  worker?: boolean;
  /** Replaces the workflow engine, given the real one (to make it fail, or to observe it). */
  workflows?: (real: WorkflowEngine) => WorkflowEngine;
  /**
   * The stack's tenant owns every slide of SHARED_SLIDES, already ingested to `ready` (once per
   * run, then cloned): `stack.sharedSample(name)` is its sample id. With 'processed', the
   * PROCESSED_SLIDE sample is also segmented and predicted: `stack.processedSample()`.
   * (test/support/shared-slides.ts)
   */
  sharedSlides?: boolean | 'ready' | 'processed';
  /** The store of the API and the workers, in place of the filesystem store under `fsRoot` (an S3 store). */
  store?: ObjectStore;
}

/**
 * The whole service for one test file, on real parts: its own PostgreSQL database, the
 * Temporal dev server (with task queues of its own), a filesystem store, real HTTP.
 */
export async function startStack(options: StackOptions = {}): Promise<TestStack> {
  const root = path.join(testEnv().scratch, `objects-${randomBytes(4).toString('hex')}`);
  if (!options.sharedSlides) return openStack(await createTestDatabase(), root, options);
  const kind = options.sharedSlides === 'processed' ? 'processed' : 'ready';
  const shared = await cloneSharedSlides(
    root,
    (db, buildRoot, tenant) =>
      openStack(
        db,
        buildRoot,
        { worker: true },
        tenant && { db, tenant, samples: {} as SharedSlidesClone['samples'] },
      ),
    kind,
  );
  return openStack(shared.db, root, options, shared);
}

async function openStack(
  db: TestDatabase,
  root: string,
  options: StackOptions,
  shared?: SharedSlidesClone,
): Promise<TestStack> {
  const env = testEnv();
  const server = createServer();
  const port = await listen(server);
  const baseUrl = `http://127.0.0.1:${port}`;
  const signingSecret = randomBytes(32).toString('hex');
  const store =
    options.store ??
    createObjectStore({ backend: 'fs', fs: { root, publicBaseUrl: baseUrl, signingSecret } });
  const connection = await Connection.connect({ address: env.temporalAddress });
  const client = new Client({ connection });
  const taskQueuePrefix = `t${randomBytes(4).toString('hex')}`;
  const realEngine = createWorkflowEngine(client, { taskQueuePrefix });
  const workflows = options.workflows ? options.workflows(realEngine) : realEngine;
  const app = createApp({
    sql: db.sql,
    store,
    workflows,
    logger: apiLogger(),
    settings: {
      publicBaseUrl: baseUrl,
      appUrl: 'https://app.example.test',
      signingSecret,
      limits: { ...defaultTestSettings.limits, ...options.limits },
    },
  });
  server.on('request', app);
  const startApi = async (extra: { settings?: Partial<ApiSettings>; sql?: Sql }): Promise<ExtraApi> => {
    const other = createServer(
      createApp({
        sql: extra.sql ?? db.sql,
        store,
        workflows,
        logger: apiLogger(),
        settings: {
          ...defaultTestSettings,
          publicBaseUrl: baseUrl,
          appUrl: 'https://app.example.test',
          signingSecret,
          ...extra.settings,
        },
      }),
    );
    const otherUrl = `http://127.0.0.1:${await listen(other)}`;
    return {
      baseUrl: otherUrl,
      api: `${otherUrl}/api/v1`,
      async close() {
        other.closeAllConnections();
        await new Promise((resolve) => other.close(resolve));
      },
    };
  };
  const startWorker = async () =>
    startWorkers({
      address: env.temporalAddress,
      namespace: 'default',
      taskQueuePrefix,
      sql: db.sql,
      store,
      workflowBundle: await workflowBundle(),
      logger: apiLogger(),
      // A stopped worker's retry resumes from the last heartbeat the server has: the resume
      // tests stop a worker at one, on slides predicted in a few seconds.
      maxHeartbeatThrottleMs: 200,
    });
  const workers: RunningWorkers | undefined = options.worker ? await startWorker() : undefined;
  const tenant = shared?.tenant ?? (await createTenant(db.sql, { credits: 1000 }));
  return {
    baseUrl,
    api: `${baseUrl}/api/v1`,
    db,
    sql: db.sql,
    store,
    fsRoot: root,
    client,
    workflows,
    taskQueuePrefix,
    startWorker,
    startApi,
    tenant,
    sharedSample(name) {
      if (!shared) throw new Error('sharedSample: start the stack with { sharedSlides: true }');
      return shared.samples[name];
    },
    processedSample() {
      if (!shared?.processed)
        throw new Error("processedSample: start the stack with { sharedSlides: 'processed' }");
      return shared.processed;
    },
    signingSecret,
    async close() {
      await workers?.shutdown();
      // The model sessions and segmentation threads this file's workers opened (module state of
      // this file's registry): left open, Jest's worker process ends the run with them.
      await closeActivityThreads();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await connection.close();
      await db.drop();
    },
  };
}
