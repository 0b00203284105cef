import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { writeSyntheticSvs } from '../../bench/synthetic-svs';
import { freePort } from '../../cli/ports';
import type { PyramidRegion } from '../../compute/pyramid';
import { workflowIds } from '../../schemas/temporal';
import { ensureBucket } from '../../storage';
import { type ComposeProcess, composeProcesses } from '../support/compose';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { type MinioServer, startMinio } from '../support/minio';
import { createTenant } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

/**
 * The deployment of docker-compose.yml as separate processes from the build (dist/): MinIO as
 * the object store, then each api and worker service of the file as many times as its
 * replicas (two APIs; one io worker, two compute-and-inference workers), wired only by
 * environment. PostgreSQL and the Temporal dev server are the suite's. Clients talk to both
 * APIs; every kind of job runs; the worker running a prediction is killed and another one
 * finishes it; a job stream on one API follows what the other API causes.
 */
const dist = path.join(__dirname, '..', '..', 'dist', 'cli');
const MINUTE = 60_000;

interface Part {
  name: string;
  child: ChildProcess;
  /** The last lines it printed, to explain a failure. */
  output: string;
  exited: Promise<void>;
}

let minio: MinioServer;
let db: TestDatabase;
let temporal: Client;
let scratch: string;
const parts: Part[] = [];
const apis: string[] = [];
let calls: [ReturnType<typeof apiClient>, ReturnType<typeof apiClient>];
let apiKey: string;

function start(name: string, script: string, env: Record<string, string>): Part {
  const child = spawn(process.execPath, [path.join(dist, script)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const part: Part = {
    name,
    child,
    output: '',
    exited: new Promise((resolve) => child.once('exit', () => resolve())),
  };
  const keep = (chunk: Buffer) => {
    part.output = (part.output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  parts.push(part);
  return part;
}

async function runToEnd(script: string, env: Record<string, string>): Promise<void> {
  const part = start(script, script, env);
  await part.exited;
  if (part.child.exitCode !== 0) throw new Error(`${script} exited ${part.child.exitCode}:\n${part.output}`);
}

async function waitReady(base: string, part: Part): Promise<void> {
  for (let i = 0; i < 480; i++) {
    if (part.child.exitCode !== null) throw new Error(`${part.name} exited:\n${part.output}`);
    const ready = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return;
    await sleep(250);
  }
  throw new Error(`${part.name} was not ready:\n${part.output}`);
}

/** What every process of the deployment shares: docker-compose.yml's x-service-env, here. */
function serviceEnv(): Record<string, string> {
  const bucket = `cluster-${randomBytes(4).toString('hex')}`;
  return {
    PATH: process.env.PATH ?? '',
    TMPDIR: scratch,
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: testEnv().temporalAddress,
    TEMPORAL_NAMESPACE: 'default',
    TEMPORAL_TASK_QUEUE_PREFIX: `c${randomBytes(4).toString('hex')}`,
    STORAGE_BACKEND: 's3',
    S3_ENDPOINT: minio.endpoint,
    S3_BUCKET: bucket,
    S3_REGION: 'us-east-1',
    S3_FORCE_PATH_STYLE: 'true',
    S3_ACCESS_KEY_ID: minio.accessKeyId,
    S3_SECRET_ACCESS_KEY: minio.secretAccessKey,
    SIGNING_SECRET: randomBytes(24).toString('hex'),
    LOG_LEVEL: 'warn',
    // A killed worker's step is retried elsewhere after this silence: the default two minutes
    // would be most of this file's time. Heartbeats go at least every 5 s (the worker's throttle).
    COMPUTE_HEARTBEAT_TIMEOUT_SECONDS: '20',
    // The bundle `npm test` made of the same workflow code; without it each io worker makes one.
    ...(testEnv().workflowBundle ? { WORKFLOW_BUNDLE_PATH: testEnv().workflowBundle! } : {}),
  };
}

async function startService(service: ComposeProcess, shared: Record<string, string>): Promise<void> {
  for (let replica = 1; replica <= service.replicas; replica++) {
    const name = `${service.service}-${replica}`;
    if (service.script === 'worker.js') {
      start(name, service.script, { ...shared, ...service.environment });
      continue;
    }
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      ...shared,
      ...service.environment,
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_BASE_URL: base,
    };
    expect(Object.keys(env)).toEqual(expect.arrayContaining(service.variables));
    const part = start(name, service.script, env);
    await waitReady(base, part);
    apis.push(`${base}/api/v1`);
  }
}

beforeAll(async () => {
  if (!existsSync(path.join(dist, 'worker.js')))
    throw new Error('dist/ is missing: run the suite with `npm test`');
  scratch = await mkdtemp(path.join(testEnv().scratch, 'cluster-'));
  [minio, db] = await Promise.all([startMinio(), createTestDatabase({ empty: true })]);
  temporal = new Client({ connection: await Connection.connect({ address: testEnv().temporalAddress }) });
  const shared = serviceEnv();
  // What minio-init and migrate do before the services start.
  await ensureBucket({
    endpoint: minio.endpoint,
    region: 'us-east-1',
    bucket: shared.S3_BUCKET!,
    accessKeyId: minio.accessKeyId,
    secretAccessKey: minio.secretAccessKey,
    forcePathStyle: true,
  });
  await runToEnd('migrate.js', shared);
  apiKey = (await createTenant(db.sql, { credits: 100_000 })).apiKey;
  const services = composeProcesses();
  expect(services.map((s) => [s.service, s.replicas])).toEqual([
    ['api', 2],
    ['worker', 1],
    ['worker-compute', 2],
  ]);
  for (const service of services) await startService(service, shared);
  calls = [apiClient(apis[0]!, apiKey), apiClient(apis[1]!, apiKey)];
}, 5 * MINUTE);

afterAll(async () => {
  for (const part of parts) if (part.child.exitCode === null) part.child.kill('SIGTERM');
  await Promise.all(parts.map((part) => part.exited));
  await temporal?.connection.close();
  await db?.drop();
  await minio?.stop();
}, MINUTE);

/** Polls `read` through `call` until `done` holds of its answer. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 2400; i++) {
    const value = await read();
    if (done(value)) return value;
    await sleep(250);
  }
  throw new Error(`${what} did not happen in time`);
}

async function readySample(call: ReturnType<typeof apiClient>, sampleId: string) {
  const sample = await until(
    () => call('GET', `/samples/${sampleId}`),
    (answer) => ['ready', 'upload_failed', 'deid_failed', 'preprocess_failed'].includes(answer.json.status),
    `sample ${sampleId} ready`,
  );
  expect(sample.json).toMatchObject({ status: 'ready' });
}

interface Frame {
  event: string;
  data: string;
}

/** The frames of a job's stream until the server ends it. */
async function streamToEnd(api: string, jobId: string): Promise<Frame[]> {
  const response = await fetch(`${api}/jobs/${jobId}/stream`, {
    headers: { authorization: `Bearer ${apiKey}` },
  });
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  return (await response.text())
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const frame = { event: 'message', data: '' };
      for (const line of block.split('\n')) {
        const [field, ...rest] = line.split(': ');
        if (field === 'event') frame.event = rest.join(': ');
        if (field === 'data') frame.data = rest.join(': ');
      }
      return frame;
    });
}

const statusesOf = (frames: Frame[]) =>
  frames.filter((f) => f.event === 'message').map((f) => JSON.parse(f.data).status as string);

/** Kills, with SIGKILL, the worker process that runs `activity` of the workflow once it runs. */
async function killWhileRunning(workflowId: string, activity: string): Promise<Part> {
  const handle = temporal.workflow.getHandle(workflowId);
  const STARTED = 2; // PENDING_ACTIVITY_STATE_STARTED
  const running = await until(
    async () => (await handle.describe()).raw.pendingActivities ?? [],
    (pending) => pending.some((a) => a.activityType?.name === activity && a.state === STARTED),
    `${activity} started`,
  );
  const identity = running.find((a) => a.activityType?.name === activity)!.lastWorkerIdentity!;
  const worker = parts.find((part) => identity.startsWith(`${part.child.pid}@`));
  if (!worker) throw new Error(`${activity} runs on ${identity}, none of this test's processes`);
  worker.child.kill('SIGKILL');
  await worker.exited;
  return worker;
}

/** A synthetic SVS of CMU-1-Small-Region's tiles repeated, in the scratch folder. */
async function syntheticSlide(width: number, height: number): Promise<string> {
  const out = path.join(scratch, `cluster-${width}x${height}.svs`);
  await writeSyntheticSvs({ source: path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'), out, width, height });
  return out;
}

/** The workers that ran the regions of the first stage of a sample's pyramid (rows of level 0). */
async function firstStageWorkers(sampleId: string): Promise<string[]> {
  const events =
    (await temporal.workflow.getHandle(workflowIds.ingest(sampleId)).fetchHistory()).events ?? [];
  const firstStage = events.filter((event) => {
    const attributes = event.activityTaskScheduledEventAttributes;
    if (attributes?.activityType?.name !== 'buildHePyramidRegion') return false;
    const input = attributes.input?.payloads?.[0];
    return (
      input && defaultPayloadConverter.fromPayload<{ region: PyramidRegion }>(input).region.leafLevel === 0
    );
  });
  expect(firstStage).toHaveLength(2);
  const workers = firstStage.map((scheduled) => {
    const started = events.find(
      (e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId) === Number(scheduled.eventId),
    );
    return started?.activityTaskStartedEventAttributes?.identity ?? '';
  });
  return [...new Set(workers)];
}

test(
  'two APIs, three workers: every kind of job runs, a killed worker is taken over, streams follow both APIs',
  async () => {
    const [a, b] = calls;
    // A 6000 px synthetic SVS (CMU-1's tiles repeated) gives the prediction seconds to be killed in.
    const large = await syntheticSlide(6000, 6000);
    // Two pyramid regions of one stage, handed out together, go one to each compute worker.
    const tallId = (await uploadFile(a, await syntheticSlide(8192, 16384))).id;
    await readySample(b, tallId);
    expect(await firstStageWorkers(tallId)).toHaveLength(2);

    // Uploaded through one API, read through the other.
    const small = (await uploadFile(a, path.join(SHARED_WSI, 'OS-1-detail.ome.tif'))).id;
    const big = (await uploadFile(b, large)).id;
    await Promise.all([readySample(b, small), readySample(a, big)]);

    const markers = ((await a('GET', '/markers')).json.markers as { name: string }[]).map((m) => m.name);
    expect(markers).toHaveLength(14);

    // The prediction of the large slide: its worker dies mid-run, the other compute worker finishes it.
    const doomed = await a('POST', '/predict', { uploadId: big, markers });
    expect(doomed.status).toBe(202);
    const doomedJob = doomed.json.jobId as string;
    const killed = await killWhileRunning(workflowIds.prediction(doomedJob), 'predictJob');
    expect(killed.name).toMatch(/^worker-compute-/);

    // Meanwhile the small slide's prediction, submitted on A and followed on B's stream.
    const submitted = await a('POST', '/predict', { uploadId: small, markers: ['DAPI', 'CD3'] });
    expect(submitted.status).toBe(202);
    const jobId = submitted.json.jobId as string;
    const followed = statusesOf(await streamToEnd(apis[1]!, jobId));
    expect(followed.at(-1)).toBe('completed');
    for (const status of ['running', 'postprocessing']) expect(followed).toContain(status);

    // A cancel through B reaches a stream on A.
    const cancelled = await b('POST', '/predict', { uploadId: small, markers: ['DAPI'] });
    const cancelledJob = cancelled.json.jobId as string;
    const cancelStream = streamToEnd(apis[0]!, cancelledJob);
    expect((await b('POST', `/jobs/${cancelledJob}/cancel`)).json).toEqual({
      id: cancelledJob,
      status: 'cancelled',
    });
    expect(statusesOf(await cancelStream).at(-1)).toBe('cancelled');

    // Segmentation asked on B, read on A.
    expect((await b('POST', `/samples/${small}/segmentation`)).status).toBe(202);
    const segmentation = await until(
      () => a('GET', `/samples/${small}/segmentation`),
      (answer) => ['completed', 'failed'].includes(answer.json.status),
      'segmentation',
    );
    expect(segmentation.json).toMatchObject({ status: 'completed' });

    // An export asked on A, fetched through B's answer from the object store.
    const selection = { includeHe: true, includeSegmentation: false, includeOriginalUpload: false };
    expect((await a('POST', `/jobs/${jobId}/exports`, { format: 'ome-tiff', ...selection })).status).toBe(
      202,
    );
    const query = new URLSearchParams({
      format: 'ome-tiff',
      ...Object.fromEntries(Object.entries(selection).map(([k, v]) => [k, String(v)])),
    });
    const exported = await until(
      () => b('GET', `/jobs/${jobId}/exports?${query}`),
      (answer) => ['ready', 'failed'].includes(answer.json.status),
      'export',
    );
    expect(exported.json).toMatchObject({ status: 'ready' });
    const tiff = Buffer.from(
      await (await fetch(exported.json.artifacts.prediction.downloadUrl)).arrayBuffer(),
    );
    expect(tiff.subarray(0, 2).toString('latin1')).toBe('II');

    // The killed worker's prediction: retried on a live worker after the heartbeat timeout (20 s).
    const doomedHandle = temporal.workflow.getHandle(workflowIds.prediction(doomedJob));
    expect(await doomedHandle.result()).toEqual({ status: 'completed' });
    const history = (await doomedHandle.fetchHistory()).events ?? [];
    const scheduled = history.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'predictJob',
    );
    const started = history.find(
      (e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId) === Number(scheduled?.eventId),
    )?.activityTaskStartedEventAttributes;
    // COMPUTE_HEARTBEAT_TIMEOUT_SECONDS, through the API's start of the workflow (its memo).
    expect(Number(scheduled?.activityTaskScheduledEventAttributes?.heartbeatTimeout?.seconds)).toBe(20);
    expect(started?.attempt).toBeGreaterThan(1);
    expect(started?.identity?.split('@')[0]).not.toBe(String(killed.child.pid));
    const results = await b('GET', `/jobs/${doomedJob}/results`);
    expect(results.status).toBe(200);
    expect((await a('GET', `/jobs/${doomedJob}`)).json).toMatchObject({ status: 'completed', markers });
    for (const part of parts.filter((p) => p !== killed && p.name !== 'migrate.js')) {
      expect(`${part.name}: ${part.child.exitCode}`).toBe(`${part.name}: null`);
    }
  },
  12 * MINUTE,
);
