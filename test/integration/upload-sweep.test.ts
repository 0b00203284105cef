import { randomBytes, randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ABANDONED_UPLOAD_MESSAGE } from '../../db/samples';
import { taskQueueName } from '../../schemas/temporal';
import { UPLOAD_CHUNK_GRANULARITY } from '../../schemas/uploads';
import { createObjectStore, type ObjectStore } from '../../storage';
import { apiClient } from '../support/http';
import { startMinioBucket } from '../support/minio-bucket';
import { defaultTestSettings, type ExtraApi, startStack, type TestStack } from '../support/stack';

/**
 * The sweep of abandoned uploads, on the real stack with each store: an upload whose session
 * URL expired before its last byte ends `upload_failed` with its partial bytes dropped (the
 * staging file, the multipart upload), and a chunk that meets the sweep neither loses a
 * finished upload nor leaves bytes behind a failed one. The sweep runs as the `maintenance`
 * Schedule runs it: `maintenanceWorkflow` on the stack's worker.
 */
/** The session URL lifetime (UPLOAD_SESSION_TTL_SECONDS) of the API that starts uploads left to expire. */
const SHORT_TTL_SECONDS = 3;
/** A part of its own on S3 (at least 5 MiB), a multiple of the chunk granularity. */
const FIRST_CHUNK = 24 * UPLOAD_CHUNK_GRANULARITY;

interface Harness {
  stack: TestStack;
  /** What the store holds besides published objects: staging files, multipart uploads, pieces. */
  leftovers(): Promise<string[]>;
  stop(): Promise<void>;
}

/** Ingest never starts: a finished upload stays as its last byte left it. */
const withoutIngest = {
  workflows: (real: TestStack['workflows']) => ({ ...real, startIngest: async () => {} }),
};

async function startFsHarness(): Promise<Harness> {
  const stack = await startStack({ worker: true, ...withoutIngest });
  const staging = path.join(stack.fsRoot, '.tmp', 'uploads');
  return { stack, leftovers: () => readdir(staging).catch(() => []), stop: () => stack.close() };
}

async function startS3Harness(): Promise<Harness> {
  const minio = await startMinioBucket('sweep', 'sweep');
  const store: ObjectStore = createObjectStore({ backend: 's3', s3: minio.options });
  const stack = await startStack({ worker: true, store, ...withoutIngest });
  return {
    stack,
    leftovers: () => minio.uploadLeftovers(),
    async stop() {
      await stack.close();
      await minio.stop();
    },
  };
}

describe.each([
  ['fs', startFsHarness],
  ['s3', startS3Harness],
] as const)('the sweep of abandoned uploads (%s store)', (_name, start) => {
  let harness: Harness;
  let stack: TestStack;
  let shortLived: ExtraApi;
  let call: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    harness = await start();
    stack = harness.stack;
    call = apiClient(stack.api, stack.tenant.apiKey);
    shortLived = await stack.startApi({
      settings: { limits: { ...defaultTestSettings.limits, uploadSessionTtlSeconds: SHORT_TTL_SECONDS } },
    });
  }, 120_000);
  afterAll(async () => {
    await shortLived?.close();
    await harness?.stop();
  });

  /** Starts an upload through `api` (the short-lived one by default). */
  async function createUpload(bytes: Buffer, api = shortLived.api) {
    const created = await apiClient(api, stack.tenant.apiKey)('POST', '/uploads', {
      filename: 'slide.svs',
      fileSize: bytes.length,
      contentType: 'image/tiff',
    });
    expect(created.status).toBe(200);
    return created.json as { id: string; uploadUrl: string; storagePath: string };
  }

  function putChunk(uploadUrl: string, bytes: Buffer, start: number, end: number) {
    return fetch(uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': `bytes ${start}-${end - 1}/${bytes.length}` },
      body: bytes.subarray(start, end),
    });
  }

  /**
   * A chunk whose body stops after its first 256 KiB until `release` is called: a request in
   * flight, whose writer holds the chunk's claim, when the sweep runs.
   */
  function heldChunk(uploadUrl: string, bytes: Buffer) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(bytes.subarray(0, UPLOAD_CHUNK_GRANULARITY));
        await released;
        controller.enqueue(bytes.subarray(UPLOAD_CHUNK_GRANULARITY));
        controller.close();
      },
    });
    const response = fetch(uploadUrl, {
      method: 'PUT',
      headers: {
        'content-range': `bytes 0-${bytes.length - 1}/${bytes.length}`,
        'content-length': String(bytes.length),
      },
      body,
      duplex: 'half',
    } as RequestInit);
    return { response, release };
  }

  /** One run of the `maintenance` Schedule's workflow; answers its sweep of abandoned uploads. */
  async function runSweep(): Promise<{ failed: number; released: number }> {
    const result = await stack.client.workflow.execute('maintenanceWorkflow', {
      taskQueue: taskQueueName(stack.taskQueuePrefix, 'io'),
      workflowId: `upload-sweep-${randomUUID()}`,
      args: [{}],
    });
    return (result as { abandonedUploads: { failed: number; released: number } }).abandonedUploads;
  }

  async function uploadRow(id: string) {
    const [row] = await stack.sql<{ status: string; uploadState: string | null; writer: string | null }[]>`
      SELECT status, upload_state AS "uploadState", upload_writer AS writer FROM samples WHERE id = ${id}`;
    return row!;
  }

  /** Waits until the database's clock has passed the upload's session expiry. */
  async function expired(id: string): Promise<void> {
    for (;;) {
      const [row] = await stack.sql<{ past: boolean }[]>`
        SELECT upload_expires_at <= now() AS past FROM samples WHERE id = ${id}`;
      if (row!.past) return;
      await sleep(200);
    }
  }

  async function until(probe: () => Promise<boolean>): Promise<void> {
    while (!(await probe())) await sleep(50);
  }

  test('an upload abandoned past its expiry ends upload_failed with its bytes dropped; a finished one is untouched', async () => {
    const bytes = randomBytes(FIRST_CHUNK + 100);
    const abandoned = await createUpload(bytes);
    expect((await putChunk(abandoned.uploadUrl, bytes, 0, FIRST_CHUNK)).status).toBe(308);
    const finished = await createUpload(bytes, stack.api);
    expect((await putChunk(finished.uploadUrl, bytes, 0, bytes.length)).status).toBe(200);
    expect(await harness.leftovers()).toHaveLength(1);

    await expired(abandoned.id);
    const swept = await runSweep();
    expect(swept).toEqual({ failed: 1, released: 1 });
    expect(await harness.leftovers()).toEqual([]);
    expect(await uploadRow(abandoned.id)).toMatchObject({ status: 'upload_failed', uploadState: null });
    const upload = await call('GET', `/uploads/${abandoned.id}`);
    expect(upload.json).toMatchObject({ status: 'upload_failed', statusMessage: ABANDONED_UPLOAD_MESSAGE });
    expect((await call('GET', `/samples/${abandoned.id}`)).json.status).toBe('upload_failed');

    // The URL is the credential, and it has expired (DECISIONS.md: 401 `unauthorized`).
    const late = await putChunk(abandoned.uploadUrl, bytes, FIRST_CHUNK, bytes.length);
    expect(late.status).toBe(401);
    expect(await late.json()).toMatchObject({ error: 'unauthorized' });
    const query = await fetch(abandoned.uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': `bytes */${bytes.length}` },
    });
    expect(query.status).toBe(401);

    const untouched = await call('GET', `/uploads/${finished.id}`);
    expect(untouched.json.status).not.toBe('upload_failed');
    expect(untouched.json.uploadedBytes).toBe(String(bytes.length));
    expect((await stack.store.stat(finished.storagePath))?.sizeBytes).toBe(bytes.length);

    // Idempotent: nothing is left to fail or release.
    expect(await runSweep()).toEqual({ failed: 0, released: 0 });
  }, 120_000);

  test('a last chunk in flight when its URL expires completes its upload: the sweep leaves a writer it hears from', async () => {
    const bytes = randomBytes(FIRST_CHUNK + 100);
    const upload = await createUpload(bytes);
    const chunk = heldChunk(upload.uploadUrl, bytes);
    await until(async () => (await uploadRow(upload.id)).uploadState !== null);
    await expired(upload.id);

    expect(await runSweep()).toEqual({ failed: 0, released: 0 });
    expect((await uploadRow(upload.id)).status).toBe('uploading');
    chunk.release();
    const response = await chunk.response;
    expect(response.status).toBe(200);
    expect(((await response.json()) as { status: string }).status).toBe('deid_running');

    expect(await runSweep()).toEqual({ failed: 0, released: 0 });
    expect((await stack.store.stat(upload.storagePath))?.sizeBytes).toBe(bytes.length);
    expect(await harness.leftovers()).toEqual([]);
  }, 120_000);

  test('a writer gone silent past its claim: the sweep fails the upload, and the bytes it stores after are dropped', async () => {
    const bytes = randomBytes(FIRST_CHUNK + 100);
    const upload = await createUpload(bytes);
    const chunk = heldChunk(upload.uploadUrl, bytes);
    await until(async () => (await uploadRow(upload.id)).uploadState !== null);
    await expired(upload.id);
    // The writer was last heard from longer ago than a claim lasts (a stalled client or a dead process).
    await stack.sql`UPDATE samples SET upload_writer_seen_at = now() - interval '1 hour' WHERE id = ${upload.id}`;

    expect(await runSweep()).toEqual({ failed: 1, released: 1 });
    expect(await uploadRow(upload.id)).toMatchObject({ status: 'upload_failed', uploadState: null });
    chunk.release();
    const response = await chunk.response;
    expect(response.status).toBe(200);
    expect(((await response.json()) as { status: string }).status).toBe('upload_failed');

    expect(await uploadRow(upload.id)).toMatchObject({
      status: 'upload_failed',
      uploadState: null,
      writer: null,
    });
    expect(await harness.leftovers()).toEqual([]);
    expect(await stack.store.stat(upload.storagePath)).toBeUndefined();
  }, 120_000);
});
