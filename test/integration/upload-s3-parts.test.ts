import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { crc32 } from 'node:zlib';
import { ListMultipartUploadsCommand, ListObjectsV2Command, ListPartsCommand } from '@aws-sdk/client-s3';
import { createObjectStore, type ObjectStore } from '../../storage';
import { apiClient } from '../support/http';
import { type MinioBucket, startMinioBucket } from '../support/minio-bucket';
import { startStack, type TestStack } from '../support/stack';
import { bodyPieces } from '../support/uploads';

/**
 * The S3 backend sends each chunk as several parts (at least 16 MiB each), the next streaming
 * while S3 stores the one before. These tests hold it to the exact bytes wherever that layout
 * could go wrong: a chunk cut off after some of its parts were stored and resumed in chunks of
 * other sizes, a chunk sent again, small chunks joining the first part of the chunk that fills
 * them, and a client that disconnects mid-chunk through the HTTP protocol; and the parts go
 * over kept-alive connections (the SDK's `Expect: 100-continue` would open one per part).
 */
const MiB = 1024 * 1024;

let minio: MinioBucket;
let store: ObjectStore;

beforeAll(async () => {
  minio = await startMinioBucket('s3-parts', 'parts');
  store = createObjectStore({ backend: 's3', s3: minio.options });
}, 90_000);
afterAll(() => minio?.stop());

/** How many parts the server joined the object from (S3's ETag `"<md5>-N"`). */
async function partsOf(key: string): Promise<number> {
  const listed = await minio.client.send(
    new ListObjectsV2Command({ Bucket: minio.options.bucket, Prefix: `parts/${key}` }),
  );
  return Number(/-(\d+)"$/.exec(listed.Contents?.[0]?.ETag ?? '')?.[1] ?? 1);
}

/** Writes `bytes[offset, offset + length)` as one chunk. */
function write(state: string, bytes: Buffer, offset: number, length: number, failAt?: number) {
  const body = bodyPieces(bytes.subarray(offset, offset + length), failAt);
  return store.uploads.write(state, { offset, length, body });
}

async function expectPublished(key: string, bytes: Buffer, parts: number) {
  expect(Buffer.from((await store.get(key))!).equals(bytes)).toBe(true);
  expect(await partsOf(key)).toBe(parts);
  expect(await minio.uploadLeftovers()).toEqual([]);
}

describe('S3 chunks sent as several parts', () => {
  test('a chunk cut off after some of its parts were stored, resumed in chunks of other sizes, gives the exact bytes', async () => {
    const bytes = randomBytes(16 * MiB + 64 * MiB + 1000);
    const begun = await store.uploads.begin('cut/slide.svs', { sizeBytes: bytes.length });
    const first = await write(begun, bytes, 0, 16 * MiB);
    // Four parts of 16 MiB: the first two are whole and stored when the client goes away.
    await expect(write(first, bytes, 16 * MiB, 64 * MiB, 40 * MiB)).rejects.toThrow('the client went away');
    // The same parts now hold other bytes: 20 MiB (one part), then 28 MiB + 1000 and 16 MiB.
    const resumed = await write(first, bytes, 16 * MiB, 20 * MiB);
    const last = await write(resumed, bytes, 36 * MiB, bytes.length - 36 * MiB);
    await store.uploads.complete(last);
    await expectPublished('cut/slide.svs', bytes, 4);
  }, 120_000);

  test('a chunk sent again, after it was stored and twice at once, rewrites the same parts', async () => {
    const bytes = randomBytes(40 * MiB + 300);
    const begun = await store.uploads.begin('again/slide.svs', { sizeBytes: bytes.length });
    const once = await write(begun, bytes, 0, 40 * MiB);
    const [twice, thrice] = await Promise.all([
      write(begun, bytes, 0, 40 * MiB),
      write(begun, bytes, 0, 40 * MiB),
    ]);
    expect(twice).toEqual(once);
    expect(thrice).toEqual(once);
    await store.uploads.complete(await write(once, bytes, 40 * MiB, 300));
    // 24 MiB + 16 MiB, then the last 300 bytes.
    await expectPublished('again/slide.svs', bytes, 3);
  }, 120_000);

  test('small chunks held as pieces go out in the first part of the chunk that fills them', async () => {
    const bytes = randomBytes(3 * 256 * 1024 + 40 * MiB + 12_345);
    let state = await store.uploads.begin('pieces/slide.svs', { sizeBytes: bytes.length });
    for (let offset = 0; offset < 3 * 256 * 1024; offset += 256 * 1024)
      state = await write(state, bytes, offset, 256 * 1024);
    state = await write(state, bytes, 3 * 256 * 1024, 40 * MiB);
    state = await write(state, bytes, 3 * 256 * 1024 + 40 * MiB, 12_345);
    await store.uploads.complete(state);
    await expectPublished('pieces/slide.svs', bytes, 3);
  }, 120_000);

  test('a body longer than its chunk fails in its last part, and nothing of it is published', async () => {
    const bytes = randomBytes(48 * MiB);
    const begun = await store.uploads.begin('long/slide.svs', { sizeBytes: bytes.length });
    const long = store.uploads.write(begun, {
      offset: 0,
      length: 40 * MiB,
      body: bodyPieces(bytes),
    });
    await expect(long).rejects.toThrow();
    await store.uploads.complete(await write(begun, bytes, 0, bytes.length));
    await expectPublished('long/slide.svs', bytes, 3);
  }, 120_000);
});

test('each part streams with its CRC32, which S3 checks and keeps', async () => {
  const bytes = randomBytes(40 * MiB);
  const begun = await store.uploads.begin('checked/slide.svs', { sizeBytes: bytes.length });
  const written = await write(begun, bytes, 0, bytes.length);
  const Bucket = minio.options.bucket;
  const Key = 'parts/checked/slide.svs';
  const { Uploads } = await minio.client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: Key }));
  const { Parts } = await minio.client.send(
    new ListPartsCommand({ Bucket, Key, UploadId: Uploads?.[0]?.UploadId }),
  );
  const checksum = (part: Buffer) =>
    Buffer.from(crc32(part).toString(16).padStart(8, '0'), 'hex').toString('base64');
  // Parts of 16 MiB, the first taking the rest: 24 + 16 MiB.
  expect(Parts?.map((part) => part.ChecksumCRC32)).toEqual([
    checksum(bytes.subarray(0, 24 * MiB)),
    checksum(bytes.subarray(24 * MiB)),
  ]);
  await store.uploads.complete(written);
  await expectPublished('checked/slide.svs', bytes, 2);
}, 120_000);

/** Connections to or from `port` that were closed in the last minute (Linux keeps them in TIME-WAIT). */
async function closedConnections(port: number): Promise<number> {
  let count = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const lines = (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const line of lines) {
      const [, local, remote, state] = line.trim().split(/\s+/);
      const ports = [local, remote].map((address) => Number.parseInt(address?.split(':')[1] ?? '', 16));
      if (state === '06' && ports.includes(port)) count++;
    }
  }
  return count;
}

test('the parts of a chunk go over kept-alive connections, not one each', async () => {
  const port = Number(new URL(minio.options.endpoint!).port);
  const bytes = randomBytes(64 * MiB);
  const begun = await store.uploads.begin('kept-alive/slide.svs', { sizeBytes: bytes.length });
  const before = await closedConnections(port);
  // Four parts of 16 MiB; a connection per part would leave four closed ones behind.
  await store.uploads.complete(await write(begun, bytes, 0, bytes.length));
  expect((await closedConnections(port)) - before).toBeLessThan(4);
  await expectPublished('kept-alive/slide.svs', bytes, 4);
}, 120_000);

describe('the resumable protocol on S3', () => {
  let stack: TestStack;

  beforeAll(async () => {
    // Ingest never starts: the object stays as its last byte left it.
    stack = await startStack({ store, workflows: (real) => ({ ...real, startIngest: async () => {} }) });
  }, 120_000);
  afterAll(() => stack?.close());

  /** Sends `bytes[start, end)` as a chunk but goes away after `cutAt` bytes of it. */
  function cutChunk(uploadUrl: string, bytes: Buffer, start: number, end: number, cutAt: number) {
    return new Promise<void>((resolve) => {
      const req = request(uploadUrl, {
        method: 'PUT',
        headers: {
          'content-range': `bytes ${start}-${end - 1}/${bytes.length}`,
          'content-length': String(end - start),
        },
      });
      req.on('error', () => resolve());
      req.on('response', (res) => {
        res.resume();
        resolve();
      });
      req.write(bytes.subarray(start, start + cutAt), () => {
        // Let the API store what it was sent, then go away mid-chunk.
        setTimeout(() => req.destroy(), 500);
      });
    });
  }

  async function stored(uploadUrl: string, total: number): Promise<number> {
    const query = await fetch(uploadUrl, { method: 'PUT', headers: { 'content-range': `bytes */${total}` } });
    expect(query.status).toBe(308);
    const range = query.headers.get('range');
    return range === null ? 0 : Number(/bytes=0-(\d+)/.exec(range)![1]) + 1;
  }

  test('a resumed upload after a disconnect mid-chunk gives the exact bytes and their SHA-256', async () => {
    const bytes = randomBytes(64 * MiB + 40 * MiB + 4321);
    const call = apiClient(stack.api, stack.tenant.apiKey);
    const created = await call('POST', '/uploads', {
      filename: 'slide.svs',
      fileSize: bytes.length,
      contentType: 'image/tiff',
    });
    const upload = created.json as { id: string; uploadUrl: string; storagePath: string };
    const put = (start: number, end: number) =>
      fetch(upload.uploadUrl, {
        method: 'PUT',
        headers: { 'content-range': `bytes ${start}-${end - 1}/${bytes.length}` },
        body: bytes.subarray(start, end),
      });
    // Three of the chunk's four parts are whole when the client goes away.
    await cutChunk(upload.uploadUrl, bytes, 0, 64 * MiB, 50 * MiB);
    expect(await stored(upload.uploadUrl, bytes.length)).toBe(0);
    // Resumed in other sizes (a request for the same chunk waits for the cut one's writer).
    expect((await put(0, 32 * MiB)).status).toBe(308);
    expect(await stored(upload.uploadUrl, bytes.length)).toBe(32 * MiB);
    expect((await put(32 * MiB, 96 * MiB)).status).toBe(308);
    expect((await put(96 * MiB, bytes.length)).status).toBe(200);

    expect(Buffer.from((await store.get(upload.storagePath))!).equals(bytes)).toBe(true);
    const [row] = await stack.sql`SELECT content_sha256 FROM samples WHERE id = ${upload.id}`;
    expect(row!.content_sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(await minio.uploadLeftovers()).toEqual([]);
  }, 180_000);
});
