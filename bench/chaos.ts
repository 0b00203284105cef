import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { createParser } from 'eventsource-parser';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { startEmbeddedPostgres, startTemporalDevServer } from '../cli/local-services';
import { freePort } from '../cli/ports';
import { loadWorkflowBundle } from '../cli/runtime';
import { bytesSource } from '../compute/source';
import { allIfds, openTiff, readTile, Tag } from '../compute/tiff';
import { createSql } from '../db';
import { grantCredits } from '../db/credits';
import { migrate } from '../db/migrate';

/**
 * Fault injection: N slides go through ingest, prediction, segmentation and export at once
 * while a driver kills -9 the worker, the API, PostgreSQL and the Temporal dev server at
 * seeded random points and restarts them. Then every record must be terminal with no manual
 * step, every completed store byte-identical to an undisturbed run of the same inputs (run
 * first, same processes), no object left under a failed record, the ledger balanced, and every
 * SSE client (reconnecting with Last-Event-ID) must have seen exactly the job's events.
 * Run with `npm run bench:chaos [-- --seed 7 --jobs 2 --chaos-seconds 150 --settle-seconds 360]`.
 */
const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: String(Date.now() % 100_000) },
    jobs: { type: 'string', default: '2' },
    'chaos-seconds': { type: 'string', default: '150' },
    'settle-seconds': { type: 'string', default: '360' },
  },
});
const seed = Number(values.seed);
const jobsPerKind = Number(values.jobs);
const chaosMs = Number(values['chaos-seconds']) * 1000;
const settleMs = Number(values['settle-seconds']) * 1000;
const SLIDE = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'OS-1-detail.ome.tif');
const MARKERS = ['DAPI', 'CD3'];
const EXPORT = {
  format: 'ome-tiff',
  includeHe: false,
  includeSegmentation: false,
  includeOriginalUpload: false,
};
const scratch = process.env.SPS_TEST_SCRATCH!;
const fsRoot = path.join(scratch, 'objects');

/** mulberry32: a small seeded generator, so a failing seed can be replayed. */
function seededRandom(start: number): () => number {
  let state = start >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = seededRandom(seed);

/** A process the driver may kill; `restart` brings it back the way production would. */
interface Target {
  name: string;
  kill(): void;
  restart(): Promise<void>;
}

/** api.js or worker.js from dist/cli, respawned whenever it exits (as an orchestrator would). */
function nodeService(script: string, env: Record<string, string>): Target & { stop(): void } {
  let child: ChildProcess | undefined;
  let stopped = false;
  const start = () => {
    child = spawn(process.execPath, [path.join(__dirname, '..', 'cli', script)], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    child.once('exit', () => {
      if (!stopped) setTimeout(start, 500);
    });
  };
  start();
  return {
    name: script.replace('.js', ''),
    kill: () => child?.kill('SIGKILL'),
    restart: async () => {},
    stop: () => {
      stopped = true;
      child?.kill('SIGKILL');
    },
  };
}

async function retryUntil<T>(what: string, attempt: () => Promise<T>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what}: gave up`, { cause: err });
      await sleep(500);
    }
  }
}

interface Api {
  base: string;
  key: string;
}

/** One API call, retried through network errors and 5xx (a killed API or database). */
async function call(api: Api, method: string, route: string, body?: unknown) {
  return retryUntil(
    `${method} ${route}`,
    async () => {
      const response = await fetch(`${api.base}/api/v1${route}`, {
        method,
        headers: { authorization: `Bearer ${api.key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(20_000),
      });
      const text = await response.text();
      if (response.status >= 500 || response.status === 429) throw new Error(`HTTP ${response.status}`);
      return { status: response.status, json: text ? JSON.parse(text) : null };
    },
    settleMs,
  );
}

async function upload(api: Api, bytes: Uint8Array): Promise<string> {
  const created = await call(api, 'POST', '/uploads', {
    filename: path.basename(SLIDE),
    contentType: 'application/octet-stream',
    fileSize: bytes.length,
    autoSegment: false,
  });
  const { id, uploadUrl } = created.json as { id: string; uploadUrl: string };
  await retryUntil(
    'upload',
    async () => {
      const response = await fetch(uploadUrl, {
        method: 'PUT',
        headers: { 'content-range': `bytes 0-${bytes.length - 1}/${bytes.length}` },
        body: bytes,
        signal: AbortSignal.timeout(20_000),
      });
      await response.arrayBuffer();
      // 409: an earlier try landed though its answer was lost.
      if (![200, 308, 409].includes(response.status)) throw new Error(`HTTP ${response.status}`);
    },
    settleMs,
  );
  return id;
}

async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + chaosMs + settleMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(1000);
  }
}

const TERMINAL_JOB = ['completed', 'partial_failed', 'failed', 'cancelled'];

/** An SSE client of one job that reconnects with Last-Event-ID until a terminal event. */
async function followJob(api: Api, jobId: string): Promise<{ seen: number[]; reconnects: number }> {
  const seen: number[] = [];
  let reconnects = -1;
  let finished = false;
  const deadline = Date.now() + chaosMs + settleMs;
  while (!finished && Date.now() < deadline) {
    reconnects++;
    try {
      const headers: Record<string, string> = { authorization: `Bearer ${api.key}` };
      if (seen.length > 0) headers['last-event-id'] = String(seen.at(-1));
      const response = await fetch(`${api.base}/api/v1/jobs/${jobId}/stream`, { headers });
      if (response.status !== 200 || !response.body) throw new Error(`HTTP ${response.status}`);
      const parser = createParser({
        onEvent: (event) => {
          if (event.event && event.event !== 'message') return;
          if (event.id) seen.push(Number(event.id));
          if (TERMINAL_JOB.includes((JSON.parse(event.data) as { status: string }).status)) finished = true;
        },
      });
      const decoder = new TextDecoder();
      for await (const chunk of response.body) {
        parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
        if (finished) break;
      }
    } catch {
      // The API went away mid-stream; reconnect below.
    }
    if (!finished) await sleep(500);
  }
  return { seen, reconnects };
}

interface Workload {
  sampleId: string;
  jobIds: string[];
  streams: Map<string, { seen: number[]; reconnects: number }>;
}

/** One slide through every kind of job, as a client would drive it. */
async function runWorkload(api: Api, bytes: Uint8Array): Promise<Workload> {
  const sampleId = await upload(api, bytes);
  const result: Workload = { sampleId, jobIds: [], streams: new Map() };
  const sample = await poll(
    () => call(api, 'GET', `/samples/${sampleId}`),
    (answer) => !['uploading', 'deid_running', 'preprocessing'].includes(answer.json.status),
  );
  if (sample.json.status !== 'ready') return result;
  const submitted = await call(api, 'POST', '/predict', { uploadId: sampleId, markers: MARKERS });
  if (submitted.status !== 202) throw new Error(`POST /predict: ${JSON.stringify(submitted.json)}`);
  const jobId = submitted.json.jobId as string;
  result.jobIds.push(jobId);
  result.streams.set(jobId, await followJob(api, jobId));
  const job = await poll(
    () => call(api, 'GET', `/jobs/${jobId}`),
    (answer) => TERMINAL_JOB.includes(answer.json.status),
  );
  // After the prediction, so that every layer summarises its markers (the same files each run).
  await call(api, 'POST', `/samples/${sampleId}/segmentation`);
  await poll(
    () => call(api, 'GET', `/samples/${sampleId}/segmentation`),
    (answer) => ['completed', 'failed', 'cancelled'].includes(answer.json?.status),
  );
  if (job.json.status === 'completed') {
    await call(api, 'POST', `/jobs/${jobId}/exports`, EXPORT);
    const query = new URLSearchParams(
      Object.entries(EXPORT).map(([k, v]): [string, string] => [k, String(v)]),
    );
    await poll(
      () => call(api, 'GET', `/jobs/${jobId}/exports?${query}`),
      (answer) => ['ready', 'failed'].includes(answer.json?.status),
    );
  }
  return result;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIMESTAMP =
  /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?|\d{4}:\d{2}:\d{2} \d{2}:\d{2}:\d{2}/g;

/**
 * The bytes with every record id and timestamp blanked (the same length, so TIFF offsets
 * hold): two runs of the same inputs differ in those (manifests, provenance, OME-XML) and in
 * nothing else.
 */
function withoutRecordIds(bytes: Buffer): Buffer {
  const text = bytes.toString('latin1');
  return Buffer.from(
    text.replace(UUID, (id) => '0'.repeat(id.length)).replace(TIMESTAMP, (time) => '0'.repeat(time.length)),
    'latin1',
  );
}

/** A layer's provenance without what differs per run by design: its timings and id base. */
function withoutRunFacts(name: string, bytes: Buffer): Buffer {
  if (path.basename(name) !== 'provenance.json') return bytes;
  const { timingsMs: _timings, instanceIdBase: _base, ...rest } = JSON.parse(bytes.toString('utf8'));
  return Buffer.from(JSON.stringify(rest));
}

/**
 * A TIFF's content: each IFD's description (ids blanked) and its tiles' encoded bytes in tile
 * order. The OME-TIFF writer appends tiles in the order its concurrent encoders finish, so the
 * file's layout differs from run to run while every tile is the same.
 */
async function tiffContentDigest(bytes: Buffer): Promise<string> {
  const hash = createHash('sha256');
  const tiff = await openTiff(bytesSource(bytes));
  for (const ifd of allIfds(tiff)) {
    await ifd.load(Tag.ImageDescription);
    hash.update(withoutRecordIds(Buffer.from(ifd.text(Tag.ImageDescription) ?? '')));
    for (let index = 0; index < ifd.tileCount; index++) hash.update(await readTile(ifd, index));
  }
  return hash.digest('hex');
}

/** sha256 of every object under `prefix` (a folder, or one object), by path relative to it. */
async function tree(prefix: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const root = path.join(fsRoot, prefix);
  const info = await stat(root).catch(() => null);
  if (!info) return files;
  const entries = info.isFile()
    ? ['']
    : (await readdir(root, { recursive: true, withFileTypes: true }))
        .filter((entry) => entry.isFile())
        .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)));
  for (const entry of entries.sort()) {
    const bytes = await readFile(path.join(root, entry));
    const digest = /\.tiff?$/.test(entry || root)
      ? await tiffContentDigest(bytes)
      : createHash('sha256')
          .update(withoutRecordIds(withoutRunFacts(entry, bytes)))
          .digest('hex');
    files.set(entry.replace(UUID, '{id}'), digest);
  }
  return files;
}

/**
 * The paths whose bytes differ, or that only one side has. A layer's `features/` files carry
 * instance ids, which are `layer_number * 2^32 + label` by design (unique across layers), so
 * there only the names are compared; its mask and everything else byte for byte.
 */
function differences(
  expected: Map<string, string>,
  actual: Map<string, string>,
  idsOnly: RegExp | null,
): string[] {
  const names = new Set([...expected.keys(), ...actual.keys()]);
  return [...names].filter((name) =>
    idsOnly?.test(name) ? expected.has(name) !== actual.has(name) : expected.get(name) !== actual.get(name),
  );
}

/** Where two objects first differ once ids are blanked, with a little of each around it. */
async function firstDifference(expectedKey: string, actualKey: string): Promise<string> {
  const [a, b] = await Promise.all(
    [expectedKey, actualKey].map(async (key) => withoutRecordIds(await readFile(path.join(fsRoot, key)))),
  );
  let at = 0;
  while (at < a!.length && at < b!.length && a![at] === b![at]) at++;
  const around = (bytes: Buffer) =>
    JSON.stringify(bytes.subarray(Math.max(0, at - 16), at + 24).toString('latin1'));
  return ` (sizes ${a!.length} and ${b!.length}, first at byte ${at}: ${around(a!)} vs ${around(b!)})`;
}

async function main() {
  console.log(`bench/chaos: seed ${seed}, ${jobsPerKind} jobs of each kind, chaos ${chaosMs / 1000} s`);
  await chmod(scratch, 0o755);
  const [pgPort, temporalPort, uiPort, apiPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const pgDir = path.join(scratch, 'postgres');
  const startPg = () => startEmbeddedPostgres({ dataDir: pgDir, port: pgPort, database: 'sps' });
  const pg = await startPg();
  const startTemporal = () =>
    startTemporalDevServer({
      cli: process.env.TEMPORAL_CLI ?? 'temporal',
      dbFile: path.join(scratch, 'temporal.db'),
      port: temporalPort,
      uiPort,
    });
  let temporal = await startTemporal();
  const sql = createSql(pg.url, { max: 2 });
  await migrate(sql);
  const bundlePath = path.join(scratch, 'workflow-bundle.js');
  await writeFile(bundlePath, (await loadWorkflowBundle()).code);
  await mkdir(fsRoot, { recursive: true });
  const env = {
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: temporal.address,
    SIGNING_SECRET: 'c'.repeat(40),
    PORT: String(apiPort),
    STORAGE_FS_ROOT: fsRoot,
    LOG_LEVEL: 'silent',
    WORKFLOW_BUNDLE_PATH: bundlePath,
    MAINTENANCE_INTERVAL_SECONDS: '20',
    RATE_LIMIT_PER_SECOND: '1000',
    RATE_LIMIT_BURST: '1000',
    JOB_STREAM_HEARTBEAT_SECONDS: '2',
    JOB_STREAM_RETRY_MS: '500',
  };
  const apiProcess = nodeService('api.js', env);
  const worker = nodeService('worker.js', env);
  const base = `http://127.0.0.1:${apiPort}`;
  const bytes = new Uint8Array(await readFile(SLIDE));
  const tenants: { organizationId: string; apiKey: string; api: Api }[] = [];
  for (const name of ['undisturbed', 'chaos']) {
    const tenant = await createOrganizationWithOwner(sql, { name, email: `${name}@example.com` });
    await grantCredits(sql, { organizationId: tenant.organizationId, amount: 1_000_000 });
    tenants.push({ ...tenant, api: { base, key: tenant.apiKey } });
  }
  await sql.end();
  await retryUntil('API ready', async () => {
    if (
      !(await fetch(`${base}/api/v1/markers`, { headers: { authorization: `Bearer ${tenants[0]!.apiKey}` } }))
        .ok
    )
      throw new Error('not ready');
  });

  const undisturbedStart = performance.now();
  const undisturbed = await Promise.all(
    Array.from({ length: jobsPerKind }, () => runWorkload(tenants[0]!.api, bytes)),
  );
  console.log(`undisturbed run: ${((performance.now() - undisturbedStart) / 1000).toFixed(0)} s`);

  // The driver: kill one target at a random point, bring it back after a random pause.
  let current = pg;
  const targets: Target[] = [
    apiProcess,
    worker,
    {
      name: 'postgres',
      kill: () => {
        void readFile(path.join(pgDir, 'postmaster.pid'), 'utf8').then((text) =>
          process.kill(Number(text.split('\n')[0]), 'SIGKILL'),
        );
      },
      restart: async () => {
        current = await retryUntil('PostgreSQL restart', startPg);
      },
    },
    {
      name: 'temporal',
      kill: () => process.kill(temporal.pid, 'SIGKILL'),
      restart: async () => {
        temporal = await retryUntil('Temporal restart', startTemporal);
      },
    },
  ];
  const kills: Record<string, number> = {};
  let chaosOver = false;
  const driver = (async () => {
    const end = Date.now() + chaosMs;
    while (Date.now() < end) {
      await sleep(3000 + random() * 12_000);
      const target = targets[Math.floor(random() * targets.length)]!;
      target.kill();
      kills[target.name] = (kills[target.name] ?? 0) + 1;
      await sleep(500 + random() * 3000);
      await target.restart();
    }
    chaosOver = true;
  })();
  const chaosStart = performance.now();
  // N lanes, each taking slide after slide through every kind of job until the driver stops.
  const lane = async () => {
    const done: Workload[] = [];
    do done.push(await runWorkload(tenants[1]!.api, bytes));
    while (!chaosOver);
    return done;
  };
  const disturbed = (await Promise.all(Array.from({ length: jobsPerKind }, lane))).flat();
  await driver;
  console.log(
    `chaos run: ${((performance.now() - chaosStart) / 1000).toFixed(0)} s (driver done: ${chaosOver})`,
  );

  const db = createSql(current.url, { max: 2 });
  const violations: string[] = [];
  let checked = 0;
  const check = (ok: boolean, what: string) => {
    checked++;
    if (!ok) violations.push(what);
  };
  // Terminal states, read once everything had its settle time.
  const settleDeadline = Date.now() + settleMs;
  const nonTerminal = async () =>
    db`
      SELECT 'sample ' || id AS what FROM samples WHERE status IN ('uploading', 'deid_running', 'preprocessing')
      UNION ALL SELECT 'job ' || id FROM jobs WHERE status NOT IN ('completed', 'partial_failed', 'failed', 'cancelled')
      UNION ALL SELECT 'segmentation ' || id FROM segmentation_runs WHERE status NOT IN ('completed', 'failed', 'cancelled')
      UNION ALL SELECT 'export ' || id FROM exports WHERE status NOT IN ('ready', 'failed')`;
  let open = await nonTerminal();
  while (open.length > 0 && Date.now() < settleDeadline) {
    await sleep(2000);
    open = await nonTerminal();
  }
  const [records] = await db`
    SELECT (SELECT count(*) FROM samples)::int + (SELECT count(*) FROM jobs)::int
      + (SELECT count(*) FROM segmentation_runs)::int + (SELECT count(*) FROM exports)::int AS n`;
  checked += records!.n - open.length;
  for (const row of open) check(false, `${row.what} not terminal`);

  // Completed stores equal the undisturbed run's (all inputs are the same slide).
  const stores = async (organizationId: string) => ({
    predictions: await db`
      SELECT result_prefix AS prefix FROM jobs WHERE organization_id = ${organizationId} AND status = 'completed'`,
    layers: await db`
      SELECT layer_prefix AS prefix FROM segmentation_runs WHERE organization_id = ${organizationId} AND status = 'completed'`,
    exports: await db`
      SELECT artifact_key AS prefix FROM exports WHERE organization_id = ${organizationId} AND status = 'ready'`,
  });
  const reference = await stores(tenants[0]!.organizationId);
  const observed = await stores(tenants[1]!.organizationId);
  for (const kind of ['predictions', 'layers', 'exports'] as const) {
    const expected = reference[kind][0] ? await tree(reference[kind][0].prefix) : undefined;
    check(expected !== undefined && expected.size > 0, `undisturbed run has no completed ${kind}`);
    if (!expected) continue;
    for (const row of [...reference[kind].slice(1), ...observed[kind]]) {
      const differs = differences(expected, await tree(row.prefix), kind === 'layers' ? /^features\// : null);
      const where =
        kind === 'exports' && differs.length > 0
          ? await firstDifference(reference[kind][0]!.prefix, row.prefix)
          : '';
      check(
        differs.length === 0,
        `${kind} ${row.prefix}: ${differs.slice(0, 3)} differ from the undisturbed run${where}`,
      );
    }
  }

  // No object under a failed or cancelled record.
  const failed = await db`
    SELECT 'orgs/' || organization_id || '/samples/' || sample_id || '/jobs/' || id || '/' AS prefix
      FROM jobs WHERE status IN ('failed', 'cancelled')
    UNION ALL SELECT layer_prefix FROM segmentation_runs WHERE status IN ('failed', 'cancelled') AND layer_prefix IS NOT NULL
    UNION ALL SELECT artifact_key FROM exports WHERE status = 'failed' AND artifact_key IS NOT NULL`;
  for (const row of failed)
    check((await tree(row.prefix)).size === 0, `orphaned objects under ${row.prefix}`);

  // The ledger: nothing left reserved; each job charged what the undisturbed run charged.
  const ledger = await db`
    SELECT j.organization_id AS org, j.id, j.status,
      coalesce(sum(-l.balance_delta) FILTER (WHERE l.kind <> 'grant'), 0)::int AS charged,
      coalesce(sum(l.pending_delta), 0)::int AS pending
    FROM jobs j LEFT JOIN credit_ledger l ON l.job_id = j.id GROUP BY j.id`;
  const referenceCharge = ledger.find(
    (row) => row.org === tenants[0]!.organizationId && row.status === 'completed',
  )?.charged;
  for (const row of ledger) {
    check(row.pending === 0, `job ${row.id} (${row.status}) still holds ${row.pending} reserved credits`);
    const expected = row.status === 'completed' ? referenceCharge : 0;
    if (row.status !== 'partial_failed')
      check(
        row.charged === expected,
        `job ${row.id} (${row.status}) charged ${row.charged}, expected ${expected}`,
      );
  }
  for (const tenant of tenants) {
    const [sums] = await db`
      SELECT sum(balance_delta)::int AS balance, sum(pending_delta)::int AS pending
      FROM credit_ledger WHERE organization_id = ${tenant.organizationId}`;
    const [spent] = await db`
      SELECT coalesce(sum(-balance_delta), 0)::int AS spent FROM credit_ledger
      WHERE organization_id = ${tenant.organizationId} AND kind <> 'grant'`;
    check(
      sums!.pending === 0,
      `organization ${tenant.organizationId}: ${sums!.pending} credits still pending`,
    );
    check(sums!.balance === 1_000_000 - spent!.spent, `organization ${tenant.organizationId}: balance off`);
  }

  // Every SSE client saw exactly the job's events, in order.
  let reconnects = 0;
  for (const workload of [...undisturbed, ...disturbed]) {
    for (const [jobId, stream] of workload.streams) {
      reconnects += stream.reconnects;
      const events = await db`SELECT seq FROM job_events WHERE job_id = ${jobId} ORDER BY seq`;
      const expected = events.map((row) => row.seq).join(',');
      check(
        stream.seen.join(',') === expected,
        `job ${jobId}: SSE saw ${stream.seen} but job_events has ${expected}`,
      );
    }
  }
  const [counts] = await db`
    SELECT (SELECT count(*) FROM jobs)::int AS predictions, (SELECT count(*) FROM samples)::int AS ingests,
      (SELECT count(*) FROM segmentation_runs)::int AS segmentations, (SELECT count(*) FROM exports)::int AS exports,
      (SELECT count(*) FROM jobs WHERE status = 'completed')::int AS completed`;
  await db.end();
  apiProcess.stop();
  worker.stop();
  await temporal.stop();
  await current.stop();

  const killCount = Object.values(kills).reduce((a, b) => a + b, 0);
  console.log(`seed: ${seed}`);
  console.log(
    `kills: ${killCount} (${Object.entries(kills)
      .map(([name, n]) => `${name} ${n}`)
      .join(', ')})`,
  );
  console.log(
    `jobs: ${counts!.ingests} ingests, ${counts!.predictions} predictions (${counts!.completed} completed), ${counts!.segmentations} segmentations, ${counts!.exports} exports`,
  );
  console.log(`SSE reconnects: ${reconnects}`);
  console.log(`invariants checked: ${checked}`);
  console.log(`violations: ${violations.length}`);
  for (const violation of violations) console.log(`  ${violation}`);
  process.exit(violations.length === 0 ? 0 : 1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
