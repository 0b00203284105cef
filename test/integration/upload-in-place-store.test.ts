import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createObjectStore, type ObjectStore } from '../../storage';
import { startMinioBucket } from '../support/minio-bucket';
import { bodyPieces } from '../support/uploads';

/**
 * The in-place upload contract (`ObjectStore.uploads`), run against both backends: chunks land
 * where they belong, completion publishes the object without a second copy, and nothing is
 * left behind. `leftovers` looks behind the store only to prove that last point.
 */
interface Harness {
  store: ObjectStore;
  /** Everything the backend holds besides the published objects: staging files, pieces, multipart uploads. */
  leftovers(): Promise<string[]>;
  /** Whether the server joined the object from `parts` parts (S3 only: the fs backend's proof is the inode test below). */
  joinedFromParts?(key: string, parts: number): Promise<boolean>;
  stop(): Promise<void>;
}

const MiB = 1024 * 1024;
const KiB256 = 256 * 1024;

async function startFsHarness(): Promise<Harness> {
  const root = await mkdtemp(path.join(tmpdir(), 'sps-in-place-'));
  const store = createObjectStore({
    backend: 'fs',
    fs: { root, publicBaseUrl: 'http://127.0.0.1:1', signingSecret: 'x'.repeat(40) },
  });
  const staging = path.join(root, '.tmp', 'uploads');
  return {
    store,
    leftovers: async () => readdir(staging).catch(() => []),
    stop: () => rm(root, { recursive: true, force: true }),
  };
}

async function startS3Harness(): Promise<Harness> {
  const minio = await startMinioBucket('in-place', 'tenant-a');
  const { client } = minio;
  const Bucket = minio.options.bucket;
  return {
    store: createObjectStore({ backend: 's3', s3: minio.options }),
    leftovers: () => minio.uploadLeftovers(),
    async joinedFromParts(key, parts) {
      const head = await client.send(new ListObjectsV2Command({ Bucket, Prefix: `tenant-a/${key}` }));
      // S3 names an object the server joined from N parts `"<md5 of the parts' md5s>-N"`.
      return head.Contents?.[0]?.ETag?.endsWith(`-${parts}"`) ?? false;
    },
    stop: () => minio.stop(),
  };
}

/** Writes `bytes` in chunks of the given sizes (the last takes the rest) and completes. */
async function upload(store: ObjectStore, key: string, bytes: Buffer, sizes: number[]) {
  let state = await store.uploads.begin(key, { sizeBytes: bytes.length, contentType: 'image/tiff' });
  let offset = 0;
  for (const size of [...sizes, bytes.length]) {
    if (offset >= bytes.length) break;
    const length = Math.min(size, bytes.length - offset);
    const body = Readable.from([bytes.subarray(offset, offset + length)]);
    state = await store.uploads.write(state, { offset, length, body });
    offset += length;
  }
  return state;
}

function inPlaceContract(start: () => Promise<Harness>) {
  let harness: Harness;
  let store: ObjectStore;

  beforeAll(async () => {
    harness = await start();
    store = harness.store;
  }, 90_000);
  afterAll(() => harness?.stop());

  test('chunks of any allowed size land in order; the key reads nothing until complete', async () => {
    const bytes = randomBytes(13 * MiB + 1000);
    // Small chunks wait for a part on S3; large ones are a part each; the last is short.
    const state = await upload(store, 'a/slide.svs', bytes, [
      KiB256,
      KiB256,
      6 * MiB,
      4 * KiB256,
      MiB,
      5 * MiB,
    ]);
    expect(await store.get('a/slide.svs')).toBeUndefined();
    const info = await store.uploads.complete(state);
    expect(info.sizeBytes).toBe(bytes.length);
    expect(Buffer.from((await store.get('a/slide.svs'))!).equals(bytes)).toBe(true);
    expect(await harness.leftovers()).toEqual([]);
  });

  test('completing publishes the chunks themselves, not a copy, and can be repeated', async () => {
    const bytes = randomBytes(3 * 6 * MiB);
    const state = await upload(store, 'b/slide.svs', bytes, [6 * MiB, 6 * MiB]);
    const first = await store.uploads.complete(state);
    if (harness.joinedFromParts) expect(await harness.joinedFromParts('b/slide.svs', 3)).toBe(true);
    const again = await store.uploads.complete(state);
    expect(again.sizeBytes).toBe(first.sizeBytes);
    expect(Buffer.from((await store.get('b/slide.svs'))!).equals(bytes)).toBe(true);
    expect(await harness.leftovers()).toEqual([]);
  });

  test('a repeated chunk stores the same bytes again; two at once are safe', async () => {
    const bytes = randomBytes(3 * MiB);
    const begun = await store.uploads.begin('c/slide.svs', { sizeBytes: bytes.length });
    const chunk = (offset: number, length: number) => ({
      offset,
      length,
      body: Readable.from([bytes.subarray(offset, offset + length)]),
    });
    const once = await store.uploads.write(begun, chunk(0, MiB));
    // The caller lost the answer and sends the chunk again, twice at once.
    const [twice] = await Promise.all([
      store.uploads.write(begun, chunk(0, MiB)),
      store.uploads.write(begun, chunk(0, MiB)),
    ]);
    expect(twice).toEqual(once);
    const last = await store.uploads.write(twice!, chunk(MiB, 2 * MiB));
    await store.uploads.complete(last);
    expect(Buffer.from((await store.get('c/slide.svs'))!).equals(bytes)).toBe(true);
    expect(await harness.leftovers()).toEqual([]);
  });

  test('a short body or a chunk out of order is refused, and the upload goes on', async () => {
    const bytes = randomBytes(2 * MiB);
    const begun = await store.uploads.begin('d/slide.svs', { sizeBytes: bytes.length });
    const short = store.uploads.write(begun, {
      offset: 0,
      length: MiB,
      body: Readable.from([bytes.subarray(0, 1000)]),
    });
    await expect(short).rejects.toThrow();
    const skipped = store.uploads.write(begun, {
      offset: MiB,
      length: MiB,
      body: Readable.from([bytes.subarray(MiB)]),
    });
    await expect(skipped).rejects.toThrow();
    const state = await store.uploads.write(begun, {
      offset: 0,
      length: 2 * MiB,
      body: Readable.from([bytes]),
    });
    await store.uploads.complete(state);
    expect(Buffer.from((await store.get('d/slide.svs'))!).equals(bytes)).toBe(true);
  });

  test('abort leaves nothing behind, and can be repeated', async () => {
    const bytes = randomBytes(7 * MiB);
    const state = await upload(store, 'e/slide.svs', bytes.subarray(0, 6 * MiB + KiB256), [6 * MiB]);
    await store.uploads.abort(state);
    await store.uploads.abort(state);
    expect(await store.get('e/slide.svs')).toBeUndefined();
    expect(await harness.leftovers()).toEqual([]);
  });

  test('an empty object completes with no chunk', async () => {
    const state = await store.uploads.begin('f/empty.svs', { sizeBytes: 0 });
    expect((await store.uploads.complete(state)).sizeBytes).toBe(0);
    expect(await store.get('f/empty.svs')).toEqual(new Uint8Array());
    expect(await harness.leftovers()).toEqual([]);
  });

  test('staged bytes are never listed as objects', async () => {
    const state = await upload(store, 'g/slide.svs', randomBytes(2 * MiB), [KiB256]);
    const keys: string[] = [];
    for await (const key of store.list('')) keys.push(key);
    expect(keys.filter((key) => key.startsWith('g/') || key.startsWith('.tmp'))).toEqual([]);
    await store.uploads.abort(state);
  });

  test('large chunks land whole and in order', async () => {
    const bytes = randomBytes(90 * MiB + 12345);
    const chunks = [40 * MiB, 35 * MiB, bytes.length - 75 * MiB];
    let state = await store.uploads.begin('large-a/slide.svs', { sizeBytes: bytes.length });
    let offset = 0;
    for (const length of chunks) {
      const body = bodyPieces(bytes.subarray(offset, offset + length));
      state = await store.uploads.write(state, { offset, length, body });
      offset += length;
    }
    await store.uploads.complete(state);
    expect(Buffer.from((await store.get('large-a/slide.svs'))!).equals(bytes)).toBe(true);
    // On S3 a chunk is parts of at least 16 MiB streamed as it arrives: 24 + 16, 19 + 16, and the rest.
    if (harness.joinedFromParts) expect(await harness.joinedFromParts('large-a/slide.svs', 5)).toBe(true);
    expect(await harness.leftovers()).toEqual([]);
  }, 120_000);

  test('a large chunk cut off midway is refused, and sent again it lands', async () => {
    const bytes = randomBytes(48 * MiB);
    const begun = await store.uploads.begin('large-b/slide.svs', { sizeBytes: bytes.length });
    const length = bytes.length;
    const cut = store.uploads.write(begun, { offset: 0, length, body: bodyPieces(bytes, 20 * MiB) });
    await expect(cut).rejects.toThrow();
    const long = store.uploads.write(begun, {
      offset: 0,
      length: length - MiB,
      body: bodyPieces(bytes),
    });
    await expect(long).rejects.toThrow();
    const state = await store.uploads.write(begun, { offset: 0, length, body: bodyPieces(bytes) });
    await store.uploads.complete(state);
    expect(Buffer.from((await store.get('large-b/slide.svs'))!).equals(bytes)).toBe(true);
    expect(await harness.leftovers()).toEqual([]);
  }, 120_000);
}

describe.each([
  ['filesystem', startFsHarness],
  ['S3 (MinIO)', startS3Harness],
])('%s in-place uploads', (_name, start) => inPlaceContract(start));

describe('filesystem in-place uploads', () => {
  test('the published file is the one the chunks were written into (same inode)', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'sps-in-place-'));
    try {
      const store = createObjectStore({
        backend: 'fs',
        fs: { root, publicBaseUrl: 'http://127.0.0.1:1', signingSecret: 'x'.repeat(40) },
      });
      const bytes = randomBytes(3 * MiB);
      const state = await upload(store, 'h/slide.svs', bytes, [MiB]);
      const [staged] = await readdir(path.join(root, '.tmp', 'uploads'));
      const before = await stat(path.join(root, '.tmp', 'uploads', staged!));
      await store.uploads.complete(state);
      const after = await stat(path.join(root, 'h', 'slide.svs'));
      expect(after.ino).toBe(before.ino);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
