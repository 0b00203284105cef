/** @jest-environment ./test/support/onnx-environment.js */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { workflowIds } from '../../schemas/temporal';
import {
  blobSource,
  createClient,
  ingestFailure,
  isSpsError,
  type JobEvent,
  type SpsClient,
  streamJob,
  uploadSource,
  waitForIngest,
  waitForJob,
} from '../../sdk';
import { fileSource } from '../../sdk/node';
import { signStoreToken, signToken, verifyStoreToken } from '../../storage';
import { insertSampleWithResults, publish } from '../support/public-samples';
import { defaultTestSettings, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI } from '../support/uploads';

/**
 * The TypeScript SDK against the real stack: every function at least once, the resumable
 * upload interrupted and resumed, the job stream cut and resumed with Last-Event-ID, the
 * 429 retry, and the zarrita store reader (in a child process: zarrita is ESM-only).
 */
let stack: TestStack;
let client: SpsClient;
let sampleId: string;
let jobId: string;
const SLIDE = path.join(SHARED_WSI, 'CMU-1-Small-Region.svs');
/**
 * The sample the predictions and the segmentation run on: OS-1's detail (1101 px a side), quick
 * to predict and segment; the calls are the same for any slide. (SLIDE, big enough for an
 * upload of several 256 KiB chunks, is the one the upload test interrupts.)
 */
let smallId: string;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  client = createClient({ baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey });
  const small = await fileSource(path.join(SHARED_WSI, 'OS-1-detail.ome.tif'));
  smallId = (await uploadSource(client, small, { autoSegment: false })).id;
  await stack.client.workflow.getHandle(workflowIds.ingest(smallId)).result();
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

test('service: health, readiness and the OpenAPI document', async () => {
  await expect(client.service.healthz()).resolves.toEqual({ status: 'ok' });
  await expect(client.service.readyz()).resolves.toMatchObject({ status: 'ok' });
  expect(await client.service.openapi()).toHaveProperty('openapi');
});

test('an upload interrupted after two chunks resumes from the server Range, then ingest runs', async () => {
  const source = await fileSource(SLIDE);
  const chunkBytes = 256 * 1024;
  const abort = new AbortController();
  const sessions: { uploadId: string; uploadUrl: string }[] = [];
  const firstRun: number[] = [];
  await expect(
    uploadSource(client, source, {
      chunkBytes,
      autoSegment: false,
      signal: abort.signal,
      onSession: (session) => {
        sessions.push(session);
      },
      onProgress: ({ sentBytes }) => {
        firstRun.push(sentBytes);
        if (sentBytes >= 2 * chunkBytes) abort.abort(new Error('interrupted'));
      },
    }),
  ).rejects.toThrow('interrupted');
  expect(sessions).toHaveLength(1);
  const stored = Number((await client.uploads.get(sessions[0]!.uploadId)).uploadedBytes);
  expect(stored).toBeGreaterThanOrEqual(2 * chunkBytes);

  const secondRun: { sentBytes: number; resumedFrom: number }[] = [];
  const upload = await uploadSource(client, source, {
    chunkBytes,
    resume: sessions[0],
    onSession: (session) => {
      sessions.push(session);
    },
    onProgress: (progress) => secondRun.push(progress),
  });
  expect(sessions).toHaveLength(1);
  expect(secondRun[0]).toMatchObject({ sentBytes: stored, resumedFrom: stored });
  const sent = secondRun.map((p) => p.sentBytes);
  expect(sent).toEqual([...sent].sort((a, b) => a - b));
  expect(sent.at(-1)).toBe(source.size);
  expect(upload).toMatchObject({ id: sessions[0]!.uploadId, fileSize: String(source.size) });
  sampleId = upload.id;
  const seen: string[] = [];
  const ready = await waitForIngest(client, sampleId, {
    intervalMs: 250,
    onUpload: (current) => seen.push(current.status),
  });
  expect(ready).toMatchObject({ id: sampleId, status: 'ready', statusMessage: null });
  expect(seen.at(-1)).toBe('ready');

  expect((await client.uploads.complete(sampleId)).widthPx).toBeGreaterThan(0);
  expect((await client.uploads.list({ limit: 10 })).uploads.map((u) => u.id)).toContain(sampleId);
}, 180_000);

test('an upload rides out a network that drops a chunk and the question after it', async () => {
  // Not SLIDE: the list test below expects one sample of that name.
  const source = await fileSource(path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'));
  let puts = 0;
  const dropped: string[] = [];
  // The third PUT (a chunk) and the one after it (asking how far it got) never reach the service.
  const flaky: typeof fetch = async (input, init) => {
    if (init?.method === 'PUT' && ++puts >= 3 && dropped.length < 2) {
      dropped.push(new Headers(init.headers).get('content-range') ?? '');
      throw new TypeError('fetch failed');
    }
    return fetch(input, init);
  };
  const flakyClient = createClient({ baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey, fetch: flaky });
  const chunkBytes = 256 * 1024;
  const upload = await uploadSource(flakyClient, source, { chunkBytes, autoSegment: false });
  expect(dropped).toEqual([
    `bytes ${2 * chunkBytes}-${3 * chunkBytes - 1}/${source.size}`,
    `bytes */${source.size}`,
  ]);
  expect(upload).toMatchObject({ uploadedBytes: String(source.size), fileSize: String(source.size) });
}, 60_000);

test('a rerun given a session whose URL has expired starts a new upload, and it lands whole', async () => {
  const source = await fileSource(path.join(SHARED_WSI, 'OS-1-detail.ome.tif'));
  const abandoned = await client.uploads.create({
    filename: source.name,
    fileSize: source.size,
    contentType: 'application/octet-stream',
  });
  const expiredToken = signToken(stack.signingSecret, {
    scope: 'upload',
    subject: abandoned.id,
    expiresAt: new Date(Date.now() - 1000),
  });
  const expired = {
    uploadId: abandoned.id,
    uploadUrl: `${stack.baseUrl}/api/v1/upload-sessions/${abandoned.id}?token=${expiredToken}`,
  };
  const probe = await fetch(expired.uploadUrl, {
    method: 'PUT',
    headers: { 'content-range': `bytes */${source.size}` },
  });
  expect({ status: probe.status, error: ((await probe.json()) as { error: string }).error }).toEqual({
    status: 401,
    error: 'unauthorized',
  });
  const sessions: string[] = [];
  const upload = await uploadSource(client, source, {
    resume: expired,
    autoSegment: false,
    onSession: (session) => {
      sessions.push(session.uploadId);
    },
  });
  expect(sessions).toHaveLength(1);
  expect(sessions[0]).not.toBe(abandoned.id);
  expect(upload).toMatchObject({ id: sessions[0], uploadedBytes: String(source.size) });
});

test('waitForIngest looks again after looks that got no answer, and stops at a refusal', async () => {
  let looks = 0;
  const flaky: typeof fetch = async (input, init) => {
    if (String(input).endsWith(`/uploads/${smallId}`) && ++looks <= 2) throw new TypeError('fetch failed');
    return fetch(input, init);
  };
  const flakyClient = createClient({ baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey, fetch: flaky });
  const ready = await waitForIngest(flakyClient, smallId, { intervalMs: 20 });
  expect({ looks, status: ready.status }).toEqual({ looks: 3, status: 'ready' });
  await expect(
    waitForIngest(flakyClient, '00000000-0000-4000-8000-000000000000', { intervalMs: 20 }),
  ).rejects.toMatchObject({ code: 'not_found' });
  // Past the failures it tolerates, the last one is the answer.
  const down: typeof fetch = async () => {
    throw new TypeError('fetch failed');
  };
  const offline = createClient({ baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey, fetch: down });
  await expect(waitForIngest(offline, smallId, { intervalMs: 5, maxFailures: 2 })).rejects.toMatchObject({
    code: 'network',
  });
});

test('waitForIngest answers a file that is no slide as failed, with the reason', async () => {
  const notes = blobSource(new Blob([randomBytes(64 * 1024)]), 'notes.svs');
  const upload = await uploadSource(client, notes, { autoSegment: false });
  const failed = await waitForIngest(client, upload.id, { intervalMs: 250 });
  expect(failed).toMatchObject({
    id: upload.id,
    status: 'deid_failed',
    statusMessage: expect.stringMatching(/^the file is not a whole-slide image this service reads/),
  });
  await expect(ingestFailure(client, await client.samples.get(upload.id))).resolves.toBe(
    failed.statusMessage,
  );
  await expect(ingestFailure(client, await client.samples.get(sampleId))).resolves.toBeNull();
}, 60_000);

test('samples: list with facets, get, update, fields, markers, H&E file', async () => {
  // The worker shares this process: a CPU-bound activity can stall the loop for seconds.
  const page = await client.samples.list({ status: ['ready'], q: 'CMU-1' });
  expect(page.items.map((item) => item.id)).toEqual([sampleId]);
  const updated = await client.samples.update(sampleId, { name: 'sdk slide', fields: { tags: ['SDK'] } });
  expect(updated).toMatchObject({ name: 'sdk slide', tags: ['sdk'] });
  expect((await client.samples.get(sampleId)).status).toBe('ready');
  const fields = await client.samples.fields();
  expect(fields.fields.map((f) => f.key)).toEqual(expect.arrayContaining(['tags', 'public']));
  expect((await client.markers.list()).markers.length).toBeGreaterThan(0);
  const he = await client.samples.heFile(sampleId, 'zarr.json');
  expect(await he.json()).toHaveProperty('attributes');
}, 120_000);

test('errors are SpsError values with the contract code; unknown markers carry their body', async () => {
  const missing = await client.jobs.get('00000000-0000-4000-8000-000000000000').catch((err: unknown) => err);
  expect(isSpsError(missing, 'not_found')).toBe(true);
  expect(missing).toMatchObject({ status: 404 });
  const unknown = await client.predictions
    .estimate({ uploadId: sampleId, markers: ['NOT_A_MARKER'] })
    .catch((err: unknown) => err);
  expect(isSpsError(unknown, 'unknown_markers')).toBe(true);
  expect((unknown as { body: Record<string, unknown> }).body.unknownMarkers).toEqual(['NOT_A_MARKER']);
});

test('429 is retried after Retry-After until the call succeeds', async () => {
  const tight = await stack.startApi({
    settings: { limits: { ...defaultTestSettings.limits, ratePerSecond: 2, rateBurst: 2 } },
  });
  try {
    let refusals = 0;
    const counting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (response.status === 429) refusals++;
      return response;
    };
    const limited = createClient({ baseUrl: tight.baseUrl, apiKey: stack.tenant.apiKey, fetch: counting });
    const answers = await Promise.all(Array.from({ length: 6 }, () => limited.markers.list()));
    expect(answers).toHaveLength(6);
    expect(refusals).toBeGreaterThan(0);
  } finally {
    await tight.close();
  }
});

test('a price asked while the recount after a change of mpp runs waits for it, and comes', async () => {
  const [slide] = await stack.sql<{ mpp: number }[]>`
    SELECT patch_count_mpp AS mpp FROM sample_slides WHERE sample_id = ${smallId}`;
  // As while the recount is still running: the stored count belongs to another mpp.
  await stack.sql`UPDATE sample_slides SET patch_count_mpp = ${slide!.mpp * 2} WHERE sample_id = ${smallId}`;
  const refusals: { retryAfter: string | null; body: unknown }[] = [];
  const recounting: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (response.status !== 409) return response;
    refusals.push({ retryAfter: response.headers.get('retry-after'), body: await response.clone().json() });
    // The recount lands while the client waits.
    await stack.sql`UPDATE sample_slides SET patch_count_mpp = ${slide!.mpp} WHERE sample_id = ${smallId}`;
    return response;
  };
  const waiting = createClient({ baseUrl: stack.baseUrl, apiKey: stack.tenant.apiKey, fetch: recounting });
  const estimate = await waiting.predictions.estimate({ uploadId: smallId, markers: ['DAPI'] });
  expect(estimate.patchCount).toBeGreaterThan(0);
  expect(refusals).toEqual([
    {
      retryAfter: '2',
      body: expect.objectContaining({ error: 'sample_not_ready', retryAfterSeconds: 2 }),
    },
  ]);
  // A conflict that does not pass by itself (a sample in Trash) is not asked again.
  await stack.sql`UPDATE samples SET trashed_at = now() WHERE id = ${smallId}`;
  try {
    await expect(
      waiting.predictions.estimate({ uploadId: smallId, markers: ['DAPI'] }),
    ).rejects.toMatchObject({
      code: 'sample_not_ready',
      message: expect.stringMatching(/Trash/),
    });
    expect(refusals).toHaveLength(2);
    expect(refusals[1]!.retryAfter).toBeNull();
  } finally {
    await stack.sql`UPDATE samples SET trashed_at = NULL WHERE id = ${smallId}`;
  }
});

/**
 * A fetch whose first job stream delivers its first chunk and then goes silent (a dead
 * connection): the heartbeat timeout must notice and reconnect with Last-Event-ID.
 */
function stallingFetch(onConnect: (lastEventId: string | null) => number): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!String(input).endsWith('/stream')) return response;
    if (onConnect(new Headers(init?.headers).get('last-event-id')) > 1) return response;
    const reader = response.body!.getReader();
    let delivered = false;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (delivered) {
          init?.signal?.addEventListener('abort', () => controller.error(init.signal?.reason));
          return new Promise(() => {});
        }
        const { value } = await reader.read();
        delivered = true;
        controller.enqueue(value!);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

test('predict: estimate, submit, a stream cut mid-way resumes with Last-Event-ID, no event lost or repeated', async () => {
  const estimate = await client.predictions.estimate({ uploadId: smallId, markers: ['DAPI', 'CD3'] });
  expect(estimate.estimatedCredits).toBe(estimate.patchCount * 2);
  const submitted = await client.predictions.submit({ uploadId: smallId, markers: ['DAPI', 'CD3'] });
  expect(submitted).toMatchObject({ status: 'queued', reservedCredits: estimate.estimatedCredits });
  jobId = submitted.jobId;

  const seen: JobEvent[] = [];
  // Each connection's Last-Event-ID, beside the id of the last event delivered before it.
  const connections: { header: string | null; delivered: number | undefined }[] = [];
  const cut = createClient({
    baseUrl: stack.baseUrl,
    apiKey: stack.tenant.apiKey,
    fetch: stallingFetch((header) => connections.push({ header, delivered: seen.at(-1)?.eventId })),
  });
  for await (const event of streamJob(cut, jobId, { heartbeatTimeoutMs: 1000, reconnectDelayMs: 50 })) {
    seen.push(event);
  }
  expect(connections[0]).toEqual({ header: null, delivered: undefined });
  expect(connections[1]!.delivered).toBeDefined();
  expect(connections[1]!.header).toBe(String(connections[1]!.delivered));
  expect(seen.at(-1)!.status).toBe('completed');

  const replay: JobEvent[] = [];
  for await (const event of streamJob(client, jobId)) replay.push(event);
  expect(seen).toEqual(replay);
  const ids = seen.map((event) => event.eventId);
  expect(new Set(ids).size).toBe(ids.length);
  expect(ids).toEqual([...ids].sort((a, b) => a - b));
  expect(seen.map((event) => event.status)).toEqual(
    expect.arrayContaining([
      'queued',
      'dispatching',
      'preprocessing',
      'running',
      'postprocessing',
      'completed',
    ]),
  );

  const after: JobEvent[] = [];
  for await (const event of streamJob(client, jobId, { lastEventId: seen[1]!.eventId })) after.push(event);
  expect(after).toEqual(seen.slice(2));
  await expect(waitForJob(client, jobId)).resolves.toMatchObject({ status: 'completed' });
}, 300_000);

test('results: location, a store file, the zarrita reader; refusals as SpsError, an expired link renewed, the H&E credential read afresh', async () => {
  const location = await client.jobs.results(jobId);
  expect(location.resultUrl).toContain('zarr.json');
  const root = await (await client.jobs.resultFile(jobId, 'zarr.json')).json();
  expect(root).toHaveProperty('attributes');
  // The same store's link as it reads an hour on.
  const token = /\/stores\/([^/]+)\//.exec(location.resultUrl)![1]!;
  const { prefix } = verifyStoreToken(stack.signingSecret, token);
  const expired = location.resultUrl.replace(
    token,
    signStoreToken(stack.signingSecret, prefix, new Date(Date.now() - 1000)),
  );
  const { stdout } = await promisify(execFile)(process.execPath, [
    path.join(__dirname, '..', 'support', 'sdk-store-read.mjs'),
    stack.baseUrl,
    stack.tenant.apiKey,
    jobId,
    smallId,
    expired,
  ]);
  const read = JSON.parse(stdout);
  expect(read.markers).toEqual(['DAPI', 'CD3']);
  expect(read).toMatchObject({ dtype: expect.any(String), finite: true });
  expect(read.shape).toHaveLength(3);
  expect(read.region).toEqual([1, 64, 64]);
  expect(read.refused).toMatchObject({ name: 'SpsError', code: 'forbidden', status: 403 });
  expect(read.expiredRefused).toMatchObject({ name: 'SpsError', code: 'forbidden', status: 403 });
  // Both markers' every shard read under one fresh link, the same pixels as the live link's.
  expect(read.renewals).toBe(1);
  expect(read.renewedSums[0]).toBe(read.whole);
  expect(read.renewedSums[1]).toBeGreaterThan(0);
  expect(read.heRefused).toMatchObject({ name: 'SpsError', code: 'unauthorized', status: 401 });
  expect(read.heRead).toEqual(read.heShape);
}, 60_000);

test('exports: request an OME-TIFF, then read its manifest until ready', async () => {
  const requested = await client.exports.request(jobId, { format: 'ome-tiff' });
  expect(requested.format).toBe('ome-tiff');
  let manifest = requested;
  for (let i = 0; i < 240 && manifest.status !== 'ready' && manifest.status !== 'failed'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    manifest = await client.exports.get(jobId, { format: 'ome-tiff' });
  }
  expect(manifest.status).toBe('ready');
  expect(manifest.artifacts.prediction?.downloadUrl).toBeTruthy();
}, 180_000);

test('segmentation: start, state, start again (reused), manifest and a file', async () => {
  expect((await client.segmentation.get(smallId)).status).toBe('not_started');
  let state = await client.segmentation.start(smallId);
  expect(['queued', 'running', 'postprocessing', 'completed']).toContain(state.status);
  for (let i = 0; i < 600 && state.status !== 'completed' && state.status !== 'failed'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    state = await client.segmentation.get(smallId);
  }
  expect(state.status).toBe('completed');
  expect((await client.segmentation.start(smallId)).status).toBe('completed');
  const manifest = await client.segmentation.manifest(smallId, state.layer!.id);
  expect(manifest.layerId).toBe(state.layer!.id);
  const provenance = await client.segmentation.file(smallId, state.layer!.id, 'provenance.json');
  expect(provenance.status).toBe(200);
}, 360_000);

test('jobs: cancel an active job', async () => {
  const submitted = await client.predictions.submit({ uploadId: smallId, markers: ['CD8'] });
  await expect(client.jobs.cancel(submitted.jobId)).resolves.toEqual({
    id: submitted.jobId,
    status: 'cancelled',
  });
  const final = await waitForJob(client, submitted.jobId);
  expect(final.status).toBe('cancelled');
}, 120_000);

test('expiration, bulk expiration, trash, trash list and restore', async () => {
  const pinned = await client.samples.setExpiration(sampleId, { neverExpire: true });
  expect(pinned).toMatchObject({ id: sampleId, expiresAt: null, expiresAtSource: 'custom' });
  const bulk = await client.samples.setExpirationBulk({ sampleIds: [sampleId], useOrgDefault: true });
  expect(bulk.updated).toBe(1);
  const trashed = await client.samples.trash(sampleId);
  expect(trashed.trashedAt).not.toBeNull();
  expect((await client.samples.listTrash()).items.map((item) => item.id)).toContain(sampleId);
  await expect(client.samples.restore(sampleId)).resolves.toMatchObject({ id: sampleId, trashedAt: null });
});

test('public samples: a file of the public store and the thumbnail', async () => {
  const stored = await insertSampleWithResults(stack.sql, stack.store, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
  });
  const publicId = await publish(stack.sql, stored.sampleId);
  const root = await client.publicSamples.zarrFile(publicId, 'zarr.json');
  expect(root.status).toBe(200);
  const thumbnail = await client.publicSamples.thumbnail(publicId);
  expect(thumbnail.headers.get('content-type')).toContain('image/jpeg');
  expect(Buffer.from(await thumbnail.arrayBuffer())).toEqual(stored.thumbnail);
});
