import { type ChildProcess, spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import postgres from 'postgres';
import { WORKER_SLOT_DEFAULTS } from '../cli/config';
import { freePort } from '../cli/ports';
import type { PyramidRegion } from '../compute/pyramid';
import { markerCatalog } from '../models/registry';
import { workflowIds } from '../schemas/temporal';
import { startMinioBucket } from '../test/support/minio-bucket';
import { waitReady } from './api-process';
import { median, processCpuSeconds } from './cpu';
import { slideSize, writeSyntheticSvs } from './synthetic-svs';
import { putChunk } from './upload-protocol';

/**
 * Wall time of one slide's ingest and of its prediction (every marker) as separate worker
 * processes are added: the API and N processes of `dist/cli/worker.js` (each polling every
 * queue, default slots) from this build, for each N of --workers, and with --reference DIR one
 * worker of another checkout's build (today's main) in the same run. A step's time is its
 * workflow's, from start to close on the Temporal server. The speed-up of N workers is set
 * against the ideal min(N, cores) and the target 0.8 of it; with --rounds R each setup runs R
 * times, the order alternating, and the medians are compared. A job's bands and pyramid regions
 * run up to max(4, N x the slots of their queue) at once (`fanOut`).
 *   npm run bench:scale [-- --size 50000|WxH --workers 1,2 --reference ../sps-main --rounds 1
 *     --steps ingest,predict --profile --auto-segment --storage fs|s3 --logs DIR --cpu-prof DIR
 *     --worker-cores K]
 *
 * --steps ingest measures ingest alone; --profile prints each ingest activity's queue wait and
 * run time from the history (pyramid regions by stage).
 * The slide is uploaded without auto-segmentation, so that the prediction has the workers to
 * itself, as the in-process bench/inference has its process; `--auto-segment` uploads it with
 * the service's default (segmentation starts once ingest ends, beside the prediction).
 * `--storage s3` keeps the objects in a MinIO started for the run (the S3 backend, as
 * docker-compose.yml runs it) instead of a folder.
 * Each prediction also prints its activities as the Temporal history has them (queued, ran, by
 * band) and the CPU seconds its worker processes spent on it (all threads): where the time of a
 * band goes. `--logs DIR` keeps each worker's log; `--cpu-prof DIR` runs the workers with
 * `node --cpu-prof` into DIR (their main threads: the activities').
 * `--worker-cores K` runs each worker process on K cores of its own (`taskset`), as N hosts of K
 * cores would run them, the reference's too: one unpinned worker already keeps several cores
 * busy, so unpinned workers on one machine can add only the cores it leaves idle.
 */
const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '50000' },
    workers: { type: 'string', default: '1,2' },
    reference: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    steps: { type: 'string', default: 'ingest,predict' },
    profile: { type: 'boolean', default: false },
    'auto-segment': { type: 'boolean', default: false },
    storage: { type: 'string', default: 'fs' },
    logs: { type: 'string' },
    'cpu-prof': { type: 'string' },
    'worker-cores': { type: 'string' },
  },
});
const steps = new Set(values.steps.split(',').map((step) => step.trim()));
if (!steps.has('ingest') || [...steps].some((step) => step !== 'ingest' && step !== 'predict'))
  throw new Error(
    `--steps is ingest or ingest,predict (prediction needs an ingested slide), not ${values.steps}`,
  );
const [width, height] = slideSize(values.size);
const workerCounts = values.workers.split(',').map(Number);
const workerCores = values['worker-cores'] === undefined ? undefined : Number(values['worker-cores']);
if (workerCores !== undefined) {
  if (!Number.isInteger(workerCores) || workerCores < 1)
    throw new RangeError(`--worker-cores ${values['worker-cores']}: a whole number of cores`);
  const most = Math.max(...workerCounts);
  if (most * workerCores > availableParallelism())
    throw new RangeError(
      `--worker-cores ${workerCores} with ${most} workers needs ${most * workerCores} cores; this machine has ${availableParallelism()}`,
    );
}
const MiB = 1024 * 1024;
const CHUNK_BYTES = 256 * MiB;
const scratch = process.env.SPS_TEST_SCRATCH!;
const temporalAddress = process.env.TEST_TEMPORAL_ADDRESS!;

interface Setup {
  label: string;
  /** The `dist` folder whose api.js and worker.js run. */
  dist: string;
  workers: number;
}

interface Result extends Setup {
  ingestSeconds: number;
  /**
   * CPU seconds the worker processes spent from the upload to the end of ingest: over
   * `ingestSeconds`, the cores ingest kept busy (a share of the machine's, under others' load).
   */
  ingestCpuSeconds: number;
  predictionSeconds: number;
  /** CPU seconds of the worker processes during the prediction. */
  predictionCpuSeconds: number;
  /** The 1-minute load average before the upload and after the prediction: others' work beside it. */
  load: [number, number];
}

/**
 * A job's activities at once (bands, pyramid regions), as an operator of N workers sets them
 * (docs/operations.md): every slot of their queue on the N workers. Fewer would leave slots free
 * and Temporal hands a task to any free slot, so two of one job's regions could share a worker
 * while another stands idle. Set in the bench's environment, they win.
 */
function fanOut(workers: number): Record<string, string> {
  const slots = (queue: 'compute' | 'inference') =>
    Number(process.env[`WORKER_${queue.toUpperCase()}_CONCURRENCY`] ?? WORKER_SLOT_DEFAULTS[queue]);
  const atOnce = {
    PREDICTION_BANDS_PER_JOB: workers * slots('inference'),
    PYRAMID_REGIONS_PER_JOB: workers * slots('compute'),
    SEGMENTATION_BANDS_PER_JOB: workers * slots('compute'),
  };
  return Object.fromEntries(
    Object.entries(atOnce).map(([name, n]) => [name, process.env[name] ?? String(Math.max(4, n))]),
  );
}

/**
 * Runs `script` in a Node process of its own; on `cores` (a `taskset` list such as `2-3`) when
 * given. taskset replaces itself with Node (exec), so the child's pid is Node's.
 */
function startNode(
  script: string,
  env: Record<string, string>,
  nodeArgs: string[] = [],
  cores?: string,
): ChildProcess {
  const command = [process.execPath, ...nodeArgs, script];
  const [file, ...args] = cores === undefined ? command : ['taskset', '--cpu-list', cores, ...command];
  return spawn(file!, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
}

/** The cores of worker `k` under `--worker-cores`: the k-th run of K cores. */
function coresOfWorker(k: number): string | undefined {
  if (workerCores === undefined) return undefined;
  return `${k * workerCores}-${(k + 1) * workerCores - 1}`;
}

/** Resolves once the worker logged that it polls (its workflow bundle is made by then). */
function polling(worker: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    worker.stdout?.on('data', (chunk: Buffer) => {
      seen = (seen + chunk.toString()).slice(-10_000);
      if (seen.includes('"worker polling"')) resolve();
    });
    worker.once('exit', (code) => reject(new Error(`a worker exited (${code}) before it polled`)));
  });
}

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        }),
    ),
  );
}

/** CPU seconds (user and system, every thread) of running children so far. */
function cpuSecondsOf(children: ChildProcess[]): number {
  return children.reduce((sum, child) => sum + processCpuSeconds(child.pid!), 0);
}

/** Each worker's stdout (its log) into DIR/worker-N.log. */
async function keepLogs(workers: ChildProcess[], dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [k, worker] of workers.entries()) {
    worker.stdout?.pipe(createWriteStream(path.join(dir, `worker-${k}.log`)));
  }
}

/** One activity of a workflow, as its history has it (milliseconds after the workflow's start). */
interface ActivityRun {
  /** Its name, with its band (`predictBand band 2`) or pyramid stage (`buildHePyramidRegion 0-1`). */
  label: string;
  scheduled: number;
  started: number;
  closed: number;
  attempt: number;
  lastFailure?: string;
  /** Which worker process ran it (`worker 3`), from the identity it polled with (`pid@host`). */
  worker?: string;
}

/**
 * Every closed activity of the workflow, from its history, in the order they closed; `workers`
 * name the processes that ran them.
 */
async function activityHistory(
  client: Client,
  workflowId: string,
  workers: ChildProcess[],
): Promise<ActivityRun[]> {
  const workerOf = (identity: string | null | undefined) => {
    const k = workers.findIndex((worker) => identity?.startsWith(`${worker.pid}@`));
    return k < 0 ? identity || undefined : `worker ${k}`;
  };
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const at = (event: (typeof events)[number]) =>
    Number(event.eventTime?.seconds ?? 0) * 1000 + (event.eventTime?.nanos ?? 0) / 1e6;
  const start = at(events[0]!);
  const open = new Map<string, Omit<ActivityRun, 'closed'>>();
  const runs: ActivityRun[] = [];
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const time = at(event) - start;
      const label = activityLabel(scheduled);
      open.set(String(event.eventId), { label, scheduled: time, started: time, attempt: 1 });
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      // Written once the activity closes, for its last attempt: an earlier one's failure is here.
      Object.assign(open.get(String(started.scheduledEventId))!, {
        started: at(event) - start,
        attempt: started.attempt ?? 1,
        lastFailure: started.lastFailure?.message ?? undefined,
        worker: workerOf(started.identity),
      });
    }
    const closed =
      event.activityTaskCompletedEventAttributes ??
      event.activityTaskFailedEventAttributes ??
      event.activityTaskTimedOutEventAttributes ??
      event.activityTaskCanceledEventAttributes;
    if (closed) runs.push({ ...open.get(String(closed.scheduledEventId))!, closed: at(event) - start });
  }
  return runs;
}

/** An activity's name, with its band or its pyramid region's stage, from its input. */
function activityLabel(scheduled: {
  activityType?: { name?: string | null } | null;
  input?: { payloads?: { data?: Uint8Array | null }[] | null } | null;
}): string {
  const name = scheduled.activityType?.name ?? '?';
  const data = scheduled.input?.payloads?.[0]?.data;
  const input = data
    ? (JSON.parse(Buffer.from(data).toString()) as { band?: number; region?: PyramidRegion })
    : {};
  if (input.region) return `${name} ${input.region.leafLevel}-${input.region.topLevel}`;
  return input.band === undefined ? name : `${name} band ${input.band}`;
}

/** A line per activity: when it was scheduled, how long it waited for a worker and ran, and where. */
function printTimeline(runs: ActivityRun[]): void {
  const seconds = (ms: number) => (ms / 1000).toFixed(1);
  for (const run of runs) {
    const retried = run.attempt > 1 ? ` (attempt ${run.attempt}; the last failed: ${run.lastFailure})` : '';
    console.log(
      `  ${run.label}: at ${seconds(run.scheduled)} s, waited ${seconds(run.started - run.scheduled)} s, ran ${seconds(run.closed - run.started)} s on ${run.worker ?? '?'}${retried}`,
    );
  }
}

/**
 * Every activity by label: how many ran, when the first was scheduled and the last closed, the
 * seconds they waited for a worker and ran, summed: where the serial part of the workflow is.
 */
function printProfile(runs: ActivityRun[]): void {
  const byLabel = new Map<
    string,
    { count: number; first: number; last: number; wait: number; run: number; workers: Map<string, number> }
  >();
  for (const run of runs) {
    const label = run.label.replace(/ band \d+$/, '');
    const row = byLabel.get(label) ?? {
      count: 0,
      first: run.scheduled,
      last: run.closed,
      wait: 0,
      run: 0,
      workers: new Map<string, number>(),
    };
    row.count += 1;
    const worker = run.worker ?? '?';
    row.workers.set(worker, (row.workers.get(worker) ?? 0) + 1);
    row.first = Math.min(row.first, run.scheduled);
    row.last = Math.max(row.last, run.closed);
    row.wait += run.started - run.scheduled;
    row.run += run.closed - run.started;
    byLabel.set(label, row);
  }
  const seconds = (ms: number, width: number) => (ms / 1000).toFixed(1).padStart(width);
  // `worker 3` ran two of them: `3x2`.
  const ranBy = (workers: Map<string, number>) =>
    [...workers]
      .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
      .map(([worker, count]) => `${worker.replace(/^worker /, '')}${count > 1 ? `x${count}` : ''}`)
      .join(' ');
  console.log('  activity, count, from s, to s, waited s, ran s (summed), workers that ran them');
  for (const [label, row] of byLabel)
    console.log(
      `  ${label.padEnd(28)} ${String(row.count).padStart(4)} ${seconds(row.first, 7)} ${seconds(row.last, 7)} ${seconds(row.wait, 7)} ${seconds(row.run, 7)}    ${ranBy(row.workers)}`,
    );
}

/** Uploads `file` through the resumable protocol; answers the sample's id. */
async function upload(base: string, apiKey: string, file: string): Promise<string> {
  const total = (await stat(file)).size;
  const created = await fetch(`${base}/api/v1/uploads`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      filename: path.basename(file),
      fileSize: total,
      contentType: 'image/tiff',
      autoSegment: values['auto-segment'],
    }),
  });
  if (!created.ok) throw new Error(`POST /uploads answered ${created.status}: ${await created.text()}`);
  const { id, uploadUrl } = (await created.json()) as { id: string; uploadUrl: string };
  for (let start = 0; start < total; start += CHUNK_BYTES) {
    const length = Math.min(CHUNK_BYTES, total - start);
    const body = createReadStream(file, { start, end: start + length - 1 });
    const status = await putChunk(uploadUrl, start, length, total, body);
    if (status !== 200 && status !== 308) throw new Error(`chunk at ${start} answered ${status}`);
  }
  return id;
}

/** Waits for the workflow to close; answers its wall time on the server, start to close. */
async function workflowSeconds(client: Client, workflowId: string): Promise<number> {
  const handle = client.workflow.getHandle(workflowId);
  for (;;) {
    try {
      await handle.result();
      break;
    } catch (err) {
      // Not started yet (an ingest starts once the upload's last chunk is in).
      if ((err as Error).name !== 'WorkflowNotFoundError') throw err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  const description = await handle.describe();
  return (description.closeTime!.getTime() - description.startTime.getTime()) / 1000;
}

async function measure(
  setup: Setup,
  index: number,
  context: {
    databaseUrl: string;
    apiKey: string;
    slide: string;
    markers: string[];
    client: Client;
    storage: Record<string, string>;
  },
): Promise<Result> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = {
    DATABASE_URL: context.databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_TASK_QUEUE_PREFIX: `scale${index}`,
    SIGNING_SECRET: 's'.repeat(40),
    ...context.storage,
    UPLOAD_MAX_BYTES: String(64 * 1024 * MiB),
    LOG_LEVEL: 'info',
    ...fanOut(setup.workers),
  };
  const api = startNode(path.join(setup.dist, 'cli', 'api.js'), {
    ...env,
    PORT: String(port),
    LOG_LEVEL: 'warn',
  });
  const cpuProf = values['cpu-prof']
    ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(values['cpu-prof'])}`]
    : [];
  const workers = Array.from({ length: setup.workers }, (_, k) =>
    startNode(path.join(setup.dist, 'cli', 'worker.js'), env, cpuProf, coresOfWorker(k)),
  );
  if (values.logs) await keepLogs(workers, path.join(values.logs, `setup-${index}`));
  try {
    await Promise.all([waitReady(base), ...workers.map(polling)]);
    const loadBefore = loadavg()[0]!;
    const cpuBefore = cpuSecondsOf(workers);
    const sampleId = await upload(base, context.apiKey, context.slide);
    const ingestSeconds = await workflowSeconds(context.client, workflowIds.ingest(sampleId));
    const ingestCpuSeconds = cpuSecondsOf(workers) - cpuBefore;
    if (values.profile) {
      console.log(`${setup.label}: ingest ${ingestSeconds.toFixed(1)} s`);
      printProfile(await activityHistory(context.client, workflowIds.ingest(sampleId), workers));
    }
    const prediction = steps.has('predict')
      ? await predict(base, context.apiKey, sampleId, { ...context, setup, workers })
      : { seconds: Number.NaN, cpu: Number.NaN };
    const result: Result = {
      ...setup,
      ingestSeconds,
      ingestCpuSeconds,
      predictionSeconds: prediction.seconds,
      predictionCpuSeconds: prediction.cpu,
      load: [loadBefore, loadavg()[0]!],
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await stop([api, ...workers]);
  }
}

/** The object store's environment for every process: a folder, or a MinIO bucket (`--storage s3`). */
async function objectStorage(): Promise<{
  storage: Record<string, string>;
  stopStorage: () => Promise<void>;
}> {
  if (values.storage === 'fs') {
    return { storage: { STORAGE_FS_ROOT: path.join(scratch, 'objects') }, stopStorage: async () => {} };
  }
  if (values.storage !== 's3') throw new RangeError(`--storage ${values.storage}: fs or s3`);
  const bucket = await startMinioBucket('bench-scale');
  return { storage: bucket.environment, stopStorage: bucket.stop };
}

/**
 * Submits a prediction of every marker and answers its workflow's seconds; prints the workers'
 * CPU seconds and the activities' timeline.
 */
async function predict(
  base: string,
  apiKey: string,
  sampleId: string,
  context: { markers: string[]; client: Client; setup: Setup; workers: ChildProcess[] },
): Promise<{ seconds: number; cpu: number }> {
  const submitted = await fetch(`${base}/api/v1/predict`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ uploadId: sampleId, markers: context.markers }),
  });
  const { jobId, status } = (await submitted.json()) as { jobId: string; status: string };
  if (submitted.status !== 202) throw new Error(`POST /predict answered ${submitted.status} ${status}`);
  const cpuBefore = cpuSecondsOf(context.workers);
  const seconds = await workflowSeconds(context.client, workflowIds.prediction(jobId));
  const cpu = cpuSecondsOf(context.workers) - cpuBefore;
  console.log(`${context.setup.label}: prediction ${seconds.toFixed(1)} s, worker CPU ${cpu.toFixed(1)} s`);
  printTimeline(await activityHistory(context.client, workflowIds.prediction(jobId), context.workers));
  const job = (await (
    await fetch(`${base}/api/v1/jobs/${jobId}`, { headers: { authorization: `Bearer ${apiKey}` } })
  ).json()) as { status: string };
  if (job.status !== 'completed') throw new Error(`the prediction ended ${job.status}`);
  return { seconds, cpu };
}

/**
 * A database of its own for the build in `dist`, migrated and given a tenant by that build's own
 * code: a reference from before a migration then runs on the schema it was written for.
 */
async function databaseWithTenant(name: string, dist: string): Promise<{ url: string; apiKey: string }> {
  const built = <T>(module: string) => require(path.join(dist, module)) as T;
  const { createSql } = built<typeof import('../db')>('db/index.js');
  const { migrate } = built<typeof import('../db/migrate')>('db/migrate.js');
  const { grantCredits } = built<typeof import('../db/credits')>('db/credits.js');
  const { createOrganizationWithOwner } =
    built<typeof import('../cli/admin-commands')>('cli/admin-commands.js');
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const sql = createSql(url.toString(), { max: 2 });
  await migrate(sql);
  const tenant = await createOrganizationWithOwner(sql, { name: 'bench', email: 'scale@bench.org' });
  await grantCredits(sql, { organizationId: tenant.organizationId, amount: 1_000_000_000 });
  await sql.end();
  return { url: url.toString(), apiKey: tenant.apiKey };
}

/** A setup's rounds as one row: the median of each step's seconds, every round's load. */
interface Row extends Setup {
  ingestSeconds: number;
  predictionSeconds: number;
  rounds: Result[];
}

function summarize(setup: Setup, rounds: Result[]): Row {
  return {
    ...setup,
    ingestSeconds: median(rounds.map((r) => r.ingestSeconds)),
    predictionSeconds: median(rounds.map((r) => r.predictionSeconds)),
    rounds,
  };
}

function report(rows: Row[], here: string): void {
  const cores = availableParallelism();
  // Under --worker-cores each worker is a host of that many cores: the most that can work at once.
  const hosts = Math.floor(cores / (workerCores ?? 1));
  const one = rows.find((r) => r.dist === here && r.workers === 1);
  const pad = (text: string, width: number) => text.padEnd(width);
  const labelWidth = Math.max(...rows.map((row) => row.label.length));
  const seconds = (row: Row, step: 'ingestSeconds' | 'predictionSeconds') =>
    Number.isNaN(row[step])
      ? '-'
      : `${row[step].toFixed(1)}${row.rounds.length > 1 ? ` (${row.rounds.map((r) => r[step].toFixed(0)).join(', ')})` : ''}`;
  const pinning =
    workerCores === undefined
      ? `${cores} cores, the workers unpinned`
      : `${cores} cores, each worker on ${workerCores} of its own`;
  console.log(
    `\nslide ${width} x ${height} px, markers: every one; ${pinning}; medians of ${rows[0]!.rounds.length} round(s)`,
  );
  console.log(
    `${pad('setup', labelWidth)} ${pad('ingest s', 18)} ${pad('ingest cores', 13)} ${pad('predict s', 18)} ${pad('load', 14)} speed-up (ingest, predict) / ideal / target`,
  );
  for (const row of rows) {
    const ideal = Math.min(row.workers, hosts);
    const speedUp =
      one && row.dist === here
        ? `${ratios(one, row, 'ingestSeconds')}, ${ratios(one, row, 'predictionSeconds')} / ${ideal} / ${(0.8 * ideal).toFixed(1)}`
        : '';
    const load = row.rounds.flatMap((r) => r.load);
    // CPU seconds of the workers over ingest's wall time, the median of the rounds.
    const busyCores = median(row.rounds.map((r) => r.ingestCpuSeconds / r.ingestSeconds)).toFixed(2);
    console.log(
      `${pad(row.label, labelWidth)} ${pad(seconds(row, 'ingestSeconds'), 18)} ${pad(busyCores, 13)} ${pad(seconds(row, 'predictionSeconds'), 18)} ${pad(`${Math.min(...load).toFixed(0)} to ${Math.max(...load).toFixed(0)}`, 14)} ${speedUp}`,
    );
  }
  if (one) printCoreBound(one, cores);
  const reference = rows.find((r) => r.dist !== here);
  if (reference && one) {
    console.log(
      `single worker against the reference: ingest ${ratios(one, reference, 'ingestSeconds')}x, prediction ${ratios(one, reference, 'predictionSeconds')}x its time (below 1: faster)`,
    );
  }
}

/**
 * The cores one worker keeps busy (its CPU seconds over the step's wall time), and so the most
 * any number of workers can speed a step up on this machine: cores / busy cores.
 */
function printCoreBound(one: Row, cores: number): void {
  const busy = (
    cpu: 'ingestCpuSeconds' | 'predictionCpuSeconds',
    step: 'ingestSeconds' | 'predictionSeconds',
  ) => median(one.rounds.map((r) => r[cpu] / r[step]));
  const ingest = busy('ingestCpuSeconds', 'ingestSeconds');
  const prediction = busy('predictionCpuSeconds', 'predictionSeconds');
  const bound = (busyCores: number) => (Number.isNaN(busyCores) ? '-' : (cores / busyCores).toFixed(1));
  console.log(
    `one worker keeps ${ingest.toFixed(2)} cores busy in ingest, ${prediction.toFixed(2)} in prediction: on ${cores} cores, workers can speed them up ${bound(ingest)}x and ${bound(prediction)}x at most`,
  );
}

/**
 * `base`'s seconds over `row`'s: of the medians, then of each round in parentheses (a round's
 * runs are the closest in time, so the least apart in load).
 */
function ratios(base: Row, row: Row, step: 'ingestSeconds' | 'predictionSeconds'): string {
  if (Number.isNaN(row[step])) return '-';
  const perRound = row.rounds.map((r, i) => (base.rounds[i]![step] / r[step]).toFixed(2));
  return `${(base[step] / row[step]).toFixed(2)}${perRound.length > 1 ? ` (${perRound.join(', ')})` : ''}`;
}

async function main(): Promise<void> {
  const slide = path.join(scratch, `scale-${width}x${height}.svs`);
  const written = performance.now();
  await writeSyntheticSvs({
    source: path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'CMU-1-Small-Region.svs'),
    out: slide,
    width,
    height,
  });
  console.log(
    `synthetic slide ${width} x ${height}: ${((await stat(slide)).size / MiB).toFixed(0)} MiB in ${((performance.now() - written) / 1000).toFixed(1)} s`,
  );
  const markers = markerCatalog().map((marker) => marker.name);
  const { storage, stopStorage } = await objectStorage();
  const client = new Client({ connection: await Connection.connect({ address: temporalAddress }) });
  const setups: Setup[] = [
    ...(values.reference
      ? [
          {
            label: `reference (${values.reference}), 1 worker`,
            dist: path.resolve(values.reference, 'dist'),
            workers: 1,
          },
        ]
      : []),
    ...workerCounts.map((workers) => ({
      label: `this build, ${workers} worker${workers === 1 ? '' : 's'}`,
      dist: path.join(__dirname, '..'),
      workers,
    })),
  ];
  const databases = new Map<string, { url: string; apiKey: string }>();
  for (const dist of new Set(setups.map((setup) => setup.dist)))
    databases.set(dist, await databaseWithTenant(`bench_scale_${databases.size}`, dist));
  // Rounds alternate the order of the setups, so that a drift of the load favours none.
  const rounds: Result[][] = setups.map(() => []);
  for (let round = 0; round < Number(values.rounds); round++) {
    const order = setups.map((_, index) => index);
    if (round % 2 === 1) order.reverse();
    for (const index of order) {
      const { url, apiKey } = databases.get(setups[index]!.dist)!;
      const context = { databaseUrl: url, apiKey, slide, markers, client, storage };
      rounds[index]!.push(await measure(setups[index]!, round * setups.length + index, context));
    }
  }
  await client.connection.close();
  await stopStorage();
  report(
    setups.map((setup, index) => summarize(setup, rounds[index]!)),
    path.join(__dirname, '..'),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
