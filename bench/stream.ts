import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent, type ClientRequest, request } from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { freePort } from '../cli/ports';
import { createSql, type Sql } from '../db';
import { appendJobEvent } from '../db/job-events';
import { migrate } from '../db/migrate';
import { rssMiB, waitReady } from './api-process';

/**
 * Job status streams (SSE) held open on one API process over loopback: the process's memory
 * per open stream, and the delay from appending a status event in the database (from another
 * connection, as a worker does) to its arrival on every stream. Two layouts: each stream
 * follows its own job (one statement appends an event to all of them), and every stream
 * follows one job. The reference, in the same run, is a bare node:http server writing the
 * same frames to as many responses (no framework, database or auth): the floor that loopback
 * and this client, parsing 2,000 sockets on the same cores, put under every figure.
 * Run with `npm run bench:stream [-- --streams 2000 --rounds 20]`.
 */
const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '20' },
  },
});
const streamCount = Number(values.streams);
const rounds = Number(values.rounds);
const adminUrl = process.env.TEST_DATABASE_URL!;
const temporalAddress = process.env.TEST_TEMPORAL_ADDRESS!;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function openStreamsGauge(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  return Number(/^job_streams_open (\d+)$/m.exec(text)?.[1]);
}

/** One open stream: when each status id arrived, and the ids in order. */
interface Stream {
  req: ClientRequest;
  arrivals: Map<number, number>;
  statusIds: number[];
  closing: boolean;
}

const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });

function openStream(url: string, headers: Record<string, string>): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers });
    const stream: Stream = { req, arrivals: new Map(), statusIds: [], closing: false };
    req.on('error', (err) => (stream.closing ? undefined : reject(err)));
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`${url}: HTTP ${res.statusCode}`));
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!frame.startsWith('event: message\n')) continue;
          const id = Number(/\nid: (\d+)\n/.exec(frame)![1]);
          stream.statusIds.push(id);
          stream.arrivals.set(id, now);
        }
      });
      res.on('error', () => {});
      resolve(stream);
    });
    req.end();
  });
}

function close(stream: Stream): void {
  stream.closing = true;
  stream.req.destroy();
}

async function until(what: string, predicate: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function insertJobs(sql: Sql, organizationId: string, count: number): Promise<string[]> {
  const sampleId = randomUUID();
  await sql`INSERT INTO samples (id, organization_id, filename, content_type, file_size, status, uploaded_bytes, storage_key)
    VALUES (${sampleId}, ${organizationId}, 'bench.svs', 'image/tiff', 1000, 'ready', 1000,
      ${`orgs/${organizationId}/samples/${sampleId}/original/bench.svs`})`;
  const rows = await sql<{ id: string }[]>`
    INSERT INTO jobs (organization_id, sample_id, status)
    SELECT ${organizationId}, ${sampleId}, 'queued' FROM generate_series(1, ${count}) RETURNING id`;
  const ids = rows.map((row) => row.id);
  await sql`INSERT INTO job_events (job_id, seq, status) SELECT id, 1, 'queued' FROM unnest(${ids}::uuid[]) AS id`;
  return ids;
}

interface Target {
  pid: number;
  /** The URL and headers of the i-th stream. */
  stream(i: number): { url: string; headers: Record<string, string> };
  /** Open streams as the server counts them, when it can tell. */
  openCount?(): Promise<number>;
  /** Makes event `round + 1` happen; resolves when it is committed (or written). */
  fire(round: number): Promise<void>;
}

interface LayoutResult {
  layout: string;
  rssBeforeMiB: number;
  rssOpenMiB: number;
  openSeconds: number;
  /** Every (stream, round): from the start of the append to arrival, ms. */
  delays: number[];
  /** Per round: until the last stream had it. */
  roundMax: number[];
  /** Per round: until the append's commit returned. */
  commits: number[];
  /** Streams that did not see 1..rounds+1 exactly once, in order. */
  problems: number;
}

async function runLayout(layout: string, target: Target): Promise<LayoutResult> {
  await sleep(1000);
  const rssBeforeMiB = await rssMiB(target.pid);
  const openStart = performance.now();
  const streams: Stream[] = [];
  // 100 at a time: each opening costs the API three queries on its pool of 10.
  for (let i = 0; i < streamCount; i += 100) {
    const batch = Array.from({ length: Math.min(100, streamCount - i) }, (_, j) => target.stream(i + j));
    streams.push(...(await Promise.all(batch.map(({ url, headers }) => openStream(url, headers)))));
  }
  await until('the replayed first event', () => streams.every((stream) => stream.arrivals.has(1)));
  const openSeconds = (performance.now() - openStart) / 1000;
  if (target.openCount) {
    const open = await target.openCount();
    if (open !== streamCount) throw new Error(`the API reports ${open} open streams, not ${streamCount}`);
  }
  await sleep(2000);
  const rssOpenMiB = await rssMiB(target.pid);

  const delays: number[] = [];
  const roundMax: number[] = [];
  const commits: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const seq = round + 1;
    const started = performance.now();
    await target.fire(round);
    commits.push(performance.now() - started);
    await until(`event ${seq} on every stream`, () => streams.every((stream) => stream.arrivals.has(seq)));
    let slowest = 0;
    for (const stream of streams) {
      const delay = stream.arrivals.get(seq)! - started;
      delays.push(delay);
      slowest = Math.max(slowest, delay);
    }
    roundMax.push(slowest);
    await sleep(100);
  }
  const expected = Array.from({ length: rounds + 1 }, (_, i) => i + 1).join(',');
  const problems = streams.filter((stream) => stream.statusIds.join(',') !== expected).length;
  for (const stream of streams) close(stream);
  if (target.openCount) {
    for (let i = 0; i < 100 && (await target.openCount()) !== 0; i++) await sleep(50);
  }
  return { layout, rssBeforeMiB, rssOpenMiB, openSeconds, delays, roundMax, commits, problems };
}

function spawnNode(script: string, env: Record<string, string>, stdout: 'ignore' | 'pipe'): ChildProcess {
  return spawn(process.execPath, [script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', stdout, 'inherit'],
  });
}

async function runReference(): Promise<LayoutResult> {
  const child = spawnNode(path.join(__dirname, 'stream-reference.js'), {}, 'pipe');
  try {
    const port = await new Promise<number>((resolve) =>
      child.stdout!.once('data', (data: Buffer) => resolve(Number(String(data).trim()))),
    );
    const base = `http://127.0.0.1:${port}`;
    return await runLayout(`reference: bare node:http, ${streamCount} streams`, {
      pid: child.pid!,
      stream: () => ({ url: `${base}/stream`, headers: {} }),
      fire: async (round) => {
        await (await fetch(`${base}/fire?id=${round + 1}`, { method: 'POST' })).text();
      },
    });
  } finally {
    child.kill('SIGTERM');
  }
}

async function main() {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe('CREATE DATABASE bench_stream');
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/bench_stream';
  const sql = createSql(url.toString(), { max: 4 });
  await migrate(sql);
  const tenant = await createOrganizationWithOwner(sql, { name: 'bench', email: 'bench@example.com' });
  const apiKey = String(tenant.apiKey);

  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const api = spawnNode(
    path.join(__dirname, '..', 'cli', 'api.js'),
    {
      DATABASE_URL: url.toString(),
      TEMPORAL_ADDRESS: temporalAddress,
      SIGNING_SECRET: 'b'.repeat(40),
      PORT: String(port),
      LOG_LEVEL: 'warn',
      // One key opens every stream here; the limiter counts each stream once, at its request.
      RATE_LIMIT_PER_SECOND: '100000',
      RATE_LIMIT_BURST: '100000',
      // Every stream comes from this one loopback address.
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: '0',
      JOB_STREAMS_PER_CREDENTIAL: '100000',
    },
    'ignore',
  );
  const results: LayoutResult[] = [];
  try {
    await waitReady(baseUrl);
    const auth = { authorization: `Bearer ${apiKey}` };
    const streamOf = (jobId: string) => ({ url: `${baseUrl}/api/v1/jobs/${jobId}/stream`, headers: auth });
    // Warm the route (JIT, pools, the LISTEN connection) so that "before" is a steady state.
    const warm = await insertJobs(sql, tenant.organizationId, 50);
    const warmStreams = await Promise.all(warm.map((id) => openStream(streamOf(id).url, auth)));
    await until('warm-up', () => warmStreams.every((stream) => stream.arrivals.has(1)));
    for (const stream of warmStreams) close(stream);

    const ownJobs = await insertJobs(sql, tenant.organizationId, streamCount);
    results.push(
      await runLayout(`${streamCount} streams, one job each`, {
        pid: api.pid!,
        stream: (i) => streamOf(ownJobs[i]!),
        openCount: () => openStreamsGauge(baseUrl),
        // One statement, one commit: a notification per job, all at once.
        fire: async (round) => {
          await sql`INSERT INTO job_events (job_id, seq, status, progress)
            SELECT id, ${round + 1}, 'running', ${round / 100} FROM unnest(${ownJobs}::uuid[]) AS id`;
        },
      }),
    );
    const [sharedJob] = await insertJobs(sql, tenant.organizationId, 1);
    results.push(
      await runLayout(`${streamCount} streams on one job`, {
        pid: api.pid!,
        stream: () => streamOf(sharedJob!),
        openCount: () => openStreamsGauge(baseUrl),
        fire: async (round) => {
          const event = { jobId: sharedJob!, progress: round / 100, resultStoragePath: null };
          await sql.begin((tx) => appendJobEvent(tx, { ...event, status: 'running' }));
        },
      }),
    );
  } finally {
    api.kill('SIGTERM');
    await sql.end({ timeout: 5 });
  }
  results.push(await runReference());

  console.log(
    `\nbench/stream: ${streamCount} concurrent job streams on one API process over loopback, ${rounds} events each; delay from the start of the append to arrival, ms`,
  );
  console.table(
    results.map((result) => ({
      layout: result.layout,
      'open s': result.openSeconds.toFixed(1),
      'RSS before MiB': result.rssBeforeMiB.toFixed(0),
      'RSS open MiB': result.rssOpenMiB.toFixed(0),
      'KiB/stream': (((result.rssOpenMiB - result.rssBeforeMiB) * 1024) / streamCount).toFixed(1),
      'append ms p50': percentile(result.commits, 50).toFixed(1),
      'delay p50': percentile(result.delays, 50).toFixed(1),
      'delay p95': percentile(result.delays, 95).toFixed(1),
      'delay max': Math.max(...result.delays).toFixed(1),
      'last stream p50': percentile(result.roundMax, 50).toFixed(1),
      'lost/dup': result.problems,
    })),
  );
}

main()
  .then(() => process.exit(0))
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
