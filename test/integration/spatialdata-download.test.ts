/** @jest-environment ./test/support/onnx-environment.js */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { RunningWorkers } from '../../cli/runtime';
import { latestCompletedLayer } from '../../db/segmentation-runs';
import { forwarded } from '../support/http';
import { runPythonJson, spatialDataPython } from '../support/python';
import { expiredLink } from '../support/signed-links';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * `sps download SAMPLE DIR --format spatialdata` as a user runs it (the built bin, a child
 * process, against the real stack and its worker), then `spatialdata.read_zarr(DIR)` in
 * SpatialData's own venv with no other argument: the H&E and the prediction as images, the
 * layer's mask as labels, its cells as the table annotating them, and the markers only once.
 */
const BIN = path.join(__dirname, '..', '..', 'cli', 'sps', 'bin.js');
let stack: TestStack;
let workers: RunningWorkers;
let home: string;
let sampleId: string;
let jobId: string;
let markers: readonly string[];
/** What the first download printed, and where it wrote. */
let first: { dir: string; files: number; bytes: number };

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  workers = await stack.startWorker();
  ({ sampleId, jobId, markers } = stack.processedSample());
  home = await mkdtemp(path.join(os.tmpdir(), 'sps-spatialdata-'));
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await workers?.shutdown();
  await stack?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

function sps(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return spsAt(stack.baseUrl, ...args);
}

function spsAt(
  baseUrl: string,
  ...args: string[]
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, 'config'),
      XDG_STATE_HOME: path.join(home, 'state'),
      SPS_BASE_URL: baseUrl,
      SPS_API_KEY: stack.tenant.apiKey,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const readStore = `
import json, sys, warnings
warnings.simplefilter('ignore')
import numpy as np
import spatialdata as sd
import zarr
folder, mask = sys.argv[1:]
s = sd.read_zarr(folder)
level0 = lambda element: element['scale0']['image']
labels = level0(s.labels['cells']).values
source = zarr.open_array(mask + '/0', mode='r')[0]
table = s.tables['table']
attrs = table.uns['spatialdata_attrs']
ids = np.unique(labels)
prediction = level0(s.images['prediction'])
print(json.dumps({
  'images': sorted(s.images), 'labels': sorted(s.labels), 'tables': sorted(s.tables),
  'he': list(level0(s.images['he']).shape),
  'channels': [str(c) for c in prediction.coords['c'].values],
  'predictionNonZero': bool(prediction.max().compute() > 0),
  'labelsEqualMask': bool(np.array_equal(labels, source)),
  'nObs': int(table.n_obs),
  'attrs': {k: attrs[k] for k in ('region', 'region_key', 'instance_key')},
  'instancesAreLabels': bool(np.array_equal(np.sort(table.obs[attrs['instance_key']].to_numpy()), ids[ids != 0])),
  'var': list(table.var_names),
}))
`;

test('sps download SAMPLE DIR --format spatialdata writes a folder that spatialdata.read_zarr opens with images, labels and the cell table', async () => {
  const dir = path.join(home, 'by-sample.zarr');
  const run = await sps('--json', 'download', sampleId, dir, '--format', 'spatialdata');
  // stderr carries the progress lines; on a failure, the message.
  expect(run.code === 0 ? 0 : run.stderr).toBe(0);
  const printed = JSON.parse(run.stdout);
  expect(printed).toMatchObject({ dir, jobId, format: 'spatialdata', skipped: 0 });
  expect(printed.files).toBeGreaterThan(10);
  first = { dir, files: printed.files, bytes: printed.bytes };

  // SpatialData's elements and its root only: the native markers (the same pixels as the
  // `prediction` image) stay in the service's store.
  expect((await readdir(dir)).sort()).toEqual(['images', 'labels', 'tables', 'zarr.json']);
  const root = JSON.parse(await readFile(path.join(dir, 'zarr.json'), 'utf8'));
  expect(Object.keys(root.attributes)).toEqual(['spatialdata_attrs']);

  const layer = await latestCompletedLayer(stack.sql, sampleId);
  const read = await runPythonJson<Record<string, unknown>>(
    readStore,
    [dir, path.join(stack.fsRoot, `${layer!.layerPrefix}mask`)],
    {},
    spatialDataPython(),
  );
  expect(read).toEqual({
    images: ['he', 'prediction'],
    labels: ['cells'],
    tables: ['table'],
    he: [3, expect.any(Number), expect.any(Number)],
    channels: [...markers],
    predictionNonZero: true,
    labelsEqualMask: true,
    nObs: layer!.instanceCount,
    attrs: { region: 'cells', region_key: 'region', instance_key: 'local_label' },
    instancesAreLabels: true,
    var: [...markers],
  });
  expect(layer!.instanceCount).toBeGreaterThan(0);

  // A job id gives the same store (the export is reused: no second conversion).
  const byJob = path.join(home, 'by-job.zarr');
  const again = await sps('--json', 'download', jobId, byJob, '--format', 'spatialdata');
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ jobId, files: printed.files, bytes: printed.bytes });
  expect(await readFile(path.join(byJob, 'zarr.json'), 'utf8')).toBe(
    await readFile(path.join(dir, 'zarr.json'), 'utf8'),
  );
}, 600_000);

async function filesUnder(dir: string): Promise<Map<string, Buffer>> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = new Map<string, Buffer>();
  for (const entry of entries.filter((e) => e.isFile())) {
    const file = path.join(entry.parentPath, entry.name);
    files.set(path.relative(dir, file), await readFile(file));
  }
  return files;
}

/**
 * A proxy in front of the API that points every link it answers at itself, hands out the
 * export's first manifest with its zip link expired, and breaks the first streamed read of the
 * zip (an open `Range`) off halfway through.
 */
async function breakingProxy() {
  const manifests: string[] = [];
  const streamed: string[] = [];
  const server = http.createServer(async (request, response) => {
    const upstream = await forwarded(request, stack.baseUrl);
    const headers = Object.fromEntries(
      [...upstream.headers].filter(([name]) => !['content-encoding', 'transfer-encoding'].includes(name)),
    );
    let body = Buffer.from(await upstream.arrayBuffer());
    if (new URL(request.url!, stack.baseUrl).pathname === `/api/v1/jobs/${jobId}/exports`) {
      const manifest = JSON.parse(body.toString().replaceAll(stack.baseUrl, url));
      if (manifests.push(request.method!) === 1 && upstream.ok)
        manifest.artifacts.prediction.downloadUrl = expiredLink(
          stack.signingSecret,
          manifest.artifacts.prediction.downloadUrl,
        );
      body = Buffer.from(JSON.stringify(manifest));
      headers['content-length'] = String(body.length);
    }
    const range = request.headers.range ?? '';
    if (upstream.status === 206 && /^bytes=\d+-$/.test(range) && streamed.push(range) === 1) {
      // The length stays as announced: the client sees a body that stopped coming.
      response.writeHead(upstream.status, headers);
      response.write(body.subarray(0, Math.floor(body.length / 2)), () => response.destroy());
      return;
    }
    response.writeHead(upstream.status, headers).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    manifests,
    streamed,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

test('a download whose link expired and whose zip broke off halfway renews the link, goes on from the first file missing, and writes the same store', async () => {
  const proxy = await breakingProxy();
  try {
    const dir = path.join(home, 'broken-off.zarr');
    const run = await spsAt(proxy.url, '--json', 'download', jobId, dir, '--format', 'spatialdata');
    expect(run.code === 0 ? 0 : run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ files: first.files, bytes: first.bytes, skipped: 0 });
    // The request's manifest with the expired link, then the manifest asked again.
    expect(proxy.manifests).toEqual(['POST', 'GET']);
    expect(proxy.streamed).toHaveLength(2);
    const [from, resumed] = proxy.streamed.map((range) => Number(/\d+/.exec(range)![0]));
    expect(resumed).toBeGreaterThan(from!);
    expect(await filesUnder(dir)).toEqual(await filesUnder(first.dir));

    // A rerun finds every file there and streams nothing.
    const again = await spsAt(proxy.url, '--json', 'download', jobId, dir, '--format', 'spatialdata');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ files: 0, bytes: 0, skipped: first.files });
    expect(proxy.streamed).toHaveLength(2);
  } finally {
    await proxy.close();
  }
}, 300_000);

test('an unknown format is a usage error (exit 2), an unknown id not found (exit 5)', async () => {
  const format = await sps('download', sampleId, path.join(home, 'x'), '--format', 'h5ad');
  expect(format.code).toBe(2);
  expect(format.stderr).toContain('spatialdata');
  const unknown = await sps(
    'download',
    '00000000-0000-4000-8000-000000000000',
    path.join(home, 'y'),
    '--format',
    'spatialdata',
  );
  expect(unknown.code).toBe(5);
}, 120_000);
