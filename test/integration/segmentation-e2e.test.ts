/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SegmentationManifest, SegmentationState } from '../../schemas/segmentation';
import { workflowIds } from '../../schemas/temporal';
import { segmentationLayerFiles } from '../../storage/locator';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

/**
 * A real slide through the whole segmentation path on the real worker: upload with
 * `autoSegment` -> ingest -> segmentation starts by itself -> `completed`; the manifest and its
 * files through the API, read by zarr-python, pyarrow and DuckDB; then a prediction completes
 * and the layer's marker tables follow it. The slide is OS-1's detail (1101 px a side at
 * 0.227 µm): every assertion holds for any slide, and a small one keeps the file short.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let state: SegmentationState;
let manifest: SegmentationManifest;
let scratch: string;

async function waitForSegmentation(
  predicate: (s: SegmentationState) => boolean,
  id = sampleId,
): Promise<SegmentationState> {
  for (let i = 0; i < 600; i++) {
    const current = SegmentationState.parse((await call('GET', `/samples/${id}/segmentation`)).json);
    if (predicate(current)) return current;
    await sleep(250);
  }
  throw new Error('segmentation did not get there in time');
}

/** Downloads a layer file through the API into the scratch folder; answers its local path. */
async function download(url: string, name: string): Promise<string> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${stack.tenant.apiKey}` } });
  expect(response.status).toBe(200);
  const file = path.join(scratch, name);
  await writeFile(file, new Uint8Array(await response.arrayBuffer()));
  return file;
}

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  scratch = await mkdtemp(path.join(testEnv().scratch, 'segmentation-'));
  const upload = await uploadFile(call, path.join(SHARED_WSI, 'OS-1-detail.ome.tif'), {
    autoSegment: true,
  });
  sampleId = upload.id;
  await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
  state = await waitForSegmentation((s) => s.status === 'completed' || s.status === 'failed');
  const layerId = state.layer?.id;
  if (layerId) {
    manifest = SegmentationManifest.parse(
      (await call('GET', `/samples/${sampleId}/segmentation/${layerId}/manifest`)).json,
    );
  }
}, 300_000);
afterAll(async () => {
  await stack?.close();
});

test('ingest of an autoSegment upload starts segmentation, which completes with a layer', async () => {
  expect({ status: state.status, error: state.job?.errorMessage }).toEqual({
    status: 'completed',
    error: null,
  });
  expect(state.job).toMatchObject({ attempt: 1, progress: 1 });
  // OS-1's detail is 250 µm of dense tissue, a few hundred nuclei: a floor well under them
  // that still fails a run finding next to nothing.
  expect(state.layer!.instanceCount).toBeGreaterThan(150);
  const handle = stack.client.workflow.getHandle(workflowIds.segmentation(sampleId, 1));
  expect(await handle.result()).toEqual({ status: 'completed' });
  // A second POST reuses the completed work.
  const again = await call('POST', `/samples/${sampleId}/segmentation`);
  expect(again.status).toBe(200);
  expect(SegmentationState.parse(again.json).job!.id).toBe(state.job!.id);
  const detail = await call('GET', `/samples/${sampleId}`);
  expect(detail.json.segmentation).toEqual(state);
});

test('the manifest names every artifact with URLs of this API, and schemaVersion 1.0', () => {
  const files = `${stack.api}/samples/${sampleId}/segmentation/${manifest.layerId}/files/`;
  expect(manifest).toMatchObject({
    schemaVersion: '1.0',
    layerId: state.layer!.id,
    entityType: 'cell',
    instanceCount: state.layer!.instanceCount,
    artifacts: {
      mask: { format: 'ome-zarr-v3', dtype: 'uint32', baseUrl: `${files}mask/` },
      cells: {
        format: 'parquet',
        morphologyUrl: `${files}features/instances.parquet`,
        markerExpressionBaseUrl: `${files}features/markers/`,
        markers: [],
        joinKey: 'instance_id',
        maskJoinKey: 'local_label',
      },
      provenance: { format: 'json', url: `${files}provenance.json` },
    },
  });
});

test('the mask is a uint32 NGFF label image read alike by zarr-python: labels 1..N, each once', async () => {
  const root = path.join(stack.fsRoot, state.layer ? await layerPrefix() : '', segmentationLayerFiles.mask);
  const read = await runPythonJson<{
    dtype: string;
    shape: number[];
    labels: number;
    max: number;
    levels: number;
    imageLabel: boolean;
  }>(
    `
import json, sys, zarr, numpy as np
group = zarr.open_group(sys.argv[1], mode='r')
ome = group.attrs['ome']
level0 = group[ome['multiscales'][0]['datasets'][0]['path']]
pixels = level0[:]
labels = np.unique(pixels)
print(json.dumps({'dtype': str(level0.dtype), 'shape': list(level0.shape), 'labels': int((labels > 0).sum()),
  'max': int(labels.max()), 'levels': len(ome['multiscales'][0]['datasets']), 'imageLabel': 'image-label' in ome}))
`,
    [root],
  );
  const detail = await call('GET', `/samples/${sampleId}`);
  expect(read).toMatchObject({
    dtype: 'uint32',
    shape: [1, detail.json.heightPx, detail.json.widthPx],
    labels: state.layer!.instanceCount,
    max: state.layer!.instanceCount,
    imageLabel: true,
  });
  expect(read.levels).toBeGreaterThan(1);
});

test('the morphology table reads in pyarrow and DuckDB with one row per label', async () => {
  const file = await download(manifest.artifacts.cells.morphologyUrl, 'instances.parquet');
  const read = await runPythonJson<{ rows: number; duckRows: number; columns: string[]; labels: number[] }>(
    `
import json, sys, duckdb, pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
labels = sorted(table.column('local_label').to_pylist())
duck = duckdb.sql(f"SELECT count(DISTINCT instance_id) FROM read_parquet('{sys.argv[1]}')").fetchall()[0][0]
print(json.dumps({'rows': table.num_rows, 'duckRows': duck, 'columns': table.column_names,
  'labels': [labels[0], labels[-1]]}))
`,
    [file],
  );
  const n = state.layer!.instanceCount;
  expect(read).toMatchObject({ rows: n, duckRows: n, labels: [1, n] });
  expect(read.columns).toEqual([
    ...manifest.artifacts.cells.geometry,
    ...manifest.artifacts.cells.morphology,
  ]);
});

test('files outside the manifest are 404: traversal, the working set, unknown markers', async () => {
  const files = `/samples/${sampleId}/segmentation/${manifest.layerId}/files`;
  for (const bad of [
    `${files}/mask/%2e%2e/manifest.json`,
    `${files}/%2e%2e/%2e%2e/he/zarr.json`,
    `${files}/objects/index.json`,
    `${files}/manifest.json`,
    `${files}/features/markers/CD3.parquet`,
  ]) {
    expect({ bad, status: (await call('GET', bad)).status }).toEqual({ bad, status: 404 });
  }
  const provenance = await call('GET', `${files}/provenance.json`);
  expect(provenance.status).toBe(200);
  expect(provenance.json).toMatchObject({
    layerId: manifest.layerId,
    segmenter: { name: 'classical-watershed' },
    instanceCount: manifest.instanceCount,
  });
});

test('a completed prediction brings marker tables joinable with the morphology table', async () => {
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI', 'CD3'] });
  expect(submitted.status).toBe(202);
  const jobId = submitted.json.jobId as string;
  await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result();
  await stack.client.workflow.getHandle(workflowIds.segmentationMarkers(manifest.layerId, jobId)).result();
  const refreshed = SegmentationManifest.parse(
    (await call('GET', `/samples/${sampleId}/segmentation/${manifest.layerId}/manifest`)).json,
  );
  expect(refreshed.artifacts.cells.markers).toEqual(['DAPI', 'CD3']);
  const morphology = await download(refreshed.artifacts.cells.morphologyUrl, 'instances-2.parquet');
  const dapi = await download(
    `${refreshed.artifacts.cells.markerExpressionBaseUrl}DAPI.parquet`,
    'DAPI.parquet',
  );
  const read = await runPythonJson<{ rows: number; joined: number; columns: string[]; positive: number }>(
    `
import json, sys, duckdb, pyarrow.parquet as pq
table = pq.read_table(sys.argv[2])
joined = duckdb.sql(f"SELECT count(*) FROM read_parquet('{sys.argv[1]}') i JOIN read_parquet('{sys.argv[2]}') m USING (instance_id)").fetchall()[0][0]
positive = duckdb.sql(f"SELECT count(*) FROM read_parquet('{sys.argv[2]}') WHERE pixel_count > 0 AND median >= 0 AND mean >= 0").fetchall()[0][0]
print(json.dumps({'rows': table.num_rows, 'joined': joined, 'columns': table.column_names, 'positive': positive}))
`,
    [morphology, dapi],
  );
  const n = refreshed.instanceCount;
  expect(read).toEqual({
    rows: n,
    joined: n,
    columns: ['instance_id', 'mean', 'median', 'pixel_count'],
    positive: n,
  });
  const state2 = SegmentationState.parse((await call('GET', `/samples/${sampleId}/segmentation`)).json);
  expect(state2.layer!.markers).toEqual(['DAPI', 'CD3']);
});

test('an autoSegment slide whose file gives no scale waits for one, segments once mpp is set, and again when it is corrected', async () => {
  // BRACS's crop states no pixel size.
  const upload = await uploadFile(call, path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'), {
    autoSegment: true,
  });
  const ingest = await stack.client.workflow.getHandle(workflowIds.ingest(upload.id)).result();
  expect(ingest.status).toBe('ready');
  // Not a failed run that a retry would have to follow after its cooldown: none yet.
  const waiting = SegmentationState.parse((await call('GET', `/samples/${upload.id}/segmentation`)).json);
  expect(waiting).toMatchObject({ status: 'not_started', job: null });
  expect((await call('PATCH', `/samples/${upload.id}`, { mpp: 0.25 })).status).toBe(200);
  await stack.client.workflow.getHandle(workflowIds.recount(upload.id)).result();
  const segmented = await waitForSegmentation(
    (s) => s.status === 'completed' || s.status === 'failed',
    upload.id,
  );
  expect({
    status: segmented.status,
    error: segmented.job?.errorMessage,
    attempt: segmented.job?.attempt,
  }).toEqual({ status: 'completed', error: null, attempt: 1 });
  expect(segmented.layer!.instanceCount).toBeGreaterThan(0);
  expect(await squareMicronsPerPixel(upload.id, segmented)).toBeCloseTo(0.25 ** 2, 9);

  // A corrected scale: the cells found at the old one are found again at the new one, unasked.
  expect((await call('PATCH', `/samples/${upload.id}`, { mpp: 0.5 })).status).toBe(200);
  await stack.client.workflow.getHandle(workflowIds.recount(upload.id)).result();
  const rescaled = await waitForSegmentation(
    (s) => s.job?.attempt === 2 && (s.status === 'completed' || s.status === 'failed'),
    upload.id,
  );
  expect({ status: rescaled.status, error: rescaled.job?.errorMessage }).toEqual({
    status: 'completed',
    error: null,
  });
  expect(rescaled.layer!.id).not.toBe(segmented.layer!.id);
  expect(await squareMicronsPerPixel(upload.id, rescaled)).toBeCloseTo(0.5 ** 2, 9);
  // At the scale it was made at, the layer is reused again: by a POST, and by the same mpp saved.
  const again = await call('POST', `/samples/${upload.id}/segmentation`);
  expect({ status: again.status, layer: again.json.layer?.id }).toEqual({
    status: 200,
    layer: rescaled.layer!.id,
  });
  expect((await call('PATCH', `/samples/${upload.id}`, { mpp: 0.5 })).status).toBe(200);
  await stack.client.workflow.getHandle(workflowIds.recount(upload.id)).result();
  const kept = SegmentationState.parse((await call('GET', `/samples/${upload.id}/segmentation`)).json);
  expect(kept.job).toMatchObject({ attempt: 2, status: 'completed' });
}, 300_000);

/** The morphology table's square microns per pixel of cell area: the scale its layer was made at. */
async function squareMicronsPerPixel(id: string, segmentation: SegmentationState): Promise<number> {
  const layer = SegmentationManifest.parse(
    (await call('GET', `/samples/${id}/segmentation/${segmentation.layer!.id}/manifest`)).json,
  );
  const morphology = await download(layer.artifacts.cells.morphologyUrl, `${segmentation.layer!.id}.parquet`);
  return runPythonJson<number>(
    `
import json, sys, pyarrow.parquet as pq
table = pq.read_table(sys.argv[1], columns=['area_px', 'area_um2']).to_pydict()
print(json.dumps(sum(table['area_um2']) / sum(table['area_px'])))
`,
    [morphology],
  );
}

async function layerPrefix(): Promise<string> {
  const [row] = await stack.sql<{ prefix: string }[]>`
    SELECT layer_prefix AS prefix FROM segmentation_runs WHERE layer_id = ${state.layer!.id}`;
  return row!.prefix;
}
