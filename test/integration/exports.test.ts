/** @jest-environment ./test/support/onnx-environment.js */
import { execFile } from 'node:child_process';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { defaultPayloadConverter } from '@temporalio/common';
import { createExportActivities } from '../../activities/exports';
import type { RunningWorkers } from '../../cli/runtime';
import { systemVipsEnv } from '../../compute/slide/normalize';
import { grantCredits } from '../../db/credits';
import { ExportManifest, type ExportSelection, selectionKey } from '../../schemas/exports';
import { workflowIds } from '../../schemas/temporal';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { insertJob } from '../support/samples';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * Exports end to end on the real worker: a slide ingested, segmented and predicted, then each
 * format and selection requested through the API and read by zarr-python, tifffile and libvips;
 * reuse, failure and retry, and the expiry sweep.
 */
let stack: TestStack;
let workers: RunningWorkers;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;
let resultRoot: string;
const MARKERS = ['DAPI', 'CD3'];
const run = promisify(execFile);

beforeAll(async () => {
  // Segmented and predicted once per run (test/support/shared-slides.ts).
  stack = await startStack({ sharedSlides: 'processed' });
  workers = await stack.startWorker();
  call = apiClient(stack.api, stack.tenant.apiKey);
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  ({ sampleId, jobId } = stack.processedSample());
  expect(stack.processedSample().markers).toEqual(MARKERS);
  resultRoot = path.join(
    stack.fsRoot,
    `orgs/${stack.tenant.organizationId}/samples/${sampleId}/jobs/${jobId}`,
  );
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await workers?.shutdown();
  await stack?.close();
});

const selection = (overrides: Partial<ExportSelection> = {}): ExportSelection => ({
  includeHe: false,
  includeSegmentation: false,
  includeOriginalUpload: false,
  ...overrides,
});

async function request(format: string, chosen: ExportSelection) {
  const answer = await call('POST', `/jobs/${jobId}/exports`, { format, ...chosen });
  return { status: answer.status, manifest: ExportManifest.parse(answer.json) };
}

async function waitForExport(format: string, chosen: ExportSelection) {
  await stack.client.workflow.getHandle(workflowIds.export(jobId, format, selectionKey(chosen))).result();
  const query = new URLSearchParams({
    format,
    ...Object.fromEntries(Object.entries(chosen).map(([k, v]) => [k, String(v)])),
  });
  const answer = await call('GET', `/jobs/${jobId}/exports?${query}`);
  expect(answer.status).toBe(200);
  return ExportManifest.parse(answer.json);
}

async function download(url: string, name: string): Promise<string> {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  const file = path.join(testEnv().scratch, `${jobId}-${name}`);
  await writeFile(file, new Uint8Array(await response.arrayBuffer()));
  return file;
}

test('native OME-Zarr answers at once with the stored store, and the H&E beside it', async () => {
  const chosen = selection({ includeHe: true });
  const { status, manifest } = await request('ome-zarr', chosen);
  expect(status).toBe(200);
  expect(manifest).toMatchObject({
    schemaVersion: '1.0',
    status: 'ready',
    format: 'ome-zarr',
    selection: chosen,
    retryable: false,
    error: null,
    artifacts: {
      prediction: {
        format: 'ome-zarr-v3',
        role: 'predicted-mif',
        dataModel: 'pixel-grid',
        stored: true,
        converted: false,
        includesHe: false,
        baseUrl: `${stack.api}/jobs/${jobId}/results/files/`,
      },
      he: {
        format: 'ome-zarr-v3',
        role: 'processed-registered-he',
        baseUrl: `${stack.api}/samples/${sampleId}/he/files/`,
      },
    },
  });
  expect(Object.keys(manifest.artifacts).sort()).toEqual(['he', 'prediction']);
  expect(manifest.artifacts.prediction!.sizeBytes).toBeGreaterThan(1000);
  const root = await fetch(manifest.artifacts.prediction!.rootUrl);
  expect(((await root.json()) as { node_type: string }).node_type).toBe('group');
  const he = await call('GET', `/samples/${sampleId}/he/files/zarr.json`);
  expect(he.json.attributes.ome.multiscales).toHaveLength(1);
  expect((await call('GET', `/samples/${sampleId}/he/files/%2e%2e/thumbnail.jpg`)).status).toBe(404);
  // An identical request reuses it.
  const again = await request('ome-zarr', chosen);
  expect(again.status).toBe(200);
  expect(again.manifest.expiresAt).toBe(manifest.expiresAt);
});

test('refusals: no export yet 404 not_started, unknown format 422, no results 409', async () => {
  const query = 'format=ome-tiff&includeHe=true&includeSegmentation=false&includeOriginalUpload=true';
  expect(await call('GET', `/jobs/${jobId}/exports?${query}`)).toMatchObject({
    status: 404,
    json: { error: 'not_started' },
  });
  expect((await call('POST', `/jobs/${jobId}/exports`, { format: 'gif' })).status).toBe(422);
  expect((await call('POST', `/jobs/${jobId}/exports`, { format: 'ome-zarr', extra: 1 })).status).toBe(400);
  const queued = await insertJob(stack.sql, { organizationId: stack.tenant.organizationId, sampleId });
  expect(await call('POST', `/jobs/${queued}/exports`, { format: 'ome-zarr' })).toMatchObject({
    status: 409,
    json: { error: 'results_not_ready' },
  });
});

test('OME-TIFF with H&E: 202, then ready; tifffile and libvips read it, pixels equal the Zarr source', async () => {
  const chosen = selection({ includeHe: true });
  const { status, manifest } = await request('ome-tiff', chosen);
  expect(status).toBe(202);
  expect(['pending', 'running']).toContain(manifest.status);
  const ready = await waitForExport('ome-tiff', chosen);
  expect(ready).toMatchObject({
    status: 'ready',
    artifacts: { prediction: { converted: true, includesHe: true } },
  });
  const file = await download(ready.artifacts.prediction!.downloadUrl, 'export.ome.tiff');
  expect(ready.artifacts.prediction!.sizeBytes).toBeGreaterThan(1000);
  const read = await runPythonJson<{
    ome: boolean;
    series: { shape: number[]; dtype: string; levels: number }[];
    equal: boolean;
  }>(
    `
import json, sys, tifffile, zarr, numpy as np
with tifffile.TiffFile(sys.argv[1]) as tif:
    series = [{'shape': list(s.shape), 'dtype': str(s.dtype), 'levels': len(s.levels)} for s in tif.series]
    dapi = tif.series[0].levels[0].asarray()[0]
store = zarr.open_group(sys.argv[2], mode='r')
source = store['markers/DAPI/0'][0]
print(json.dumps({'ome': tif.is_ome, 'series': series, 'equal': bool(np.array_equal(dapi, source))}))
`,
    [file, resultRoot],
  );
  expect(read.ome).toBe(true);
  expect(read.equal).toBe(true);
  expect(read.series[0]).toMatchObject({ dtype: 'uint16' });
  expect(read.series[0]!.shape[0]).toBe(2);
  expect(read.series[1]).toMatchObject({ dtype: 'uint8' });
  expect(read.series[0]!.levels).toBeGreaterThan(1);
  // libvips opens the first sub-resolution of the first plane through its SubIFD.
  const { stdout } = await run('vipsheader', [`${file}[subifd=0]`], { env: systemVipsEnv() });
  expect(stdout).toMatch(/ushort/);
});

test('zipped OME-Zarr with H&E and segmentation: zarr-python ZipStore reads identical pixels; links for the layer', async () => {
  const chosen = selection({ includeHe: true, includeSegmentation: true });
  expect((await request('ome-zarr-zip', chosen)).status).toBe(202);
  const ready = await waitForExport('ome-zarr-zip', chosen);
  expect(ready.status).toBe('ready');
  const file = await download(ready.artifacts.prediction!.downloadUrl, 'export.ome.zarr.zip');
  const read = await runPythonJson<{ equal: boolean; he: number[]; labels: number }>(
    `
import json, sys, zarr, numpy as np
archive = zarr.open_group(zarr.storage.ZipStore(sys.argv[1], mode='r'), mode='r')
source = zarr.open_group(sys.argv[2], mode='r')
equal = bool(np.array_equal(archive['markers/CD3/0'][:], source['markers/CD3/0'][:]))
labels = archive['labels/cells/0'][:]
print(json.dumps({'equal': equal, 'he': list(archive['images/he/0'].shape), 'labels': int(labels.max())}))
`,
    [file, resultRoot],
  );
  const segmentation = ready.artifacts.segmentation!;
  expect(read).toMatchObject({ equal: true, labels: segmentation.instanceCount });
  expect(read.he[0]).toBe(3);
  expect(segmentation.artifacts.cells.markers).toEqual(MARKERS);
  expect(segmentation.downloads.markers.map((m) => m.marker)).toEqual(MARKERS);
  for (const link of [
    segmentation.downloads.morphology,
    segmentation.downloads.provenance,
    ...segmentation.downloads.markers,
  ]) {
    expect(link.sizeBytes).toBeGreaterThanOrEqual(1);
    const response = await fetch(link.downloadUrl);
    expect(response.status).toBe(200);
    expect((await response.arrayBuffer()).byteLength).toBe(link.sizeBytes);
  }
});

test('the original upload: a link to the stored copy with its size and a warning', async () => {
  const { status, manifest } = await request('ome-zarr', selection({ includeOriginalUpload: true }));
  expect(status).toBe(200);
  const original = manifest.artifacts.originalUpload!;
  expect(original).toMatchObject({
    status: 'ready',
    role: 'original-upload',
    filename: 'CMU-1-Small-Region.svs',
    storedCopy: 'uploaded',
  });
  expect(original.warning).toContain('gigabytes');
  const response = await fetch(original.downloadUrl);
  expect(response.status).toBe(200);
  expect((await response.arrayBuffer()).byteLength).toBe(original.sizeBytes);
});

test('a failed conversion records its error and is retried by an identical request', async () => {
  const chosen = selection({ includeOriginalUpload: true });
  const root = path.join(resultRoot, 'zarr.json');
  await rename(root, `${root}.away`);
  try {
    expect((await request('ome-tiff', chosen)).status).toBe(202);
    const failed = await waitForExport('ome-tiff', chosen);
    expect(failed).toMatchObject({ status: 'failed', retryable: true });
    expect(failed.error).toBeTruthy();
  } finally {
    await rename(`${root}.away`, root);
  }
  const retried = await request('ome-tiff', chosen);
  expect(retried.status).toBe(202);
  const ready = await waitForExport('ome-tiff', chosen);
  expect(ready).toMatchObject({ status: 'ready', retryable: false, error: null });
  const [row] = await stack.sql<{ attempt: number }[]>`
    SELECT attempt FROM exports WHERE job_id = ${jobId} AND format = 'ome-tiff' AND include_original_upload`;
  expect(row!.attempt).toBe(2);
});

test('a worker stopped in the middle of a conversion: the retry starts the file over and only a whole one is served', async () => {
  const chosen = selection({ includeHe: true, includeOriginalUpload: true });
  expect((await request('ome-tiff', chosen)).status).toBe(202);
  const handle = stack.client.workflow.getHandle(workflowIds.export(jobId, 'ome-tiff', selectionKey(chosen)));
  let converting = false;
  for (let i = 0; i < 2400 && !converting; i++) {
    const { raw } = await handle.describe();
    const build = raw.pendingActivities?.find((a) => a.activityType?.name === 'buildExport');
    const payload = build?.heartbeatDetails?.payloads?.[0];
    converting =
      payload !== undefined &&
      defaultPayloadConverter.fromPayload<{ tilesDone: number }>(payload).tilesDone > 0;
    if (!converting) await sleep(10);
  }
  expect(converting).toBe(true);
  await workers.shutdown();
  const query = `format=ome-tiff&includeHe=true&includeOriginalUpload=true`;
  const meanwhile = ExportManifest.parse((await call('GET', `/jobs/${jobId}/exports?${query}`)).json);
  expect(meanwhile.status).toBe('running');
  expect(meanwhile.artifacts.prediction!.downloadUrl).toBe('');
  workers = await stack.startWorker();
  const ready = await waitForExport('ome-tiff', chosen);
  expect(ready.status).toBe('ready');
  const history = await handle.fetchHistory();
  const attempts = history.events
    ?.filter((event) => event.activityTaskStartedEventAttributes)
    .map((event) => event.activityTaskStartedEventAttributes?.attempt ?? 0);
  expect(Math.max(...(attempts ?? []))).toBeGreaterThan(1);
  const file = await download(ready.artifacts.prediction!.downloadUrl, 'restarted.ome.tiff');
  const read = await runPythonJson<{ series: number; equal: boolean }>(
    `
import json, sys, tifffile, zarr, numpy as np
with tifffile.TiffFile(sys.argv[1]) as tif:
    n = len(tif.series)
    cd3 = tif.series[0].levels[0].asarray()[1]
source = zarr.open_group(sys.argv[2], mode='r')['markers/CD3/0'][0]
print(json.dumps({'series': n, 'equal': bool(np.array_equal(cd3, source))}))
`,
    [file, resultRoot],
  );
  expect(read).toEqual({ series: 2, equal: true });
});

test('expired exports are swept with their files; a later request starts afresh', async () => {
  const chosen = selection({ includeHe: true });
  const [row] = await stack.sql<{ id: string; key: string }[]>`
    UPDATE exports SET expires_at = now() - interval '1 second'
    WHERE job_id = ${jobId} AND format = 'ome-tiff' AND include_he AND NOT include_original_upload
    RETURNING id, artifact_key AS key`;
  const activities = createExportActivities({
    sql: stack.sql,
    store: stack.store,
    startExport: async () => {},
  });
  expect((await activities.sweepExpiredExports({})).removed).toBeGreaterThanOrEqual(1);
  expect(await stack.store.stat(row!.key)).toBeUndefined();
  const query = 'format=ome-tiff&includeHe=true';
  expect((await call('GET', `/jobs/${jobId}/exports?${query}`)).status).toBe(404);
  const fresh = await request('ome-tiff', chosen);
  expect(fresh.status).toBe(202);
  expect((await waitForExport('ome-tiff', chosen)).status).toBe('ready');
});
