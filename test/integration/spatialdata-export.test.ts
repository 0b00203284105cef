/** @jest-environment ./test/support/onnx-environment.js */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunningWorkers } from '../../cli/runtime';
import { grantCredits } from '../../db/credits';
import { latestCompletedLayer } from '../../db/segmentation-runs';
import { ExportManifest, type ExportSelection, selectionKey } from '../../schemas/exports';
import { workflowIds } from '../../schemas/temporal';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson, spatialDataPython } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * SpatialData (0.7.3, its own venv) on a real export: a slide segmented and predicted on the
 * real worker, the zipped OME-Zarr with H&E and segmentation requested through the API, unzipped
 * (0.7.3 opens local folders only) and read by `spatialdata.read_zarr`: the H&E and the
 * prediction as images, the layer's mask as labels, its cells as the table annotating them.
 * The native stores are not SpatialData stores (docs/api.md, "SpatialData"): what 0.7.3 makes
 * of them is pinned here, so that the docs are revisited when that changes.
 */
let stack: TestStack;
let workers: RunningWorkers;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;
let markers: readonly string[];

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  workers = await stack.startWorker();
  call = apiClient(stack.api, stack.tenant.apiKey);
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  ({ sampleId, jobId, markers } = stack.processedSample());
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await workers?.shutdown();
  await stack?.close();
});

const selection: ExportSelection = {
  includeHe: true,
  includeSegmentation: true,
  includeOriginalUpload: false,
};

async function zipExport(): Promise<ExportManifest> {
  const answer = await call('POST', `/jobs/${jobId}/exports`, { format: 'ome-zarr-zip', ...selection });
  expect(answer.status).toBe(202);
  await stack.client.workflow
    .getHandle(workflowIds.export(jobId, 'ome-zarr-zip', selectionKey(selection)))
    .result();
  const query = new URLSearchParams({
    format: 'ome-zarr-zip',
    ...Object.fromEntries(Object.entries(selection).map(([k, v]) => [k, String(v)])),
  });
  const ready = await call('GET', `/jobs/${jobId}/exports?${query}`);
  expect(ready.status).toBe(200);
  return ExportManifest.parse(ready.json);
}

const readExport = `
import json, sys, tempfile, warnings, zipfile
warnings.simplefilter('ignore')
import numpy as np
import spatialdata as sd
import zarr
archive, mask = sys.argv[1:]
out = tempfile.mkdtemp()
zipfile.ZipFile(archive).extractall(out)
s = sd.read_zarr(out)
level0 = lambda element: element['scale0']['image']
labels = level0(s.labels['cells']).values
source = zarr.open_array(mask + '/0', mode='r')[0]
table = s.tables['table']
attrs = table.uns['spatialdata_attrs']
ids = np.unique(labels)
print(json.dumps({
  'images': sorted(s.images), 'labels': sorted(s.labels), 'tables': sorted(s.tables),
  'he': list(level0(s.images['he']).shape),
  'channels': [str(c) for c in level0(s.images['prediction']).coords['c'].values],
  'labelsEqualMask': bool(np.array_equal(labels, source)),
  'nObs': int(table.n_obs),
  'attrs': {k: attrs[k] for k in ('region', 'region_key', 'instance_key')},
  'regions': sorted(set(table.obs[attrs['region_key']].astype(str))),
  'instancesAreLabels': bool(np.array_equal(np.sort(table.obs[attrs['instance_key']].to_numpy()), ids[ids != 0])),
  'var': list(table.var_names),
}))
`;

test('the zipped export opens in spatialdata.read_zarr: H&E and prediction images, the mask as labels, the cell table', async () => {
  const manifest = await zipExport();
  const response = await fetch(manifest.artifacts.prediction!.downloadUrl);
  expect(response.status).toBe(200);
  const zip = path.join(testEnv().scratch, `${jobId}-spatialdata.ome.zarr.zip`);
  await writeFile(zip, new Uint8Array(await response.arrayBuffer()));
  // The layer the export took: the sample's newest completed one.
  const layer = manifest.artifacts.segmentation!;
  const row = await latestCompletedLayer(stack.sql, sampleId);
  const mask = path.join(stack.fsRoot, `${row!.layerPrefix}mask`);
  const read = await runPythonJson<{
    images: string[];
    labels: string[];
    tables: string[];
    he: number[];
    channels: string[];
    labelsEqualMask: boolean;
    nObs: number;
    attrs: Record<string, string>;
    regions: string[];
    instancesAreLabels: boolean;
    var: string[];
  }>(readExport, [zip, mask], {}, spatialDataPython());
  expect(read).toEqual({
    images: ['he', 'prediction'],
    labels: ['cells'],
    tables: ['table'],
    he: [3, expect.any(Number), expect.any(Number)],
    channels: [...markers],
    labelsEqualMask: true,
    nObs: layer.instanceCount,
    attrs: { region: 'cells', region_key: 'region', instance_key: 'local_label' },
    regions: ['cells'],
    instancesAreLabels: true,
    var: [...markers],
  });
  expect(layer.instanceCount).toBeGreaterThan(0);
}, 600_000);

test('the native stores are not SpatialData stores: no elements in the stored prediction store, and 0.7.3 opens no URL', async () => {
  const answer = await call('POST', `/jobs/${jobId}/exports`, { format: 'ome-zarr', ...selection });
  expect(answer.status).toBe(200);
  const native = ExportManifest.parse(answer.json);
  const stored = path.join(
    stack.fsRoot,
    `orgs/${stack.tenant.organizationId}/samples/${sampleId}/jobs/${jobId}`,
  );
  const read = await runPythonJson<{ elements: string[]; url: string }>(
    `
import json, sys, warnings
warnings.simplefilter('ignore')
import spatialdata as sd
folder, url = sys.argv[1:]
s = sd.read_zarr(folder)
try:
    sd.read_zarr(url)
    opened = 'opened'
except Exception as e:
    opened = type(e).__name__
print(json.dumps({'elements': [name for _, name, _ in s.gen_elements()], 'url': opened}))
`,
    [stored, native.artifacts.prediction!.rootUrl.replace(/\/zarr\.json$/, '')],
    {},
    spatialDataPython(),
  );
  expect(read.elements).toEqual([]);
  expect(read.url).not.toBe('opened');
}, 120_000);
