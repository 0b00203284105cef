import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { type KeyValueStore, prefixedStore } from '../../compute/store';
import {
  createObjectStore,
  ensureBucket,
  isStorageError,
  type ObjectStore,
  type S3StoreOptions,
  verifyObjectToken,
} from '../../storage';
import { startMinio } from '../support/minio';

interface Harness {
  store: ObjectStore;
  /** Only for assertions about leftovers; the contract itself never looks behind the store. */
  root?: string;
  stop(): Promise<void>;
}

const MiB = 1024 * 1024;

/** Stands in for the API's `/files/*` route, which the fs backend's signed URLs point at. */
function serveSignedFiles(store: ObjectStore, secret: string) {
  return async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const key = url.pathname
      .replace(/^\/files\//, '')
      .split('/')
      .map(decodeURIComponent)
      .join('/');
    try {
      verifyObjectToken(secret, key, url.searchParams.get('token') ?? '');
    } catch (err) {
      res.writeHead(isStorageError(err) ? 403 : 500).end();
      return;
    }
    const body = await store.read(key);
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    const download = url.searchParams.get('download');
    const headers = download
      ? { 'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(download)}` }
      : {};
    res.writeHead(200, headers);
    await pipeline(body, res);
  };
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function startFsHarness(): Promise<Harness> {
  const root = await mkdtemp(path.join(tmpdir(), 'sps-store-'));
  const signingSecret = randomBytes(32).toString('hex');
  const server = createServer();
  const port = await listen(server);
  const store = createObjectStore({
    backend: 'fs',
    fs: { root, publicBaseUrl: `http://127.0.0.1:${port}`, signingSecret },
  });
  server.on('request', serveSignedFiles(store, signingSecret));
  return {
    store,
    root,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await rm(root, { recursive: true, force: true });
    },
  };
}

async function startS3Harness(): Promise<Harness> {
  const minio = await startMinio();
  const options: S3StoreOptions = {
    endpoint: minio.endpoint,
    region: 'us-east-1',
    bucket: `contract-${randomBytes(4).toString('hex')}`,
    accessKeyId: minio.accessKeyId,
    secretAccessKey: minio.secretAccessKey,
    forcePathStyle: true,
    prefix: 'tenant-a',
  };
  await ensureBucket(options);
  // A second call must find the bucket and leave it be.
  await ensureBucket(options);
  return { store: createObjectStore({ backend: 's3', s3: options }), stop: minio.stop };
}

const bytes = (text: string) => new Uint8Array(Buffer.from(text));
const text = (data: Uint8Array | undefined) =>
  data === undefined ? undefined : Buffer.from(data).toString();

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function sha256Of(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** `total` random bytes in odd-sized chunks, so parts never line up with chunk edges. */
function generated(total: number, options: { failAfter?: number } = {}) {
  const hash = createHash('sha256');
  const kept: Buffer[] = [];
  async function* produce() {
    for (let sent = 0; sent < total; ) {
      if (options.failAfter !== undefined && sent >= options.failAfter) throw new Error('producer failed');
      const chunk = randomBytes(Math.min(1_000_003, total - sent));
      hash.update(chunk);
      kept.push(chunk);
      sent += chunk.length;
      yield chunk;
    }
  }
  return {
    stream: Readable.from(produce()),
    sha256: () => hash.digest('hex'),
    all: () => Buffer.concat(kept),
  };
}

async function keysOf(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of store.list(prefix)) keys.push(key);
  return keys;
}

/** The `ObjectStore` contract, run against every backend. */
function objectStoreContract(start: () => Promise<Harness>) {
  let harness: Harness;
  let store: ObjectStore;

  beforeAll(async () => {
    harness = await start();
    store = harness.store;
  }, 90_000);

  afterAll(() => harness?.stop());

  test('put then get returns the bytes; a missing key reads as undefined', async () => {
    await store.put('basic/hello.txt', bytes('hello'));
    expect(text(await store.get('basic/hello.txt'))).toBe('hello');
    await store.put('basic/hello.txt', bytes('replaced'));
    expect(text(await store.get('basic/hello.txt'))).toBe('replaced');
    await store.put('basic/empty', new Uint8Array());
    expect(await store.get('basic/empty')).toEqual(new Uint8Array());
    expect(await store.get('basic/missing')).toBeUndefined();
    expect(await store.get('basic/hello.txt/below')).toBeUndefined();
    expect(await store.get('basic')).toBeUndefined();
  });

  test('getRange reads offset+length and suffix ranges, clamped to the object', async () => {
    await store.put('range/digits', bytes('0123456789'));
    expect(text(await store.getRange('range/digits', { offset: 2, length: 3 }))).toBe('234');
    expect(text(await store.getRange('range/digits', { suffixLength: 4 }))).toBe('6789');
    expect(text(await store.getRange('range/digits', { offset: 8, length: 10 }))).toBe('89');
    expect(text(await store.getRange('range/digits', { suffixLength: 50 }))).toBe('0123456789');
    expect(text(await store.getRange('range/digits', { offset: 10, length: 1 }))).toBe('');
    expect(await store.getRange('range/missing', { offset: 0, length: 1 })).toBeUndefined();
    await expect(store.getRange('range/digits', { offset: -1, length: 2 })).rejects.toThrow(RangeError);
    await expect(store.getRange('range/digits', { suffixLength: 0 })).rejects.toThrow(RangeError);
  });

  test('write streams 20 MiB in and read streams it back unchanged', async () => {
    const source = generated(20 * MiB);
    const info = await store.write('big/blob.bin', source.stream, {
      contentType: 'application/octet-stream',
    });
    expect(info.sizeBytes).toBe(20 * MiB);
    const body = await store.read('big/blob.bin');
    expect(body).toBeDefined();
    expect(await sha256Of(body!)).toBe(source.sha256());
    expect((await store.stat('big/blob.bin'))?.sizeBytes).toBe(20 * MiB);

    const all = source.all();
    const across = { offset: 8 * MiB - 10, length: 30 };
    const ranged = await store.read('big/blob.bin', { range: across });
    expect(await collect(ranged!)).toEqual(all.subarray(across.offset, across.offset + across.length));
    const tail = await store.read('big/blob.bin', { range: { suffixLength: MiB + 1 } });
    // `equals`, not `toEqual`: jest compares a megabyte element by element, for seconds.
    expect((await collect(tail!)).equals(all.subarray(all.length - MiB - 1))).toBe(true);
    const past = await store.read('big/blob.bin', { range: { offset: 20 * MiB, length: 5 } });
    expect(await collect(past!)).toHaveLength(0);
    expect(await store.read('big/missing')).toBeUndefined();
  });

  test('a failed write leaves the previous object, or none, and no leftovers', async () => {
    await store.put('failing/kept', bytes('previous'));
    const large = generated(20 * MiB, { failAfter: 9 * MiB });
    await expect(store.write('failing/kept', large.stream)).rejects.toThrow('producer failed');
    expect(text(await store.get('failing/kept'))).toBe('previous');
    const small = generated(MiB, { failAfter: 1 });
    await expect(store.write('failing/new', small.stream)).rejects.toThrow('producer failed');
    expect(await store.stat('failing/new')).toBeUndefined();
    expect(await keysOf(store, 'failing/')).toEqual(['failing/kept']);
    if (harness.root) expect(await readdir(path.join(harness.root, '.tmp'))).toEqual([]);
  });

  test('stat reports size and modification time; a missing key reads as undefined', async () => {
    const before = Date.now();
    await store.put('stat/a.txt', bytes('four'), { contentType: 'text/plain' });
    const info = await store.stat('stat/a.txt');
    expect(info?.sizeBytes).toBe(4);
    // Second-granular clocks (S3 Last-Modified) can read just under `before`.
    expect(info?.lastModified.getTime()).toBeGreaterThanOrEqual(before - 1_000);
    expect([undefined, 'text/plain']).toContain(info?.contentType);
    expect(await store.stat('stat/missing')).toBeUndefined();
    expect(await store.stat('stat')).toBeUndefined();
  });

  test('delete removes the object and is idempotent', async () => {
    await store.put('delete/x', bytes('x'));
    await store.delete('delete/x');
    expect(await store.get('delete/x')).toBeUndefined();
    await store.delete('delete/x');
    await store.delete('delete/never-written');
  });

  test('list yields every key under a prefix in byte order', async () => {
    const keys = ['list/b', 'list/a/2', 'list/a/10', 'list/a-c', 'list/a/1', 'list/ä', 'list/z', 'listing'];
    for (const key of keys) await store.put(key, bytes(key));
    expect(await keysOf(store, 'list/')).toEqual([
      'list/a-c',
      'list/a/1',
      'list/a/10',
      'list/a/2',
      'list/b',
      'list/z',
      'list/ä',
    ]);
    expect(await keysOf(store, 'list/a')).toEqual(['list/a-c', 'list/a/1', 'list/a/10', 'list/a/2']);
    expect(await keysOf(store, 'list')).toEqual([
      'list/a-c',
      'list/a/1',
      'list/a/10',
      'list/a/2',
      'list/b',
      'list/z',
      'list/ä',
      'listing',
    ]);
    expect(await keysOf(store, 'list/none/')).toEqual([]);
    expect(await keysOf(store, 'nothing-here')).toEqual([]);
  });

  test('every method refuses an invalid key', async () => {
    const invalidKeys = ['', '/abs', 'a//b', 'a/./b', '../up', 'a/..', 'a\\b', 'a\0b', 'trailing/', '.tmp/x'];
    for (const key of invalidKeys) {
      const calls: Array<() => Promise<unknown>> = [
        () => store.get(key),
        () => store.getRange(key, { offset: 0, length: 1 }),
        () => store.put(key, bytes('x')),
        () => store.read(key),
        () => store.write(key, Readable.from([Buffer.from('x')])),
        () => store.stat(key),
        () => store.delete(key),
        () => store.signedUrl(key, { expiresInSeconds: 60 }),
      ];
      for (const call of calls) {
        const error = await call().then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(isStorageError(error, 'InvalidKey')).toBe(true);
      }
    }
    for (const prefix of ['/', 'a//', '../']) {
      await expect(keysOf(store, prefix)).rejects.toMatchObject({ _tag: 'InvalidKey' });
    }
  });

  test('an aborted signal stops a read', async () => {
    await store.put('abort/x', bytes('x'));
    await expect(store.get('abort/x', { signal: AbortSignal.abort() })).rejects.toMatchObject({
      name: 'AbortError',
    });
  });

  test("is compute's KeyValueStore: a prefixed view reads, writes and passes the signal on", async () => {
    const view: KeyValueStore = prefixedStore(store, 'kv/group/');
    await view.put('zarr.json', bytes('{"zarr_format":3}'));
    expect(text(await store.get('kv/group/zarr.json'))).toBe('{"zarr_format":3}');
    expect(text(await view.getRange('zarr.json', { suffixLength: 2 }))).toBe('3}');
    const aborted = { signal: AbortSignal.abort() };
    await expect(view.get('zarr.json', aborted)).rejects.toMatchObject({ name: 'AbortError' });
    await expect(view.getRange('zarr.json', { offset: 0, length: 1 }, aborted)).rejects.toMatchObject({
      name: 'AbortError',
    });
    await expect(view.put('other', bytes('x'), aborted)).rejects.toThrow();
    expect(await store.get('kv/group/other')).toBeUndefined();
  });

  describe('signed URLs', () => {
    const key = 'signed/a report (1) + ü.csv';

    beforeAll(() => store.put(key, bytes('a,b\n1,2\n')));

    test('a signed URL reads the object with no other credential', async () => {
      const response = await fetch(await store.signedUrl(key, { expiresInSeconds: 60 }));
      expect(response.status).toBe(200);
      expect(await response.text()).toBe('a,b\n1,2\n');
    });

    test('a download name makes the response an attachment', async () => {
      const url = await store.signedUrl(key, { expiresInSeconds: 60, downloadName: 'report (1).csv' });
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-disposition')).toMatch(/^attachment; filename\*=UTF-8''report/);
      await response.arrayBuffer();
    });

    test('a URL with one character of its signature changed is refused', async () => {
      const url = new URL(await store.signedUrl(key, { expiresInSeconds: 60 }));
      const param = url.searchParams.has('token') ? 'token' : 'X-Amz-Signature';
      const signature = url.searchParams.get(param)!;
      const at = signature.length - 5;
      url.searchParams.set(
        param,
        signature.slice(0, at) + (signature[at] === 'a' ? 'b' : 'a') + signature.slice(at + 1),
      );
      const response = await fetch(url);
      expect(response.status).toBe(403);
      await response.arrayBuffer();
    });

    test('an expired URL is refused', async () => {
      const url = await store.signedUrl(key, { expiresInSeconds: 1 });
      await sleep(2_500);
      const response = await fetch(url);
      expect(response.status).toBe(403);
      await response.arrayBuffer();
    });
  });
}

describe.each([
  ['filesystem', startFsHarness],
  ['S3 (MinIO)', startS3Harness],
])('%s object store', (_name, start) => objectStoreContract(start));

describe('S3 backend', () => {
  test('an unreachable endpoint is BackendUnavailable, with the cause kept', async () => {
    const server = createServer();
    const port = await listen(server);
    await new Promise((resolve) => server.close(resolve));
    const store = createObjectStore({
      backend: 's3',
      s3: {
        endpoint: `http://127.0.0.1:${port}`,
        region: 'us-east-1',
        bucket: 'unreachable',
        accessKeyId: 'x',
        secretAccessKey: 'y',
        forcePathStyle: true,
      },
    });
    const error = await store.get('a').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isStorageError(error, 'BackendUnavailable')).toBe(true);
    expect((error as Error).cause).toBeDefined();
  });
});
