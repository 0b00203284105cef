import { randomUUID } from 'node:crypto';
import { type IncomingHttpHeaders, request } from 'node:http';
import postgres from 'postgres';
import { createSql, type Sql } from '../../db';
import { appendJobEvent, createJobEventHub, type NewJobEvent } from '../../db/job-events';
import type { JobStatus } from '../../schemas/enums';
import { insertSample } from '../support/samples';
import { createTenant, defaultTestSettings, startStack, type TestStack } from '../support/stack';

const HEARTBEAT_MS = 200;

let stack: TestStack;
/** A connection pool of its own, as a worker process would have: events reach the API only by NOTIFY. */
let worker: Sql;

beforeAll(async () => {
  stack = await startStack({ limits: { streamHeartbeatMs: HEARTBEAT_MS } });
  worker = createSql(stack.db.url, { max: 2 });
});
afterAll(async () => {
  await worker?.end({ timeout: 5 });
  await stack?.close();
});

async function insertJob(sql: Sql, organizationId: string, status: JobStatus = 'queued'): Promise<string> {
  const sampleId = await insertSample(sql, { organizationId });
  const id = randomUUID();
  await sql`INSERT INTO jobs (id, organization_id, sample_id, status) VALUES (${id}, ${organizationId}, ${sampleId}, ${status})`;
  return id;
}

function append(
  jobId: string,
  status: JobStatus,
  progress: number | null = null,
  path: string | null = null,
) {
  const event: NewJobEvent = { jobId, status, progress, resultStoragePath: path };
  // As the workflow's progress report does: the row and its event in one transaction.
  return worker.begin(async (tx) => {
    await tx`UPDATE jobs SET status = ${status}, progress = ${progress} WHERE id = ${jobId}`;
    return appendJobEvent(tx, event);
  });
}

/** A job of the stack's tenant with `statuses` already recorded as events 1..n. */
async function jobWithEvents(...statuses: JobStatus[]): Promise<string> {
  const id = await insertJob(stack.sql, stack.tenant.organizationId);
  for (const status of statuses) await append(id, status);
  return id;
}

interface Frame {
  event: string;
  id?: string;
  retry?: string;
  data: string;
}

/** An SSE client on node:http, so a test controls headers and can drop the connection. */
interface Stream {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  frames: Frame[];
  /** Frames other than heartbeats. */
  events(): Frame[];
  /** Waits until `predicate` holds over the frames received so far. */
  until(predicate: (frames: Frame[]) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves when the server has closed the response. */
  ended: Promise<void>;
  close(): void;
}

function parseFrame(block: string): Frame {
  const frame: Frame = { event: 'message', data: '' };
  const data: string[] = [];
  for (const line of block.split('\n')) {
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') frame.event = value;
    else if (field === 'id') frame.id = value;
    else if (field === 'retry') frame.retry = value;
    else if (field === 'data') data.push(value);
  }
  frame.data = data.join('\n');
  return frame;
}

function openStream(
  jobId: string,
  options: { apiKey?: string; lastEventId?: string; query?: string; api?: string } = {},
): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      authorization: `Bearer ${options.apiKey ?? stack.tenant.apiKey}`,
    };
    if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
    const req = request(`${options.api ?? stack.api}/jobs/${jobId}/stream${options.query ?? ''}`, {
      headers,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const waiters = new Set<() => void>();
      let buffer = '';
      let endedResolve: () => void = () => {};
      const stream: Stream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: '',
        frames: [],
        events: () => stream.frames.filter((frame) => frame.event !== 'heartbeat'),
        until(predicate, timeoutMs = 10_000) {
          if (predicate(stream.frames)) return Promise.resolve();
          return new Promise((done, fail) => {
            const timer = setTimeout(() => {
              waiters.delete(check);
              fail(new Error(`timed out; frames: ${JSON.stringify(stream.frames)}`));
            }, timeoutMs);
            const check = () => {
              if (!predicate(stream.frames)) return;
              clearTimeout(timer);
              waiters.delete(check);
              done();
            };
            waiters.add(check);
          });
        },
        ended: new Promise((done) => {
          endedResolve = done;
        }),
        close: () => req.destroy(),
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        stream.body += chunk;
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          stream.frames.push(parseFrame(buffer.slice(0, end)));
          buffer = buffer.slice(end + 2);
        }
        for (const waiter of [...waiters]) waiter();
      });
      res.on('end', () => endedResolve());
      res.on('close', () => endedResolve());
      res.on('error', () => endedResolve());
      resolve(stream);
    });
    req.end();
  });
}

const statusFrames = (stream: Stream) => stream.frames.filter((frame) => frame.event === 'message');
const ids = (frames: Frame[]) => frames.map((frame) => Number(frame.id));
const hasId = (id: number) => (frames: Frame[]) =>
  frames.some((f) => f.event === 'message' && f.id === String(id));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function openStreamsGauge(): Promise<number> {
  const text = await (await fetch(`${stack.baseUrl}/metrics`)).text();
  return Number(/^job_streams_open (\d+)$/m.exec(text)?.[1]);
}

describe('GET /jobs/{id}/stream', () => {
  test('replays the current state, then frames in seq order as another connection appends them', async () => {
    const jobId = await jobWithEvents('queued');
    const stream = await openStream(jobId);
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.headers['cache-control']).toBe('no-cache');
    expect(stream.headers['x-accel-buffering']).toBe('no');
    await stream.until(hasId(1));

    await append(jobId, 'dispatching');
    await append(jobId, 'preprocessing');
    await append(jobId, 'running', 0);
    await append(jobId, 'running', 0.25);
    await stream.until(hasId(5));

    const frames = statusFrames(stream);
    expect(ids(frames)).toEqual([1, 2, 3, 4, 5]);
    for (const frame of frames) expect(frame.retry).toBe('5000');
    expect(frames.map((frame) => JSON.parse(frame.data))).toEqual([
      { id: jobId, status: 'queued', progress: null, resultStoragePath: null, resultGcsPath: null },
      { id: jobId, status: 'dispatching', progress: null, resultStoragePath: null, resultGcsPath: null },
      { id: jobId, status: 'preprocessing', progress: null, resultStoragePath: null, resultGcsPath: null },
      { id: jobId, status: 'running', progress: 0, resultStoragePath: null, resultGcsPath: null },
      { id: jobId, status: 'running', progress: 0.25, resultStoragePath: null, resultGcsPath: null },
    ]);
    // The frame text itself, as DECISIONS.md fixes it.
    expect(stream.body).toContain(
      `event: message\nid: 2\nretry: 5000\ndata: {"id":"${jobId}","status":"dispatching","progress":null,"resultStoragePath":null,"resultGcsPath":null}\n\n`,
    );
    stream.close();
  });

  test('streams share one LISTEN connection, and a closed stream is released', async () => {
    const jobA = await jobWithEvents('queued');
    const jobB = await jobWithEvents('queued');
    const streams = await Promise.all([openStream(jobA), openStream(jobA), openStream(jobB)]);
    await Promise.all(streams.map((stream) => stream.until(hasId(1))));
    const [listeners] = await worker<{ count: number }[]>`
      SELECT count(*)::int AS count FROM pg_stat_activity
      WHERE datname = current_database() AND query ILIKE 'listen%'`;
    expect(listeners!.count).toBe(1);
    expect(await openStreamsGauge()).toBe(3);
    for (const stream of streams) stream.close();
    for (let i = 0; i < 50 && (await openStreamsGauge()) !== 0; i++) await sleep(50);
    expect(await openStreamsGauge()).toBe(0);
  });

  test('Last-Event-ID resumes with exactly the later events', async () => {
    const jobId = await jobWithEvents('queued', 'dispatching', 'preprocessing', 'running', 'running');
    const stream = await openStream(jobId, { lastEventId: '3' });
    expect(stream.status).toBe(200);
    await stream.until(hasId(5));
    // Long enough for anything wrongly replayed to show up.
    await stream.until((frames) => frames.filter((frame) => frame.event === 'heartbeat').length >= 2);
    await append(jobId, 'postprocessing');
    await stream.until(hasId(6));
    expect(ids(statusFrames(stream))).toEqual([4, 5, 6]);
    stream.close();

    const fromZero = await openStream(jobId, { lastEventId: '0' });
    await fromZero.until(hasId(6));
    expect(ids(statusFrames(fromZero))).toEqual([1, 2, 3, 4, 5, 6]);
    fromZero.close();
  });

  test('heartbeats carry the last id and empty data', async () => {
    const jobId = await jobWithEvents('queued', 'dispatching');
    const started = Date.now();
    const stream = await openStream(jobId);
    await stream.until((frames) => frames.filter((frame) => frame.event === 'heartbeat').length >= 3);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(3 * HEARTBEAT_MS - 50);
    const heartbeats = stream.frames.filter((frame) => frame.event === 'heartbeat');
    for (const heartbeat of heartbeats)
      expect(heartbeat).toEqual({ event: 'heartbeat', id: '2', data: '{}' });
    await append(jobId, 'preprocessing');
    await stream.until((frames) => frames.some((frame) => frame.event === 'heartbeat' && frame.id === '3'));
    stream.close();

    // Before any event has been sent, the id is 0: resuming from it replays everything.
    const empty = await insertJob(stack.sql, stack.tenant.organizationId);
    const quiet = await openStream(empty);
    await quiet.until((frames) => frames.some((frame) => frame.event === 'heartbeat'));
    expect(quiet.frames[0]).toEqual({ event: 'heartbeat', id: '0', data: '{}' });
    quiet.close();
  });

  test('after the terminal status: end, then the server closes', async () => {
    const jobId = await jobWithEvents('queued', 'running');
    const stream = await openStream(jobId);
    await stream.until(hasId(2));
    await append(jobId, 'completed', 1, `orgs/x/jobs/${jobId}/result/`);
    await stream.ended;
    expect(stream.events()).toEqual([
      expect.objectContaining({ event: 'message', id: '1' }),
      expect.objectContaining({ event: 'message', id: '2' }),
      {
        event: 'message',
        id: '3',
        retry: '5000',
        data: JSON.stringify({
          id: jobId,
          status: 'completed',
          progress: 1,
          resultStoragePath: `orgs/x/jobs/${jobId}/result/`,
          resultGcsPath: `orgs/x/jobs/${jobId}/result/`,
        }),
      },
      { event: 'end', id: '3', data: '{}' },
    ]);

    // A late client still sees the whole story and the end.
    const late = await openStream(jobId);
    await late.ended;
    expect(late.events().map((frame) => frame.event)).toEqual(['message', 'message', 'message', 'end']);
    // A resumption at the terminal event: nothing will follow, and 204 stops EventSource.
    const resumed = await openStream(jobId, { lastEventId: '3' });
    expect(resumed.status).toBe(204);
    await resumed.ended;
    const earlier = await openStream(jobId, { lastEventId: '2' });
    await earlier.ended;
    expect(earlier.events().map((frame) => [frame.event, frame.id])).toEqual([
      ['message', '3'],
      ['end', '3'],
    ]);
  });

  test.each(['partial_failed', 'failed', 'cancelled'] as const)(
    '%s ends the stream too',
    async (terminal) => {
      const jobId = await jobWithEvents('queued');
      const stream = await openStream(jobId);
      await stream.until(hasId(1));
      await append(jobId, terminal);
      await stream.ended;
      expect(stream.events().map((frame) => frame.event)).toEqual(['message', 'message', 'end']);
    },
  );

  test('a terminal job without a terminal event still ends', async () => {
    const jobId = await insertJob(stack.sql, stack.tenant.organizationId, 'failed');
    const stream = await openStream(jobId);
    await stream.ended;
    expect(stream.events()).toEqual([{ event: 'end', id: '0', data: '{}' }]);
  });

  test("another organization's job is 404 with the error body, before any SSE header", async () => {
    const other = await createTenant(stack.sql);
    const foreignJob = await insertJob(stack.sql, other.organizationId);
    await append(foreignJob, 'queued');
    const stream = await openStream(foreignJob);
    await stream.ended;
    expect(stream.status).toBe(404);
    expect(stream.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(stream.body)).toEqual({
      error: 'not_found',
      message: 'job not found',
      required: null,
      retryAfterSeconds: null,
    });
    // Its owner streams it.
    const own = await openStream(foreignJob, { apiKey: other.apiKey });
    expect(own.status).toBe(200);
    await own.until(hasId(1));
    own.close();

    const missing = await openStream(randomUUID());
    expect(missing.status).toBe(404);
    const malformed = await openStream('not-a-uuid');
    expect(malformed.status).toBe(404);
  });

  test('bad requests are refused with the error body', async () => {
    const jobId = await jobWithEvents('queued');
    for (const lastEventId of ['x', '-1', '1.5', '99999999999']) {
      const stream = await openStream(jobId, { lastEventId });
      await stream.ended;
      expect([stream.status, JSON.parse(stream.body).error]).toEqual([400, 'invalid_request']);
    }
    const query = await openStream(jobId, { query: '?lastEventId=1' });
    await query.ended;
    expect([query.status, JSON.parse(query.body).error]).toEqual([400, 'invalid_request']);
    const anonymous = await openStream(jobId, { apiKey: 'sps_nope' });
    await anonymous.ended;
    expect([anonymous.status, JSON.parse(anonymous.body).error]).toEqual([401, 'unauthorized']);
  });

  test('two streams on one job both get every event', async () => {
    const jobId = await jobWithEvents('queued');
    const first = await openStream(jobId);
    const second = await openStream(jobId, { lastEventId: '1' });
    await first.until(hasId(1));
    for (let progress = 0; progress <= 10; progress++) await append(jobId, 'running', progress / 10);
    await Promise.all([first.until(hasId(12)), second.until(hasId(12))]);
    expect(ids(statusFrames(first))).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(ids(statusFrames(second))).toEqual(Array.from({ length: 11 }, (_, i) => i + 2));
    first.close();
    second.close();
  });

  test('events appended during the replay are neither lost nor repeated', async () => {
    const jobId = await insertJob(stack.sql, stack.tenant.organizationId);
    // Several reads' worth of history, so the replay is still running while more arrive.
    await worker`INSERT INTO job_events (job_id, seq, status, progress)
      SELECT ${jobId}, n, 'running', n / 2000.0 FROM generate_series(1, 1500) AS n`;
    const streams = [await openStream(jobId), await openStream(jobId, { lastEventId: '700' })];
    const appending = (async () => {
      for (let i = 0; i < 60; i++) await append(jobId, 'running', 0.75 + i / 1000);
    })();
    const another = await openStream(jobId, { lastEventId: '1400' });
    streams.push(another);
    await appending;
    await Promise.all(streams.map((stream) => stream.until(hasId(1560), 20_000)));
    const range = (from: number) => Array.from({ length: 1560 - from }, (_, i) => from + 1 + i);
    expect(ids(statusFrames(streams[0]!))).toEqual(range(0));
    expect(ids(statusFrames(streams[1]!))).toEqual(range(700));
    expect(ids(statusFrames(streams[2]!))).toEqual(range(1400));
    for (const stream of streams) stream.close();
  });

  test('after the listening connection is lost, streams catch up from the database', async () => {
    const jobId = await jobWithEvents('queued');
    const stream = await openStream(jobId);
    await stream.until(hasId(1));
    const [killed] = await worker<{ count: number }[]>`
      SELECT count(*)::int AS count FROM (
        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND query ILIKE 'listen%') AS t`;
    expect(killed!.count).toBe(1);
    // Appended while nobody may be listening: read back once LISTEN is active again.
    await append(jobId, 'dispatching');
    await append(jobId, 'preprocessing');
    await stream.until(hasId(3));
    await append(jobId, 'running', 0.5);
    await stream.until(hasId(4));
    expect(ids(statusFrames(stream))).toEqual([1, 2, 3, 4]);
    stream.close();
  });
});

describe('rate limit', () => {
  test('a stream counts once, however long it stays open', async () => {
    const tenant = await createTenant(stack.sql);
    const server = await stack.startApi({
      settings: {
        limits: { ...defaultTestSettings.limits, ratePerSecond: 0.001, rateBurst: 3, streamHeartbeatMs: 20 },
      },
    });
    try {
      const api = server.api;
      const jobId = await insertJob(stack.sql, tenant.organizationId);
      const stream = await openStream(jobId, { apiKey: tenant.apiKey, api });
      await stream.until((frames) => frames.filter((frame) => frame.event === 'heartbeat').length >= 10);
      const get = () => fetch(`${api}/uploads`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
      expect((await get()).status).toBe(200);
      expect((await get()).status).toBe(200);
      expect((await get()).status).toBe(429);
      stream.close();
    } finally {
      await server.close();
    }
  });
});

describe('OpenAPI', () => {
  test('documents the stream as text/event-stream with Last-Event-ID', async () => {
    const document = (await (await fetch(`${stack.api}/openapi.json`)).json()) as {
      paths: Record<
        string,
        {
          get: {
            parameters: { in: string; name: string }[];
            responses: Record<string, { content?: Record<string, unknown> }>;
          };
        }
      >;
    };
    const operation = document.paths['/api/v1/jobs/{id}/stream']!.get;
    expect(Object.keys(operation.responses['200']!.content!)).toEqual(['text/event-stream']);
    expect(operation.parameters.map((parameter) => `${parameter.in}:${parameter.name}`)).toEqual(
      expect.arrayContaining(['path:id', 'header:last-event-id']),
    );
    expect(Object.keys(operation.responses).sort()).toEqual(['200', '204', '400', '401', '404', '429']);
  });
});

describe('appendJobEvent', () => {
  test('concurrent appenders get consecutive numbers', async () => {
    const jobId = await insertJob(stack.sql, stack.tenant.organizationId);
    const results = await Promise.all(Array.from({ length: 40 }, () => append(jobId, 'running', 0.5)));
    expect(results.map((result) => result.seq).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
  });

  test('a job that does not exist is refused', async () => {
    await expect(append(randomUUID(), 'queued')).rejects.toThrow(/not found/);
  });
});

describe('the event hub', () => {
  test('a hub on its own pool: replay then live, and close releases the job', async () => {
    const pool = createSql(stack.db.url, { max: 2 });
    try {
      const hub = createJobEventHub(pool);
      const jobId = await jobWithEvents('queued', 'dispatching');
      const seen: number[] = [];
      let caughtUp = 0;
      const subscription = hub.subscribe(jobId, 0, {
        onEvent: (event) => seen.push(event.seq),
        onCaughtUp: () => caughtUp++,
      });
      await hub.ready();
      for (let i = 0; i < 100 && seen.length < 2; i++) await sleep(20);
      expect(seen).toEqual([1, 2]);
      expect(caughtUp).toBeGreaterThanOrEqual(1);
      await append(jobId, 'preprocessing');
      for (let i = 0; i < 100 && seen.length < 3; i++) await sleep(20);
      expect(seen).toEqual([1, 2, 3]);
      expect(subscription.lastSeq).toBe(3);
      expect(hub.stats()).toEqual({ subscriptions: 1, jobs: 1, listening: true });
      subscription.close();
      expect(hub.stats()).toEqual({ subscriptions: 0, jobs: 0, listening: true });
      await append(jobId, 'running', 0.1);
      await sleep(200);
      expect(seen).toEqual([1, 2, 3]);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  test('ignores payloads it did not write', async () => {
    const pool = createSql(stack.db.url, { max: 2 });
    const notifier = postgres(stack.db.url, { max: 1, onnotice: () => {} });
    try {
      const hub = createJobEventHub(pool, {
        onError: (err) => {
          throw err;
        },
      });
      const jobId = await jobWithEvents('queued');
      const seen: number[] = [];
      hub.subscribe(jobId, 0, { onEvent: (event) => seen.push(event.seq) });
      await hub.ready();
      for (const payload of ['not json', '{}', JSON.stringify({ jobId, seq: 'x' }), 'null']) {
        await notifier`SELECT pg_notify('job_events', ${payload})`;
      }
      await append(jobId, 'dispatching');
      for (let i = 0; i < 100 && seen.length < 2; i++) await sleep(20);
      expect(seen).toEqual([1, 2]);
    } finally {
      await notifier.end();
      await pool.end({ timeout: 5 });
    }
  });
});
