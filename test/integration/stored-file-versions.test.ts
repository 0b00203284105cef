import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import express from 'express';
import { sendStoredFile } from '../../api/routes/send-file';
import { openStoredFile } from '../../api/services/store-files';
import { createObjectStore, ensureBucket, type ObjectStore } from '../../storage';
import { startMinio } from '../support/minio';

/**
 * An object replaced while a reader opens it (a pyramid's `zarr.json` rewritten while a
 * thumbnail reads it): the size, range and bytes a reader gets must all be of one version. A
 * stat before the read gave the size of the old version and the bytes of the new one, and an
 * HTTP answer whose body fell short of its Content-Length, which the browser waited on.
 * `rangeOf` runs between the moment the store knows the size and the read: the test replaces
 * the object there.
 */

const OLD = Buffer.alloc(100, 'a');
const NEW = Buffer.alloc(40, 'b');

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A `rangeOf` that replaces `key` with `replacement` the first time the store asks it. */
function replacingOnce(
  store: ObjectStore,
  key: string,
  replacement: Buffer,
  pick: (size: number) => { offset: number; length: number } | undefined,
) {
  let replaced: Promise<void> | undefined;
  return {
    rangeOf: (size: number) => {
      replaced ??= store.put(key, new Uint8Array(replacement));
      return pick(size);
    },
    done: () => replaced,
  };
}

/** What a reader may get: one version whole, or the same span of one version. */
function expectOneVersion(
  bytes: Buffer,
  size: number,
  range: { offset: number; length: number } | undefined,
) {
  const version = [OLD, NEW].find((v) => v.length === size);
  expect(version).toBeDefined();
  expect(bytes).toEqual(range ? version!.subarray(range.offset, range.offset + range.length) : version);
}

const backends: [string, () => Promise<{ store: ObjectStore; stop(): Promise<void> }>][] = [
  [
    'fs',
    async () => {
      const root = await mkdtemp(path.join(tmpdir(), 'sps-versions-'));
      const store = createObjectStore({
        backend: 'fs',
        fs: { root, publicBaseUrl: 'http://127.0.0.1:1', signingSecret: randomBytes(32).toString('hex') },
      });
      return { store, stop: () => rm(root, { recursive: true, force: true }) };
    },
  ],
  [
    's3',
    async () => {
      const minio = await startMinio();
      const s3 = {
        endpoint: minio.endpoint,
        region: 'us-east-1',
        bucket: `versions-${randomBytes(4).toString('hex')}`,
        accessKeyId: minio.accessKeyId,
        secretAccessKey: minio.secretAccessKey,
        forcePathStyle: true,
      };
      await ensureBucket(s3);
      return { store: createObjectStore({ backend: 's3', s3 }), stop: minio.stop };
    },
  ],
];

describe.each(backends)('an object replaced while it is opened (%s backend)', (_name, start) => {
  let store: ObjectStore;
  let stop: () => Promise<void>;

  beforeAll(async () => {
    ({ store, stop } = await start());
  }, 120_000);

  afterAll(() => stop());

  const cases: [string, Buffer, Buffer, (size: number) => { offset: number; length: number } | undefined][] =
    [
      ['whole, replaced by a shorter one', OLD, NEW, () => undefined],
      ['whole, replaced by a longer one', NEW, OLD, () => undefined],
      [
        'its last 30 bytes, replaced by a shorter one',
        OLD,
        NEW,
        (size) => ({ offset: size - 30, length: 30 }),
      ],
    ];

  it.each(cases)('open answers the size and bytes of one version: %s', async (_case, before, after, pick) => {
    const key = `versions/${randomBytes(4).toString('hex')}/zarr.json`;
    await store.put(key, new Uint8Array(before));
    const replacing = replacingOnce(store, key, after, pick);
    const opened = await store.open(key, { rangeOf: replacing.rangeOf });
    await replacing.done();
    expect(opened).toBeDefined();
    expectOneVersion(await collect(opened!.body), opened!.info.sizeBytes, opened!.range);
  });

  it('an HTTP answer of a replaced file carries as many bytes as its Content-Length says', async () => {
    const key = `versions/${randomBytes(4).toString('hex')}/zarr.json`;
    await store.put(key, new Uint8Array(OLD));
    const replacing = replacingOnce(store, key, NEW, () => undefined);
    // A stream opened after the size was learnt finds the replacement there.
    const racing: ObjectStore = {
      ...store,
      read: async (...args) => {
        await replacing.done();
        return store.read(...args);
      },
    };
    const app = express();
    app.get('/file', async (_req, res, next) => {
      try {
        const file = await openStoredFile(racing, key, replacing.rangeOf);
        await replacing.done();
        sendStoredFile(res, file);
      } catch (err) {
        next(err);
      }
    });
    const server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/file`, {
        signal: AbortSignal.timeout(10_000),
      });
      expect(response.status).toBe(200);
      const body = Buffer.from(await response.arrayBuffer());
      expect(body.length).toBe(Number(response.headers.get('content-length')));
      expectOneVersion(body, body.length, undefined);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
