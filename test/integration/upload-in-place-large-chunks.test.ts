import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createObjectStore, type ObjectStore } from '../../storage';
import { startMinioBucket } from '../support/minio-bucket';

/**
 * Chunks large enough that the filesystem backend syncs in the background while the bytes
 * still arrive, and S3 parts streamed from bodies that may fail midway. Bodies come in
 * socket-sized pieces, as a request's do.
 */
const MiB = 1024 * 1024;
const PIECE = 64 * 1024;

interface Harness {
  store: ObjectStore;
  /** Staging files, pieces or multipart uploads left behind. */
  leftovers(): Promise<string[]>;
  /** The number of parts the server joined the object from (S3 only). */
  partsOf?(key: string): Promise<number>;
  stop(): Promise<void>;
}

async function startFsHarness(): Promise<Harness> {
  const root = await mkdtemp(path.join(tmpdir(), 'sps-large-chunks-'));
  return {
    store: createObjectStore({
      backend: 'fs',
      fs: { root, publicBaseUrl: 'http://127.0.0.1:1', signingSecret: 'x'.repeat(40) },
    }),
    leftovers: async () => readdir(path.join(root, '.tmp', 'uploads')).catch(() => []),
    stop: () => rm(root, { recursive: true, force: true }),
  };
}

async function startS3Harness(): Promise<Harness> {
  const minio = await startMinioBucket('large-chunks');
  const { client } = minio;
  const Bucket = minio.options.bucket;
  return {
    store: createObjectStore({ backend: 's3', s3: minio.options }),
    leftovers: () => minio.uploadLeftovers(),
    async partsOf(key) {
      const listed = await client.send(new ListObjectsV2Command({ Bucket, Prefix: key }));
      // S3 names an object the server joined from N parts `"<md5 of the parts' md5s>-N"`.
      return Number(/-(\d+)"$/.exec(listed.Contents?.[0]?.ETag ?? '')?.[1] ?? 1);
    },
    stop: () => minio.stop(),
  };
}

/** `bytes` in socket-sized pieces, failing with `failAt` bytes sent when given. */
function pieces(bytes: Buffer, failAt?: number): Readable {
  return Readable.from(
    (async function* () {
      for (let at = 0; at < bytes.length; at += PIECE) {
        if (failAt !== undefined && at >= failAt) throw new Error('the client went away');
        yield bytes.subarray(at, at + PIECE);
      }
    })(),
  );
}

function largeChunkContract(start: () => Promise<Harness>) {
  let harness: Harness;
  let store: ObjectStore;

  beforeAll(async () => {
    harness = await start();
    store = harness.store;
  }, 90_000);
  afterAll(() => harness?.stop());

  test('large chunks land whole and in order', async () => {
    const bytes = randomBytes(90 * MiB + 12345);
    const chunks = [40 * MiB, 35 * MiB, bytes.length - 75 * MiB];
    let state = await store.uploads.begin('a/slide.svs', { sizeBytes: bytes.length });
    let offset = 0;
    for (const length of chunks) {
      const body = pieces(bytes.subarray(offset, offset + length));
      state = await store.uploads.write(state, { offset, length, body });
      offset += length;
    }
    await store.uploads.complete(state);
    expect(Buffer.from((await store.get('a/slide.svs'))!).equals(bytes)).toBe(true);
    // Each chunk is one part, streamed as it arrives.
    if (harness.partsOf) expect(await harness.partsOf('a/slide.svs')).toBe(3);
    expect(await harness.leftovers()).toEqual([]);
  }, 120_000);

  test('a large chunk cut off midway is refused, and sent again it lands', async () => {
    const bytes = randomBytes(48 * MiB);
    const begun = await store.uploads.begin('b/slide.svs', { sizeBytes: bytes.length });
    const length = bytes.length;
    const cut = store.uploads.write(begun, { offset: 0, length, body: pieces(bytes, 20 * MiB) });
    await expect(cut).rejects.toThrow();
    const long = store.uploads.write(begun, {
      offset: 0,
      length: length - MiB,
      body: pieces(bytes),
    });
    await expect(long).rejects.toThrow();
    const state = await store.uploads.write(begun, { offset: 0, length, body: pieces(bytes) });
    await store.uploads.complete(state);
    expect(Buffer.from((await store.get('b/slide.svs'))!).equals(bytes)).toBe(true);
    expect(await harness.leftovers()).toEqual([]);
  }, 120_000);
}

describe.each([
  ['filesystem', startFsHarness],
  ['S3 (MinIO)', startS3Harness],
])('%s in-place uploads of large chunks', (_name, start) => largeChunkContract(start));
