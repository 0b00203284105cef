/** @jest-environment ./test/support/onnx-environment.js */
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import path from 'node:path';
import pino from 'pino';
import { createApp } from '../../api/app';
import { ExportManifest } from '../../schemas/exports';
import {
  createObjectStore,
  ensureBucket,
  type S3StoreOptions,
  signStoreToken,
  signToken,
} from '../../storage';
import { apiClient } from '../support/http';
import { startMinio } from '../support/minio';
import { runPythonJson } from '../support/python';
import { defaultTestSettings, SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';
import { readWithZarrita } from '../support/zarrita';

/**
 * Signed whole-store links (DECISIONS.md "Signed store links") on the real stack: a predicted
 * sample's `resultUrl`, an ome-zarr export's `rootUrl` and the H&E's `rootUrl` are opened by
 * zarr-python, ome-zarr-py and zarrita with the URL alone, and every array they read equals the
 * stored one. Then the HTTP rules a viewer relies on: HEAD, Range, ETag, 404 for a probe, 403
 * for a bad or expired token, no way out of the store, and CORS.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;
let resultUrl: string;
let resultRoot: string;
let heRoot: string;
const MARKERS = ['DAPI', 'CD3'];
const LINK = /^(http:\/\/127\.0\.0\.1:\d+)\/stores\/([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)\/zarr\.json$/;

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  ({ sampleId, jobId } = stack.processedSample());
  expect(stack.processedSample().markers).toEqual(MARKERS);
  const results = await call('GET', `/jobs/${jobId}/results`);
  expect(results.status).toBe(200);
  resultUrl = results.json.resultUrl as string;
  resultRoot = path.join(stack.fsRoot, results.json.resultBasePath as string);
  heRoot = path.join(stack.fsRoot, `orgs/${stack.tenant.organizationId}/samples/${sampleId}/he`);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

/** The store root a link names: the link without its `zarr.json`, as a viewer resolves keys. */
const storeRoot = (link: string) => link.slice(0, -'zarr.json'.length);
const tokenOf = (link: string) => LINK.exec(link)![2]!;

async function omeZarrExport(includeHe: boolean): Promise<ExportManifest> {
  const answer = await call('POST', `/jobs/${jobId}/exports`, { format: 'ome-zarr', includeHe });
  expect(answer.status).toBe(200);
  return ExportManifest.parse(answer.json);
}

interface PythonRead {
  /** Every dataset of every multiscale, read over HTTP and from the store folder. */
  arrays: { path: string; shape: number[]; dtype: string; equal: boolean }[];
  /** ome-zarr-py on `image` (a path in the store, '' for the root) over HTTP. */
  ome: { levels: number; equal: boolean };
}

/**
 * zarr-python opens the store at `url` over HTTP (fsspec) and walks it from the root's
 * multiscales, comparing every level with the same array read from the folder; ome-zarr-py
 * reads `image` from the URL alone.
 */
function readWithPython(url: string, folder: string, image: string): Promise<PythonRead> {
  return runPythonJson<PythonRead>(
    `
import json, sys
import numpy as np
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader, Multiscales
url, folder, image = sys.argv[1:4]
remote = zarr.open_group(url, mode='r')
local = zarr.open_group(folder, mode='r')
arrays = []
for multiscale in remote.attrs['ome']['multiscales']:
    for dataset in multiscale['datasets']:
        over_http = remote[dataset['path']]
        stored = local[dataset['path']]
        arrays.append({'path': dataset['path'], 'shape': list(over_http.shape), 'dtype': str(over_http.dtype),
                       'equal': bool(np.array_equal(over_http[...], stored[...]))})
location = parse_url(url + image)
assert location is not None, 'ome-zarr-py found no store at the link'
node = [n for n in Reader(location)() if n.load(Multiscales)][0]
base = zarr.open_group(folder + ('/' + image if image else ''), mode='r')
first = base.attrs['ome']['multiscales'][0]['datasets'][0]['path']
print(json.dumps({'arrays': arrays, 'ome': {
    'levels': len(node.data),
    'equal': bool(np.array_equal(np.asarray(node.data[0]), base[first][...])),
}}))
`,
    [url, folder, image],
  );
}

/** zarrita over HTTP with the URL alone against zarrita on the folder: the same array. */
async function expectSameWithZarrita(url: string, folder: string, arrayPath: string): Promise<void> {
  const meta = (await (await fetch(`${url}${arrayPath}/zarr.json`)).json()) as { shape: number[] };
  const whole = meta.shape.map(() => null);
  const overHttp = await readWithZarrita(url, arrayPath, whole);
  const stored = await readWithZarrita(folder, arrayPath, whole);
  expect(overHttp.shape).toEqual(stored.shape);
  expect(overHttp.dtype).toBe(stored.dtype);
  expect(Buffer.compare(Buffer.from(overHttp.data), Buffer.from(stored.data))).toBe(0);
}

describe('every reader opens a store with the link alone', () => {
  test("the job's resultUrl is a whole-store link", async () => {
    const match = LINK.exec(resultUrl);
    expect(match?.[1]).toBe(stack.baseUrl);
    const read = await readWithPython(storeRoot(resultUrl), resultRoot, `markers/${MARKERS[0]}`);
    expect(read.arrays.map((a) => a.path)).toEqual(
      expect.arrayContaining(MARKERS.map((marker) => `markers/${marker}/0`)),
    );
    expect(read.arrays.every((a) => a.equal)).toBe(true);
    expect(read.arrays.length).toBeGreaterThan(MARKERS.length);
    expect(read.ome.levels).toBeGreaterThan(1);
    expect(read.ome.equal).toBe(true);
    await expectSameWithZarrita(storeRoot(resultUrl), resultRoot, `markers/${MARKERS[0]}/0`);
  });

  test("an ome-zarr export's rootUrl (and downloadUrl) is a whole-store link to the results", async () => {
    const manifest = await omeZarrExport(false);
    const prediction = manifest.artifacts.prediction!;
    expect(prediction.rootUrl).toMatch(LINK);
    expect(prediction.downloadUrl).toBe(prediction.rootUrl);
    const read = await readWithPython(storeRoot(prediction.rootUrl), resultRoot, `markers/${MARKERS[1]}`);
    expect(read.arrays.every((a) => a.equal)).toBe(true);
    expect(read.ome.equal).toBe(true);
    await expectSameWithZarrita(storeRoot(prediction.rootUrl), resultRoot, `markers/${MARKERS[1]}/0`);
  });

  test("the H&E's rootUrl is a whole-store link to the processed H&E", async () => {
    const he = (await omeZarrExport(true)).artifacts.he!;
    expect(he.rootUrl).toMatch(LINK);
    const read = await readWithPython(storeRoot(he.rootUrl), heRoot, '');
    expect(read.arrays.length).toBeGreaterThan(1);
    expect(read.arrays.every((a) => a.equal && a.dtype === 'uint8')).toBe(true);
    expect(read.ome.levels).toBe(read.arrays.length);
    expect(read.ome.equal).toBe(true);
    await expectSameWithZarrita(storeRoot(he.rootUrl), heRoot, '0');
  });
});

/**
 * A GET sent with its path and headers exactly as written: fetch would resolve `..` first, and
 * adds `Cache-Control: no-cache` to a conditional request (which rightly defeats a 304).
 */
function rawGet(url: string, rawPath: string, headers: Record<string, string> = {}): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path: rawPath, method: 'GET', headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the HTTP a viewer relies on', () => {
  test('HEAD states the size, type, ranges and validators without a body', async () => {
    const whole = await fetch(resultUrl);
    const bytes = Buffer.from(await whole.arrayBuffer());
    const head = await fetch(resultUrl, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(bytes.length));
    expect(head.headers.get('content-type')).toMatch(/^application\/json/);
    expect(head.headers.get('accept-ranges')).toBe('bytes');
    expect(head.headers.get('etag')).toBe(whole.headers.get('etag'));
    expect(head.headers.get('last-modified')).toBeTruthy();
    expect((await head.arrayBuffer()).byteLength).toBe(0);
    const maxAge = Number(/max-age=(\d+)/.exec(head.headers.get('cache-control') ?? '')?.[1]);
    expect(maxAge).toBeGreaterThan(3500);
    expect(maxAge).toBeLessThanOrEqual(3600);
  });

  test('Range reads a span (also a suffix) of a chunk; If-None-Match answers 304', async () => {
    const key = `${storeRoot(resultUrl)}markers/${MARKERS[0]}/0/zarr.json`;
    const bytes = Buffer.from(await (await fetch(key)).arrayBuffer());
    const span = await fetch(key, { headers: { range: 'bytes=2-9' } });
    expect(span.status).toBe(206);
    expect(span.headers.get('content-range')).toBe(`bytes 2-9/${bytes.length}`);
    expect(span.headers.get('content-length')).toBe('8');
    expect(Buffer.from(await span.arrayBuffer())).toEqual(bytes.subarray(2, 10));
    const suffix = await fetch(key, { headers: { range: 'bytes=-5' } });
    expect(suffix.status).toBe(206);
    expect(Buffer.from(await suffix.arrayBuffer())).toEqual(bytes.subarray(bytes.length - 5));
    const headRange = await fetch(key, { method: 'HEAD', headers: { range: 'bytes=0-3' } });
    expect(headRange.status).toBe(206);
    expect(headRange.headers.get('content-length')).toBe('4');
    const etag = (await fetch(key, { method: 'HEAD' })).headers.get('etag')!;
    const keyPath = new URL(key).pathname;
    expect(await rawGet(key, keyPath, { 'if-none-match': etag })).toBe(304);
    expect(await rawGet(key, keyPath, { 'if-none-match': '"another"' })).toBe(200);
  });

  test('a missing key is 404 (GET and HEAD), never 403, as Zarr readers probe', async () => {
    const root = storeRoot(resultUrl);
    for (const key of ['markers/NOPE/zarr.json', '.zgroup', '.zattrs', 'markers/DAPI/0/c/999/999/999']) {
      const got = await fetch(`${root}${key}`);
      expect({ key, status: got.status }).toEqual({ key, status: 404 });
      expect(((await got.json()) as { error: string }).error).toBe('not_found');
      expect((await fetch(`${root}${key}`, { method: 'HEAD' })).status).toBe(404);
    }
  });

  test('a tampered, foreign-scope, other-secret or expired token is 403', async () => {
    const token = tokenOf(resultUrl);
    const prefix = `${path.relative(stack.fsRoot, resultRoot)}/`;
    const [payload, signature] = token.split('.') as [string, string];
    const flipped = `${payload}.${signature.startsWith('A') ? 'B' : 'A'}${signature.slice(1)}`;
    const later = new Date(Date.now() + 3600_000);
    const refused = [
      flipped,
      'not-a-token',
      `${payload}.${signature}.x`,
      signStoreToken('another-secret', prefix, later),
      // A single-object link's token names one key: it opens no store.
      signToken(stack.signingSecret, { scope: 'object', subject: `${prefix}zarr.json`, expiresAt: later }),
      signStoreToken(stack.signingSecret, prefix, new Date(Date.now() - 1000)),
    ];
    for (const bad of refused) {
      for (const method of ['GET', 'HEAD']) {
        const got = await fetch(`${stack.baseUrl}/stores/${bad}/zarr.json`, { method });
        expect({ bad, method, status: got.status }).toEqual({ bad, method, status: 403 });
      }
    }
    const body = (await (await fetch(`${stack.baseUrl}/stores/${flipped}/zarr.json`)).json()) as {
      error: string;
    };
    expect(body.error).toBe('forbidden');
    // A token made with the service's secret and a live expiry reads: the refusals above are the token's.
    const fresh = signStoreToken(stack.signingSecret, prefix, later);
    expect((await fetch(`${stack.baseUrl}/stores/${fresh}/zarr.json`)).status).toBe(200);
  });

  test('no path leaves the store: dot segments, encoded slashes and absolute paths are 404', async () => {
    const token = tokenOf(resultUrl);
    // The job's store lies at samples/{id}/jobs/{job}/; the H&E of its sample at samples/{id}/he/.
    const escapes = [
      `/stores/${token}/../../he/zarr.json`,
      `/stores/${token}/%2e%2e/%2e%2e/he/zarr.json`,
      `/stores/${token}/..%2F..%2Fhe%2Fzarr.json`,
      `/stores/${token}/markers/..%2f..%2f..%2fhe/zarr.json`,
      `/stores/${token}/%2Fetc%2Fpasswd`,
      `/stores/${token}//etc/passwd`,
      `/stores/${token}/%5C..%5Czarr.json`,
      `/stores/${token}/.tmp/x`,
    ];
    for (const attempt of escapes) {
      expect({ attempt, status: await rawGet(stack.baseUrl, attempt) }).toEqual({ attempt, status: 404 });
    }
    // The same H&E key through its own link reads: the 404s above are the path rules'.
    const he = (await omeZarrExport(true)).artifacts.he!;
    expect(await rawGet(stack.baseUrl, `/stores/${tokenOf(he.rootUrl)}/zarr.json`)).toBe(200);
  });

  test('read-only: other methods are 405', async () => {
    for (const method of ['PUT', 'POST', 'DELETE', 'PATCH']) {
      const got = await fetch(resultUrl, { method });
      expect({ method, status: got.status }).toEqual({ method, status: 405 });
      expect(got.headers.get('allow')).toContain('GET');
    }
  });

  test('CORS: a viewer on another origin may read keys, ranges and probe failures', async () => {
    const origin = 'https://viewer.example.org';
    const preflight = await fetch(resultUrl, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'range',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toMatch(/GET/);
    expect(preflight.headers.get('access-control-allow-methods')).toMatch(/HEAD/);
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('range');
    const span = await fetch(resultUrl, { headers: { origin, range: 'bytes=0-0' } });
    expect(span.status).toBe(206);
    expect(span.headers.get('access-control-allow-origin')).toBe('*');
    const exposed = (span.headers.get('access-control-expose-headers') ?? '').toLowerCase();
    for (const header of ['content-range', 'content-length', 'accept-ranges', 'etag']) {
      expect(exposed).toContain(header);
    }
    const probe = await fetch(`${storeRoot(resultUrl)}nothing/zarr.json`, { headers: { origin } });
    expect(probe.status).toBe(404);
    expect(probe.headers.get('access-control-allow-origin')).toBe('*');
  });

  test('the OpenAPI document lists the store route as a signed link outside the bearer scheme', async () => {
    const document = (await (await fetch(`${stack.api}/openapi.json`)).json()) as {
      paths: Record<string, { get?: { security?: unknown[]; operationId?: string } }>;
    };
    const operation = document.paths['/stores/{token}/{path}']?.get;
    expect(operation?.operationId).toBe('readStoreKey');
    expect(operation?.security).toEqual([]);
  });
});

/** An API of the same database and secret on an S3 store (MinIO) holding a copy of the results. */
async function s3Api(): Promise<{ api: string; close(): Promise<void> }> {
  const minio = await startMinio();
  const options: S3StoreOptions = {
    endpoint: minio.endpoint,
    region: 'us-east-1',
    bucket: `links-${randomBytes(4).toString('hex')}`,
    accessKeyId: minio.accessKeyId,
    secretAccessKey: minio.secretAccessKey,
    forcePathStyle: true,
  };
  await ensureBucket(options);
  const store = createObjectStore({ backend: 's3', s3: options });
  const files = await readdir(resultRoot, { recursive: true, withFileTypes: true });
  for (const file of files.filter((entry) => entry.isFile())) {
    const local = path.join(file.parentPath, file.name);
    await store.put(path.relative(stack.fsRoot, local), await readFile(local));
  }
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const baseUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const app = createApp({
    sql: stack.sql,
    store,
    workflows: stack.workflows,
    logger: pino({ level: 'silent' }),
    settings: {
      ...defaultTestSettings,
      publicBaseUrl: baseUrl,
      appUrl: 'https://app.example.test',
      signingSecret: stack.signingSecret,
    },
  });
  server.on('request', app);
  return {
    api: `${baseUrl}/api/v1`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await minio.stop();
    },
  };
}

test('the S3 backend serves the same store links: readers open them, ranges and probes alike', async () => {
  const s3 = await s3Api();
  try {
    const results = await apiClient(s3.api, stack.tenant.apiKey)('GET', `/jobs/${jobId}/results`);
    expect(results.status).toBe(200);
    const link = results.json.resultUrl as string;
    expect(link).toMatch(LINK);
    const read = await readWithPython(storeRoot(link), resultRoot, `markers/${MARKERS[0]}`);
    expect(read.arrays.length).toBeGreaterThan(MARKERS.length);
    expect(read.arrays.every((a) => a.equal)).toBe(true);
    expect(read.ome.equal).toBe(true);
    await expectSameWithZarrita(storeRoot(link), resultRoot, `markers/${MARKERS[0]}/0`);
    const span = await fetch(link, { headers: { range: 'bytes=-4' } });
    expect(span.status).toBe(206);
    expect(span.headers.get('content-range')).toMatch(/^bytes \d+-\d+\/\d+$/);
    expect((await fetch(`${storeRoot(link)}markers/NOPE/zarr.json`, { method: 'HEAD' })).status).toBe(404);
  } finally {
    await s3.close();
  }
}, 120_000);
