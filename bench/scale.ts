import { type ChildProcess, spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import postgres from 'postgres';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { freePort } from '../cli/ports';
import type { PyramidRegion } from '../compute/pyramid';
import { createSql } from '../db';
import { grantCredits } from '../db/credits';
import { migrate } from '../db/migrate';
import { markerCatalog } from '../models/registry';
import { workflowIds } from '../schemas/temporal';
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
 * times, the order alternating, and the medians are compared. --steps ingest measures ingest
 * alone; --profile prints each ingest activity's queue wait and run time from the history.
 *   npm run bench:scale [-- --size 50000 --workers 1,2 --reference ../sps-main --rounds 1
 *     --steps ingest,predict --profile]
 */
const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '50000' },
    workers: { type: 'string', default: '1,2' },
    reference: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    steps: { type: 'string', default: 'ingest,predict' },
    profile: { type: 'boolean', default: false },
  },
});
const steps = new Set(values.steps.split(',').map((step) => step.trim()));
if (!steps.has('ingest') || [...steps].some((step) => step !== 'ingest' && step !== 'predict'))
  throw new Error(
    `--steps is ingest or ingest,predict (prediction needs an ingested slide), not ${values.steps}`,
  );
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
  /**
   * CPU seconds the worker processes spent from the upload to the end of ingest: over
   * `ingestSeconds`, the cores ingest kept busy (a share of the machine's, under others' load).
   */
  ingestCpuSeconds: number;
  predictionSeconds: number;
  /** The 1-minute load average before the upload and after the prediction: others' work beside it. */
  load: [number, number];
}

function startNode(script: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [script], {
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

/** User and system CPU seconds of `children` so far, every thread (Linux: /proc). */
async function cpuSeconds(children: ChildProcess[]): Promise<number> {
  let ticks = 0;
  for (const child of children) {
    const stat = await readFile(`/proc/${child.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  // USER_HZ, 100 on every Linux this runs on.
  return ticks / 100;
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

/** Uploads `file` through the resumable protocol; answers the sample's id. */
async function upload(base: string, apiKey: string, file: string): Promise<string> {
  const total = (await stat(file)).size;
  const created = await fetch(`${base}/api/v1/uploads`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ filename: path.basename(file), fileSize: total, contentType: 'image/tiff' }),
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
  context: { databaseUrl: string; apiKey: string; slide: string; markers: string[]; client: Client },
): Promise<Result> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = {
    DATABASE_URL: context.databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_TASK_QUEUE_PREFIX: `scale${index}`,
    SIGNING_SECRET: 's'.repeat(40),
    STORAGE_FS_ROOT: path.join(scratch, 'objects'),
    UPLOAD_MAX_BYTES: String(64 * 1024 * MiB),
    LOG_LEVEL: 'info',
  };
  const api = startNode(path.join(setup.dist, 'cli', 'api.js'), {
    ...env,
    PORT: String(port),
    LOG_LEVEL: 'warn',
  });
  const workers = Array.from({ length: setup.workers }, () =>
    startNode(path.join(setup.dist, 'cli', 'worker.js'), env),
  );
  try {
    await Promise.all([waitReady(base), ...workers.map(polling)]);
    const loadBefore = loadavg()[0]!;
    const cpuBefore = await cpuSeconds(workers);
    const sampleId = await upload(base, context.apiKey, context.slide);
    const ingestSeconds = await workflowSeconds(context.client, workflowIds.ingest(sampleId));
    const ingestCpuSeconds = (await cpuSeconds(workers)) - cpuBefore;
    if (values.profile) await printProfile(context.client, workflowIds.ingest(sampleId));
    const predictionSeconds = steps.has('predict')
      ? await predict(base, context.apiKey, sampleId, context)
      : Number.NaN;
    const result: Result = {
      ...setup,
      ingestSeconds,
      ingestCpuSeconds,
      predictionSeconds,
      load: [loadBefore, loadavg()[0]!],
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await stop([api, ...workers]);
  }
}

/** Submits a prediction of every marker and answers its workflow's seconds. */
async function predict(
  base: string,
  apiKey: string,
  sampleId: string,
  context: { markers: string[]; client: Client },
): Promise<number> {
  const submitted = await fetch(`${base}/api/v1/predict`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ uploadId: sampleId, markers: context.markers }),
  });
  const { jobId, status } = (await submitted.json()) as { jobId: string; status: string };
  if (submitted.status !== 202) throw new Error(`POST /predict answered ${submitted.status} ${status}`);
  const seconds = await workflowSeconds(context.client, workflowIds.prediction(jobId));
  const job = (await (
    await fetch(`${base}/api/v1/jobs/${jobId}`, { headers: { authorization: `Bearer ${apiKey}` } })
  ).json()) as { status: string };
  if (job.status !== 'completed') throw new Error(`the prediction ended ${job.status}`);
  return seconds;
}

/**
 * Every activity of the workflow by name, from its history: how many ran, when the first was
 * scheduled and the last closed (seconds from the workflow's start), the seconds they waited
 * for a worker and the seconds they ran, summed: where the serial part of the workflow is.
 */
async function printProfile(client: Client, workflowId: string): Promise<void> {
  const { events } = await client.workflow.getHandle(workflowId).fetchHistory();
  const seconds = (time: unknown) => {
    const { seconds: s, nanos } = time as { seconds: { toNumber(): number } | number; nanos: number };
    return (typeof s === 'number' ? s : s.toNumber()) + (nanos ?? 0) / 1e9;
  };
  const start = seconds(events![0]!.eventTime);
  const byEvent = new Map<string, { name: string; scheduled: number; started?: number }>();
  const byName = new Map<string, { count: number; first: number; last: number; wait: number; run: number }>();
  for (const event of events ?? []) {
    const at = seconds(event.eventTime) - start;
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) byEvent.set(String(event.eventId), { name: activityLabel(scheduled), scheduled: at });
    const started = event.activityTaskStartedEventAttributes;
    if (started) byEvent.get(String(started.scheduledEventId))!.started = at;
    const closed =
      event.activityTaskCompletedEventAttributes ??
      event.activityTaskFailedEventAttributes ??
      event.activityTaskTimedOutEventAttributes ??
      event.activityTaskCanceledEventAttributes;
    if (!closed) continue;
    const task = byEvent.get(String(closed.scheduledEventId))!;
    const began = task.started ?? task.scheduled;
    const row = byName.get(task.name) ?? { count: 0, first: task.scheduled, last: at, wait: 0, run: 0 };
    row.count += 1;
    row.first = Math.min(row.first, task.scheduled);
    row.last = Math.max(row.last, at);
    row.wait += began - task.scheduled;
    row.run += at - began;
    byName.set(task.name, row);
  }
  console.log(`${workflowId}: activity, count, from s, to s, waited s, ran s (summed)`);
  for (const [name, row] of byName)
    console.log(
      `  ${name.padEnd(28)} ${String(row.count).padStart(4)} ${row.first.toFixed(1).padStart(7)} ${row.last.toFixed(1).padStart(7)} ${row.wait.toFixed(1).padStart(7)} ${row.run.toFixed(1).padStart(7)}`,
    );
}

/** An activity's name, with its stage for a pyramid region (`buildHePyramidRegion 0-1`). */
function activityLabel(scheduled: {
  activityType?: { name?: string | null } | null;
  input?: { payloads?: { data?: Uint8Array | null }[] | null } | null;
}): string {
  const name = scheduled.activityType?.name ?? '?';
  const data = scheduled.input?.payloads?.[0]?.data;
  const { region } = data ? (JSON.parse(Buffer.from(data).toString()) as { region?: PyramidRegion }) : {};
  return region ? `${name} ${region.leafLevel}-${region.topLevel}` : name;
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
    Number.isNaN(row[step])
      ? '-'
      : `${row[step].toFixed(1)}${row.rounds.length > 1 ? ` (${row.rounds.map((r) => r[step].toFixed(0)).join(', ')})` : ''}`;
  console.log(
    `\nslide ${size} x ${size} px, markers: every one; ${cores} cores; medians of ${rows[0]!.rounds.length} round(s)`,
  );
  console.log(
    `${pad('setup', 34)} ${pad('ingest s', 18)} ${pad('ingest cores', 13)} ${pad('predict s', 18)} ${pad('load', 14)} speed-up (ingest, predict) / ideal / target`,
  );
  for (const row of rows) {
    const ideal = Math.min(row.workers, cores);
    const speedUp =
      one && row.dist === here
        ? `${ratios(one, row, 'ingestSeconds')}, ${ratios(one, row, 'predictionSeconds')} / ${ideal} / ${(0.8 * ideal).toFixed(1)}`
        : '';
    const load = row.rounds.flatMap((r) => r.load);
    // CPU seconds of the workers over ingest's wall time, the median of the rounds.
    const busyCores = median(row.rounds.map((r) => r.ingestCpuSeconds / r.ingestSeconds)).toFixed(2);
    console.log(
      `${pad(row.label, 34)} ${pad(seconds(row, 'ingestSeconds'), 18)} ${pad(busyCores, 13)} ${pad(seconds(row, 'predictionSeconds'), 18)} ${pad(`${Math.min(...load).toFixed(0)} to ${Math.max(...load).toFixed(0)}`, 14)} ${speedUp}`,
    );
  }
  const reference = rows.find((r) => r.dist !== here);
  if (reference && one) {
    console.log(
      `single worker against the reference: ingest ${ratios(one, reference, 'ingestSeconds')}x, prediction ${ratios(one, reference, 'predictionSeconds')}x its time (below 1: faster)`,
    );
  }
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
      const context = { databaseUrl: url, apiKey, slide, markers, client };
      rounds[index]!.push(await measure(setups[index]!, round * setups.length + index, context));
    }
  }
  await client.connection.close();
  report(
    setups.map((setup, index) => summarize(setup, rounds[index]!)),
    path.join(__dirname, '..'),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
