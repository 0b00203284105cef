import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { workflowIds } from '../../schemas/temporal';
import { UPLOAD_CHUNK_GRANULARITY } from '../../schemas/uploads';
import { apiClient, interruptedPut } from '../support/http';
import { createTenant, startStack, type TestStack } from '../support/stack';

const KiB256 = UPLOAD_CHUNK_GRANULARITY;
let stack: TestStack;
let call: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
});
afterAll(async () => {
  await stack?.close();
});

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function createUpload(fileSize: number, extra: Record<string, unknown> = {}) {
  const created = await call('POST', '/uploads', {
    filename: 'slide.svs',
    fileSize,
    contentType: 'image/tiff',
    ...extra,
  });
  expect(created.status).toBe(200);
  return created.json;
}

function putChunk(uploadUrl: string, bytes: Buffer, start: number, total: number) {
  return fetch(uploadUrl, {
    method: 'PUT',
    headers: { 'content-range': `bytes ${start}-${start + bytes.length - 1}/${total}` },
    body: bytes,
  });
}

async function waitForWorkflow(workflowId: string) {
  return stack.client.workflow.getHandle(workflowId).result();
}

describe('resumable uploads', () => {
  test('a new upload answers 200 with a session URL, gcsPath, and the sample in uploading', async () => {
    const upload = await createUpload(1234, { name: '  My slide ', mpp: { x: 0.25, y: 0.25 } });
    expect(upload).toMatchObject({
      filename: 'slide.svs',
      fileSize: '1234',
      uploadedBytes: '0',
      status: 'uploading',
      existing: false,
      autoSegment: true,
      widthPx: null,
    });
    expect(upload.uploadId).toBe(upload.id);
    expect(upload.uploadUrl).toContain(`/api/v1/upload-sessions/${upload.id}?token=`);
    expect(upload.storagePath).toContain(`/samples/${upload.id}/original/slide.svs`);
    expect(upload.gcsPath).toBe(upload.storagePath);
    const [row] = await stack.sql`SELECT name, mpp_override FROM samples WHERE id = ${upload.id}`;
    expect(row).toEqual({ name: 'My slide', mpp_override: 0.25 });
  });

  test('chunks answer 308 with Range, the last 200; ingest assembles the exact bytes', async () => {
    const bytes = randomBytes(3 * KiB256 + 1000);
    const upload = await createUpload(bytes.length, { contentSha256: sha256(bytes) });
    const first = await putChunk(upload.uploadUrl, bytes.subarray(0, 2 * KiB256), 0, bytes.length);
    expect(first.status).toBe(308);
    expect(first.headers.get('range')).toBe(`bytes=0-${2 * KiB256 - 1}`);
    const last = await putChunk(upload.uploadUrl, bytes.subarray(2 * KiB256), 2 * KiB256, bytes.length);
    expect(last.status).toBe(200);
    const done = (await last.json()) as Record<string, unknown>;
    expect(done).toMatchObject({
      id: upload.id,
      status: 'deid_running',
      uploadedBytes: String(bytes.length),
    });

    const result = await waitForWorkflow(workflowIds.ingest(upload.id));
    // Random bytes are no slide: ingest keeps them and says why (ingest.test.ts covers slides).
    expect(result).toMatchObject({
      status: 'deid_failed',
      statusMessage: expect.stringContaining('not a whole-slide'),
    });
    const [hashed] = await stack.sql`SELECT content_sha256 FROM samples WHERE id = ${upload.id}`;
    expect(hashed!.content_sha256).toBe(sha256(bytes));
    const stored = await stack.store.get(upload.storagePath);
    expect(Buffer.from(stored!).equals(bytes)).toBe(true);
    const [state] = await stack.sql`SELECT upload_state FROM samples WHERE id = ${upload.id}`;
    expect(state!.upload_state).toBeNull();
    const [sample] = await stack.sql`SELECT ingest_started_at FROM samples WHERE id = ${upload.id}`;
    expect(sample!.ingest_started_at).toBeInstanceOf(Date);
  });

  test('autoSegment is resolved at upload and stored: a later organization default leaves it', async () => {
    const org = stack.tenant.organizationId;
    await stack.sql`UPDATE organizations SET auto_segment_default = false WHERE id = ${org}`;
    try {
      const inherited = await createUpload(1000);
      const overridden = await createUpload(1000, { autoSegment: true });
      expect([inherited.autoSegment, overridden.autoSegment]).toEqual([false, true]);
      await stack.sql`UPDATE organizations SET auto_segment_default = NULL WHERE id = ${org}`;
      expect((await call('GET', `/uploads/${inherited.id}`)).json.autoSegment).toBe(false);
      const [row] = await stack.sql`SELECT auto_segment FROM samples WHERE id = ${inherited.id}`;
      expect(row!.auto_segment).toBe(false);
    } finally {
      await stack.sql`UPDATE organizations SET auto_segment_default = NULL WHERE id = ${org}`;
    }
  });

  test('an interrupted chunk is not stored; the client asks for the offset and resumes', async () => {
    const bytes = randomBytes(4 * KiB256);
    const upload = await createUpload(bytes.length);
    expect((await putChunk(upload.uploadUrl, bytes.subarray(0, KiB256), 0, bytes.length)).status).toBe(308);

    await interruptedPut(
      upload.uploadUrl,
      `bytes ${KiB256}-${4 * KiB256 - 1}/${bytes.length}`,
      3 * KiB256,
      bytes.subarray(KiB256, 2 * KiB256),
    );
    await sleep(300);

    const probe = await fetch(upload.uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': `bytes */${bytes.length}` },
    });
    expect(probe.status).toBe(308);
    expect(probe.headers.get('range')).toBe(`bytes=0-${KiB256 - 1}`);

    const rest = await putChunk(upload.uploadUrl, bytes.subarray(KiB256), KiB256, bytes.length);
    expect(rest.status).toBe(200);
    await waitForWorkflow(workflowIds.ingest(upload.id));
    expect(Buffer.from((await stack.store.get(upload.storagePath))!).equals(bytes)).toBe(true);
  });

  test('a chunk that does not start at the stored offset is not stored (308 with the true Range)', async () => {
    const bytes = randomBytes(2 * KiB256);
    const upload = await createUpload(bytes.length);
    const skipped = await putChunk(upload.uploadUrl, bytes.subarray(KiB256), KiB256, bytes.length);
    expect(skipped.status).toBe(308);
    expect(skipped.headers.get('range')).toBeNull();
    expect((await call('GET', `/uploads/${upload.id}`)).json.uploadedBytes).toBe('0');
  });

  test('intermediate chunks must be multiples of 256 KiB', async () => {
    const upload = await createUpload(KiB256 * 2);
    const response = await putChunk(upload.uploadUrl, randomBytes(1000), 0, KiB256 * 2);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toBe('invalid_request');
  });

  test('a TOTAL other than fileSize is 400 and marks the upload upload_failed', async () => {
    const upload = await createUpload(KiB256);
    const response = await putChunk(upload.uploadUrl, randomBytes(KiB256), 0, KiB256 + 1);
    expect(response.status).toBe(400);
    const after = await call('GET', `/uploads/${upload.id}`);
    expect(after.json.status).toBe('upload_failed');
    expect(after.json.statusMessage).toContain('differs from the declared fileSize');
  });

  test('once every byte is stored, a replayed chunk with another total cannot fail the upload', async () => {
    const bytes = randomBytes(KiB256);
    const upload = await createUpload(bytes.length);
    expect((await putChunk(upload.uploadUrl, bytes, 0, bytes.length)).status).toBe(200);
    const replay = await putChunk(upload.uploadUrl, bytes, 0, bytes.length + 1);
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { status: string }).status).not.toBe('upload_failed');
  });

  test('a body longer than its Content-Range is refused and nothing is recorded', async () => {
    const upload = await createUpload(2 * KiB256);
    const response = await fetch(upload.uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': `bytes 0-${KiB256 - 1}/${2 * KiB256}` },
      body: randomBytes(KiB256 + 10),
    });
    expect(response.status).toBe(400);
    expect((await call('GET', `/uploads/${upload.id}`)).json.uploadedBytes).toBe('0');
  });

  test('a tampered or expired session URL is 401: the URL is the credential', async () => {
    const upload = await createUpload(KiB256);
    const tampered = upload.uploadUrl.replace(
      /token=(.)/,
      (_m: string, c: string) => `token=${c === 'A' ? 'B' : 'A'}`,
    );
    const response = await putChunk(tampered, randomBytes(KiB256), 0, KiB256);
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: string }).error).toBe('unauthorized');

    const shortLived = await startStack({ limits: { uploadSessionTtlSeconds: 1 } });
    try {
      const created = await apiClient(shortLived.api, shortLived.tenant.apiKey)('POST', '/uploads', {
        filename: 'a.tif',
        fileSize: KiB256,
        contentType: 'image/tiff',
      });
      await sleep(2100);
      expect((await putChunk(created.json.uploadUrl, randomBytes(KiB256), 0, KiB256)).status).toBe(401);
    } finally {
      await shortLived.close();
    }
  });

  // A finished upload's match: test/integration/security-gaps.test.ts.
  test('dedup: the same contentSha256 of an unfinished upload starts a new one', async () => {
    const hash = sha256(randomBytes(16));
    const first = await createUpload(500, { contentSha256: hash });
    const again = await call('POST', '/uploads', {
      filename: 'other.svs',
      fileSize: '500',
      contentType: 'image/tiff',
      contentSha256: hash,
    });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ existing: false });
    expect(again.json.id).not.toBe(first.id);
    expect(again.json.uploadUrl).toBeDefined();

    const other = await createTenant(stack.sql);
    const foreign = await apiClient(stack.api, other.apiKey)('POST', '/uploads', {
      filename: 'x.svs',
      fileSize: 500,
      contentType: 'image/tiff',
      contentSha256: hash,
    });
    expect(foreign.status).toBe(200);
  });

  test('complete is idempotent and returns the upload as it stands', async () => {
    const upload = await createUpload(KiB256);
    const once = await call('POST', `/uploads/${upload.id}/complete`);
    const twice = await call('POST', `/uploads/${upload.id}/complete`);
    expect(once.status).toBe(200);
    expect(twice.json).toEqual(once.json);
    expect(once.json.status).toBe('uploading');
  });

  test('uploads of another organization are 404, never 403', async () => {
    const upload = await createUpload(KiB256);
    const other = await createTenant(stack.sql);
    const foreign = apiClient(stack.api, other.apiKey);
    expect((await foreign('GET', `/uploads/${upload.id}`)).status).toBe(404);
    expect((await foreign('POST', `/uploads/${upload.id}/complete`)).status).toBe(404);
    expect((await foreign('GET', '/uploads')).json.uploads).toEqual([]);
  });
});

describe('upload listing', () => {
  test('cursor pages, newest first, stable under concurrent inserts', async () => {
    const tenant = await createTenant(stack.sql);
    const client = apiClient(stack.api, tenant.apiKey);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await client('POST', '/uploads', {
        filename: `s${i}.svs`,
        fileSize: 10,
        contentType: 'image/tiff',
      });
      ids.push(created.json.id);
    }
    const first = await client('GET', '/uploads?limit=2');
    expect(first.json.uploads.map((u: { id: string }) => u.id)).toEqual([ids[4], ids[3]]);
    await client('POST', '/uploads', { filename: 'late.svs', fileSize: 10, contentType: 'image/tiff' });
    const second = await client(
      'GET',
      `/uploads?limit=2&cursor=${encodeURIComponent(first.json.nextCursor)}`,
    );
    expect(second.json.uploads.map((u: { id: string }) => u.id)).toEqual([ids[2], ids[1]]);
    const third = await client(
      'GET',
      `/uploads?limit=5&cursor=${encodeURIComponent(second.json.nextCursor)}`,
    );
    expect(third.json.uploads.map((u: { id: string }) => u.id)).toEqual([ids[0]]);
    expect(third.json.nextCursor).toBeNull();
  });

  test('archived uploads are not listed', async () => {
    const tenant = await createTenant(stack.sql);
    const client = apiClient(stack.api, tenant.apiKey);
    const created = await client('POST', '/uploads', {
      filename: 'a.svs',
      fileSize: 10,
      contentType: 'image/tiff',
    });
    await stack.sql`UPDATE samples SET archived_at = now() WHERE id = ${created.json.id}`;
    expect((await client('GET', '/uploads')).json.uploads).toEqual([]);
  });

  test('a tampered cursor, an unknown parameter or a bad limit is 400', async () => {
    const list = await call('GET', '/uploads?limit=1');
    const cursor: string = list.json.nextCursor;
    const forged = `${cursor.slice(0, -2)}${cursor.endsWith('AA') ? 'BB' : 'AA'}`;
    expect((await call('GET', `/uploads?cursor=${forged}`)).status).toBe(400);
    expect((await call('GET', '/uploads?page=2')).json.error).toBe('invalid_request');
    expect((await call('GET', '/uploads?limit=201')).status).toBe(400);
  });
});
