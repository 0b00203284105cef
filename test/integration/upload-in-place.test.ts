import { createHash, randomBytes } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { workflowIds } from '../../schemas/temporal';
import { UPLOAD_CHUNK_GRANULARITY } from '../../schemas/uploads';
import { apiClient } from '../support/http';
import { startStack, type TestStack } from '../support/stack';

/**
 * Uploads stored in place through the API: the chunks go into the one file that becomes the
 * object, its SHA-256 is known when the last byte lands, and no part, copy or staging file is
 * left. Each test asserts on structure (inodes, files, columns), never on time.
 */
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
const stagingDir = () => path.join(stack.fsRoot, '.tmp', 'uploads');
const staged = async () => readdir(stagingDir()).catch(() => [] as string[]);

async function createUpload(bytes: Buffer, extra: Record<string, unknown> = {}) {
  const created = await call('POST', '/uploads', {
    filename: 'slide.svs',
    fileSize: bytes.length,
    contentType: 'image/tiff',
    ...extra,
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

async function sampleRow(id: string) {
  const [row] = await stack.sql`
    SELECT content_sha256, content_sha256_checked, upload_state, upload_writer FROM samples WHERE id = ${id}`;
  return row!;
}

describe('uploads stored in place', () => {
  test('the chunks are written into the file that becomes the object: no parts, no copy', async () => {
    const bytes = randomBytes(4 * KiB256 + 77);
    const upload = await createUpload(bytes);
    expect((await putChunk(upload.uploadUrl, bytes, 0, 2 * KiB256)).status).toBe(308);
    const before = await staged();
    const stagedFile = await stat(path.join(stagingDir(), before.find(Boolean)!));
    // Pre-sized: the one file has the whole upload's size from its first chunk on.
    expect(stagedFile.size).toBe(bytes.length);
    expect(await stack.store.stat(upload.storagePath)).toBeUndefined();

    const last = await putChunk(upload.uploadUrl, bytes, 2 * KiB256, bytes.length);
    expect(last.status).toBe(200);
    // Published with the last chunk, by a rename of that file: the same inode, nothing staged.
    const published = await stat(path.join(stack.fsRoot, upload.storagePath));
    expect(published.ino).toBe(stagedFile.ino);
    expect(await staged()).not.toContain(before.find(Boolean));
    const row = await sampleRow(upload.id);
    expect(row).toMatchObject({
      content_sha256: sha256(bytes),
      content_sha256_checked: true,
      upload_state: null,
    });
    const keys: string[] = [];
    for await (const key of stack.store.list(`orgs/${stack.tenant.organizationId}/samples/${upload.id}/`))
      keys.push(key);
    expect(keys).toEqual([upload.storagePath]);
    await stack.client.workflow.getHandle(workflowIds.ingest(upload.id)).result();
    expect(Buffer.from((await stack.store.get(upload.storagePath))!).equals(bytes)).toBe(true);
  });

  test('chunks through two API processes: ingest hashes the stored object once, in place', async () => {
    const bytes = randomBytes(3 * KiB256);
    const upload = await createUpload(bytes);
    const other = await stack.startApi({});
    try {
      expect((await putChunk(upload.uploadUrl, bytes, 0, KiB256)).status).toBe(308);
      const otherUrl = upload.uploadUrl.replace(stack.baseUrl, other.baseUrl);
      expect((await putChunk(otherUrl, bytes, KiB256, bytes.length)).status).toBe(200);
    } finally {
      await other.close();
    }
    // The second process never saw the first chunk, so the hash waits for ingest.
    expect((await sampleRow(upload.id)).content_sha256_checked).toBe(false);
    const published = await stat(path.join(stack.fsRoot, upload.storagePath));
    await stack.client.workflow.getHandle(workflowIds.ingest(upload.id)).result();
    expect(await sampleRow(upload.id)).toMatchObject({
      content_sha256: sha256(bytes),
      content_sha256_checked: true,
    });
    expect((await stat(path.join(stack.fsRoot, upload.storagePath))).ino).toBe(published.ino);
  });

  test('bytes other than the declared contentSha256 fail the upload at the last chunk and are dropped', async () => {
    const bytes = randomBytes(2 * KiB256);
    const upload = await createUpload(bytes, { contentSha256: sha256(randomBytes(8)) });
    expect((await putChunk(upload.uploadUrl, bytes, 0, KiB256)).status).toBe(308);
    const last = await putChunk(upload.uploadUrl, bytes, KiB256, bytes.length);
    expect(last.status).toBe(200);
    expect(await last.json()).toMatchObject({
      status: 'upload_failed',
      statusMessage: expect.stringContaining('SHA-256'),
    });
    expect(await stack.store.stat(upload.storagePath)).toBeUndefined();
    expect((await sampleRow(upload.id)).upload_state).toBeNull();
  });

  test('the same chunk sent twice at once is stored once; the second is told what is stored', async () => {
    const bytes = randomBytes(3 * KiB256);
    const upload = await createUpload(bytes);
    const both = await Promise.all([
      putChunk(upload.uploadUrl, bytes, 0, 2 * KiB256),
      putChunk(upload.uploadUrl, bytes, 0, 2 * KiB256),
    ]);
    expect(both.map((response) => [response.status, response.headers.get('range')])).toEqual([
      [308, `bytes=0-${2 * KiB256 - 1}`],
      [308, `bytes=0-${2 * KiB256 - 1}`],
    ]);
    expect((await sampleRow(upload.id)).upload_writer).toBeNull();
    expect((await putChunk(upload.uploadUrl, bytes, 2 * KiB256, bytes.length)).status).toBe(200);
    expect(Buffer.from((await stack.store.get(upload.storagePath))!).equals(bytes)).toBe(true);
    expect((await sampleRow(upload.id)).content_sha256).toBe(sha256(bytes));
  });

  test('a TOTAL other than fileSize fails the upload and drops the bytes stored so far', async () => {
    const bytes = randomBytes(2 * KiB256);
    const upload = await createUpload(bytes);
    expect((await putChunk(upload.uploadUrl, bytes, 0, KiB256)).status).toBe(308);
    expect((await sampleRow(upload.id)).upload_state).not.toBeNull();
    const wrong = await fetch(upload.uploadUrl, {
      method: 'PUT',
      headers: { 'content-range': `bytes ${KiB256}-${2 * KiB256 - 1}/${bytes.length + 1}` },
      body: bytes.subarray(KiB256),
    });
    expect(wrong.status).toBe(400);
    expect((await sampleRow(upload.id)).upload_state).toBeNull();
    expect((await call('GET', `/uploads/${upload.id}`)).json.status).toBe('upload_failed');
  });

  test('a purged upload that never finished leaves no staged bytes', async () => {
    const bytes = randomBytes(2 * KiB256);
    const upload = await createUpload(bytes);
    expect((await putChunk(upload.uploadUrl, bytes, 0, KiB256)).status).toBe(308);
    const [state] = await stack.sql`SELECT upload_state FROM samples WHERE id = ${upload.id}`;
    const file = (JSON.parse(state!.upload_state) as { file: string }).file;
    expect(await staged()).toContain(file);
    await stack.sql`UPDATE samples SET trashed_at = now() - interval '100 days' WHERE id = ${upload.id}`;
    await stack.client.workflow.execute('trashPurgeWorkflow', {
      workflowId: `purge-${upload.id}`,
      taskQueue: `${stack.taskQueuePrefix}-io`,
      args: [{ asOf: new Date().toISOString() }],
    });
    expect(await staged()).not.toContain(file);
    expect(await stack.sql`SELECT id FROM samples WHERE id = ${upload.id}`).toHaveLength(0);
  });
});
