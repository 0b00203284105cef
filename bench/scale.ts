import { type ChildProcess, spawn } from 'node:child_process';
import { createReadStream, createWriteStream, readFileSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import postgres from 'postgres';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { freePort } from '../cli/ports';
import { createSql } from '../db';
import { grantCredits } from '../db/credits';
import { migrate } from '../db/migrate';
import { markerCatalog } from '../models/registry';
import { workflowIds } from '../schemas/temporal';
import { ensureBucket } from '../storage';
import { startMinio } from '../test/support/minio';
import { waitReady } from './api-process';
import { writeSyntheticSvs } from './synthetic-svs';
import { putChunk } from './upload-protocol';

/**
 * Wall time of one slide's ingest and of its prediction (every marker) as separate worker
 * processes are added: the API and N processes of `dist/cli/worker.js` (each polling every
 * queue, default slots) from this build, for each N of --workers, and with --reference DIR one
 * worker of another checkout's build (today's main) in the same run. A step's time is its
 * workflow's, from start to close on the Temporal server. The speed-up of N workers is set
 * against the ideal min(N, cores) and the target 0.8 of it; with --rounds R each setup runs R
 * times, the order alternating, and the medians are compared.
 *   npm run bench:scale [-- --size 50000 --workers 1,2 --reference ../sps-main --rounds 1
 *                          --auto-segment --storage fs|s3 --logs DIR --profile DIR]
 *
 * The slide is uploaded without auto-segmentation, so that the prediction has the workers to
 * itself, as the in-process bench/inference has its process; `--auto-segment` uploads it with
 * the service's default (segmentation starts once ingest ends, beside the prediction).
 * `--storage s3` keeps the objects in a MinIO started for the run (the S3 backend, as
 * docker-compose.yml runs it) instead of a folder.
 * Each prediction also prints its activities as the Temporal history has them (queued, ran, by
 * band) and the CPU seconds its worker processes spent on it (all threads): where the time of a
 * band goes. `--logs DIR` keeps each worker's log; `--profile DIR` runs the workers with
 * `node --cpu-prof` into DIR (their main threads: the activities').
 */
const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '50000' },
    workers: { type: 'string', default: '1,2' },
    reference: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    'auto-segment': { type: 'boolean', default: false },
    storage: { type: 'string', default: 'fs' },
    logs: { type: 'string' },
    profile: { type: 'string' },
  },
});
const size = Number(values.size);
const workerCounts = values.workers.split(',').map(Number);
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
  predictionSeconds: number;
  /** The 1-minute load average before the upload and after the prediction: others' work beside it. */
  load: [number, number];
}

function startNode(script: string, env: Record<string, string>, nodeArgs: string[] = []): ChildProcess {
  return spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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

/** CPU seconds (user and system, every thread) of a running child, from /proc (Linux). */
function cpuSecondsOf(child: ChildProcess): number {
  const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime, fields 14 and 15 of stat(5), in clock ticks of 1/100 s.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Each worker's stdout (its log) into DIR/worker-N.log. */
async function keepLogs(workers: ChildProcess[], dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [k, worker] of workers.entries()) {
    worker.stdout?.pipe(createWriteStream(path.join(dir, `worker-${k}.log`)));
  }
}

/**
 * The workflow's activities from its history: seconds after the workflow's start when each was
 * scheduled, how long it waited for a worker (the last attempt's), how long it ran, its band, and
 * for a retried one its attempt and the last failure.
 */
async function activityTimeline(client: Client, workflowId: string): Promise<string[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const at = (event: (typeof events)[number]) =>
    Number(event.eventTime?.seconds ?? 0) * 1000 + (event.eventTime?.nanos ?? 0) / 1e6;
  const start = at(events[0]!);
  const scheduled = new Map<
    string,
    { name: string; band?: number; at: number; started?: number; attempt?: number; lastFailure?: string }
  >();
  const lines: string[] = [];
  for (const event of events) {
    const id = String(event.eventId);
    const s = event.activityTaskScheduledEventAttributes;
    if (s) {
      const data = s.input?.payloads?.[0]?.data;
      const input = data ? (JSON.parse(Buffer.from(data).toString()) as { band?: number }) : {};
      scheduled.set(id, { name: s.activityType?.name ?? '?', band: input.band, at: at(event) });
    }
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      // Written once the activity closes, for its last attempt: an earlier one's failure is here.
      Object.assign(scheduled.get(String(started.scheduledEventId))!, {
        started: at(event),
        attempt: started.attempt ?? 1,
        lastFailure: started.lastFailure?.message ?? undefined,
      });
    }
    const closed =
      event.activityTaskCompletedEventAttributes ??
      event.activityTaskFailedEventAttributes ??
      event.activityTaskTimedOutEventAttributes;
    if (closed) {
      const activity = scheduled.get(String(closed.scheduledEventId))!;
      const ran = activity.started ?? activity.at;
      lines.push(
        `${activity.name}${activity.band === undefined ? '' : ` band ${activity.band}`}: at ${((activity.at - start) / 1000).toFixed(1)} s, waited ${((ran - activity.at) / 1000).toFixed(1)} s, ran ${((at(event) - ran) / 1000).toFixed(1)} s${(activity.attempt ?? 1) > 1 ? ` (attempt ${activity.attempt}; the last failed: ${activity.lastFailure})` : ''}`,
      );
    }
  }
  return lines;
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
  };
  const api = startNode(path.join(setup.dist, 'cli', 'api.js'), {
    ...env,
    PORT: String(port),
    LOG_LEVEL: 'warn',
  });
  const profile = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(values.profile)}`] : [];
  const workers = Array.from({ length: setup.workers }, () =>
    startNode(path.join(setup.dist, 'cli', 'worker.js'), env, profile),
  );
  if (values.logs) await keepLogs(workers, path.join(values.logs, `setup-${index}`));
  try {
    await Promise.all([waitReady(base), ...workers.map(polling)]);
    const loadBefore = loadavg()[0]!;
    const sampleId = await upload(base, context.apiKey, context.slide);
    const ingestSeconds = await workflowSeconds(context.client, workflowIds.ingest(sampleId));
    const submitted = await fetch(`${base}/api/v1/predict`, {
      method: 'POST',
      headers: { authorization: `Bearer ${context.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ uploadId: sampleId, markers: context.markers }),
    });
    const { jobId, status } = (await submitted.json()) as { jobId: string; status: string };
    if (submitted.status !== 202) throw new Error(`POST /predict answered ${submitted.status} ${status}`);
    const cpuBefore = workers.map(cpuSecondsOf);
    const predictionSeconds = await workflowSeconds(context.client, workflowIds.prediction(jobId));
    const cpu = workers.map((worker, k) => cpuSecondsOf(worker) - cpuBefore[k]!);
    console.log(
      `${setup.label}: prediction ${predictionSeconds.toFixed(1)} s, worker CPU ${cpu.map((s) => s.toFixed(1)).join(', ')} s`,
    );
    for (const line of await activityTimeline(context.client, workflowIds.prediction(jobId)))
      console.log(`  ${line}`);
    const job = (await (
      await fetch(`${base}/api/v1/jobs/${jobId}`, { headers: { authorization: `Bearer ${context.apiKey}` } })
    ).json()) as { status: string };
    if (job.status !== 'completed') throw new Error(`the prediction ended ${job.status}`);
    const result: Result = { ...setup, ingestSeconds, predictionSeconds, load: [loadBefore, loadavg()[0]!] };
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
  const minio = await startMinio();
  const s3 = {
    endpoint: minio.endpoint,
    region: 'us-east-1',
    bucket: 'bench-scale',
    accessKeyId: minio.accessKeyId,
    secretAccessKey: minio.secretAccessKey,
    forcePathStyle: true,
  };
  // A MinIO just started may answer 503 until its drives are ready.
  for (let attempt = 1; ; attempt++) {
    try {
      await ensureBucket(s3);
      break;
    } catch (err) {
      if (attempt === 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  return {
    storage: {
      STORAGE_BACKEND: 's3',
      S3_BUCKET: s3.bucket,
      S3_ENDPOINT: s3.endpoint,
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
    },
    stopStorage: minio.stop,
  };
}

async function databaseWithTenant(): Promise<{ url: string; apiKey: string }> {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe('CREATE DATABASE bench_scale');
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/bench_scale';
  const sql = createSql(url.toString(), { max: 2 });
  await migrate(sql);
  const tenant = await createOrganizationWithOwner(sql, { name: 'bench', email: 'scale@bench.org' });
  await grantCredits(sql, { organizationId: tenant.organizationId, amount: 1_000_000_000 });
  await sql.end();
  return { url: url.toString(), apiKey: tenant.apiKey };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  return Number.isInteger(middle) ? (sorted[middle - 1]! + sorted[middle]!) / 2 : sorted[Math.floor(middle)]!;
};

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
  const one = rows.find((r) => r.dist === here && r.workers === 1);
  const pad = (text: string, width: number) => text.padEnd(width);
  const seconds = (row: Row, step: 'ingestSeconds' | 'predictionSeconds') =>
    `${row[step].toFixed(1)}${row.rounds.length > 1 ? ` (${row.rounds.map((r) => r[step].toFixed(0)).join(', ')})` : ''}`;
  console.log(
    `\nslide ${size} x ${size} px, markers: every one; ${cores} cores; medians of ${rows[0]!.rounds.length} round(s)`,
  );
  console.log(
    `${pad('setup', 34)} ${pad('ingest s', 18)} ${pad('predict s', 18)} ${pad('load', 14)} speed-up (ingest, predict) / ideal / target`,
  );
  for (const row of rows) {
    const ideal = Math.min(row.workers, cores);
    const speedUp =
      one && row.dist === here
        ? `${(one.ingestSeconds / row.ingestSeconds).toFixed(2)}, ${(one.predictionSeconds / row.predictionSeconds).toFixed(2)} / ${ideal} / ${(0.8 * ideal).toFixed(1)}`
        : '';
    const load = row.rounds.flatMap((r) => r.load);
    console.log(
      `${pad(row.label, 34)} ${pad(seconds(row, 'ingestSeconds'), 18)} ${pad(seconds(row, 'predictionSeconds'), 18)} ${pad(`${Math.min(...load).toFixed(0)} to ${Math.max(...load).toFixed(0)}`, 14)} ${speedUp}`,
    );
  }
  const reference = rows.find((r) => r.dist !== here);
  if (reference && one) {
    console.log(
      `single worker against the reference: ingest ${(one.ingestSeconds / reference.ingestSeconds).toFixed(2)}x, prediction ${(one.predictionSeconds / reference.predictionSeconds).toFixed(2)}x its time (below 1: faster)`,
    );
  }
}

async function main(): Promise<void> {
  const { url, apiKey } = await databaseWithTenant();
  const slide = path.join(scratch, `scale-${size}.svs`);
  const written = performance.now();
  await writeSyntheticSvs({
    source: path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'CMU-1-Small-Region.svs'),
    out: slide,
    width: size,
    height: size,
  });
  console.log(
    `synthetic slide ${size} x ${size}: ${((await stat(slide)).size / MiB).toFixed(0)} MiB in ${((performance.now() - written) / 1000).toFixed(1)} s`,
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
  // Rounds alternate the order of the setups, so that a drift of the load favours none.
  const rounds: Result[][] = setups.map(() => []);
  for (let round = 0; round < Number(values.rounds); round++) {
    const order = setups.map((_, index) => index);
    if (round % 2 === 1) order.reverse();
    for (const index of order) {
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
