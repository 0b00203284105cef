/** @jest-environment ./test/support/onnx-environment.js */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { systemVipsEnv } from '../../compute/slide/normalize';
import { grantCredits } from '../../db/credits';
import { ExportManifest, type ExportSelection, selectionKey } from '../../schemas/exports';
import { SegmentationState } from '../../schemas/segmentation';
import { workflowIds } from '../../schemas/temporal';
import { showinf } from '../support/bioformats';
import { testEnv } from '../support/env';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadFile } from '../support/uploads';

/**
 * The OME-TIFF export of a slide finer than the model (OS-1 detail, 1101 px a side at 0.227 µm;
 * the model reads its level 1, 550 px at 0.454 µm), with the H&E and the segmentation selected,
 * on the real worker: every series on the prediction's grid (one size, one pixel size), the H&E
 * as JPEG, the labels exact; read by tifffile, Bio-Formats (QuPath's reader), libvips and
 * OpenSlide. And the standard case, a slide at the model's resolution (CMU-1, 0.499 µm: the
 * run's processed template, cloned), where the H&E keeps its full resolution.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let sampleId: string;
let jobId: string;
let layerPrefix: string;
let instanceCount: number;
let cmuJobId: string;
const run = promisify(execFile);

beforeAll(async () => {
  stack = await startStack({ worker: true, sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  cmuJobId = stack.processedSample().jobId;
  sampleId = (await uploadFile(call, path.join(SHARED_WSI, 'OS-1-detail.ome.tif'))).id;
  await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
  expect((await call('POST', `/samples/${sampleId}/segmentation`)).status).toBe(202);
  await stack.client.workflow.getHandle(workflowIds.segmentation(sampleId, 1)).result();
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI', 'CD3'] });
  expect(submitted.status).toBe(202);
  jobId = submitted.json.jobId as string;
  await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result();
  const layer = SegmentationState.parse((await call('GET', `/samples/${sampleId}/segmentation`)).json).layer!;
  await stack.client.workflow.getHandle(workflowIds.segmentationMarkers(layer.id, jobId)).result();
  const [row] = await stack.sql<{ layer_prefix: string }[]>`
    SELECT layer_prefix FROM segmentation_runs WHERE layer_id = ${layer.id}`;
  layerPrefix = row!.layer_prefix;
  instanceCount = layer.instanceCount;
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

async function exportOf(job: string, chosen: ExportSelection): Promise<string> {
  const answer = await call('POST', `/jobs/${job}/exports`, { format: 'ome-tiff', ...chosen });
  expect(answer.status).toBe(202);
  await stack.client.workflow.getHandle(workflowIds.export(job, 'ome-tiff', selectionKey(chosen))).result();
  const query = new URLSearchParams(
    Object.fromEntries([['format', 'ome-tiff'], ...Object.entries(chosen).map(([k, v]) => [k, String(v)])]),
  );
  const manifest = ExportManifest.parse((await call('GET', `/jobs/${job}/exports?${query}`)).json);
  expect(manifest).toMatchObject({ status: 'ready', selection: chosen });
  const response = await fetch(manifest.artifacts.prediction!.downloadUrl);
  expect(response.status).toBe(200);
  const file = path.join(testEnv().scratch, `${job}-overlay.ome.tiff`);
  await writeFile(file, new Uint8Array(await response.arrayBuffer()));
  return file;
}

test('H&E and segmentation selected: three series that overlay, JPEG H&E, exact labels, pixel size in every reader', async () => {
  const file = await exportOf(jobId, {
    includeHe: true,
    includeSegmentation: true,
    includeOriginalUpload: false,
  });
  const he = path.join(stack.fsRoot, `orgs/${stack.tenant.organizationId}/samples/${sampleId}/he`);
  const mask = path.join(stack.fsRoot, layerPrefix, 'mask');
  const read = await runPythonJson<{
    series: { name: string; yx: number[]; physical: number[]; dtype: string }[];
    heCompression: number[];
    labelCompression: number[];
    psnr: number;
    labelsEqual: boolean;
    labelMax: number;
    xres: number[];
  }>(
    `
import json, sys, numpy as np, tifffile, zarr
tif, he, mask = sys.argv[1:4]
out = {'series': []}
with tifffile.TiffFile(tif) as t:
    images = tifffile.xml2dict(t.ome_metadata)['OME']['Image']
    for i, s in enumerate(t.series):
        px = images[i]['Pixels']
        level = s.levels[0]
        out['series'].append({'name': s.name, 'dtype': str(s.dtype),
                              'yx': [level.shape[k] for k, a in enumerate(s.axes) if a in 'YX'],
                              'physical': [px['PhysicalSizeX'], px['PhysicalSizeY']]})
    out['heCompression'] = [int(l.keyframe.compression) for l in t.series[1].levels]
    out['labelCompression'] = [int(l.keyframe.compression) for l in t.series[2].levels]
    out['xres'] = [l.keyframe.tags['XResolution'].value[0] / l.keyframe.tags['XResolution'].value[1]
                   for s in t.series for l in s.levels[:1]]
    ours = t.series[1].levels[0].asarray().astype(np.float64)
    source = np.moveaxis(zarr.open_array(he + '/1', mode='r')[:], 0, -1).astype(np.float64)
    out['psnr'] = float(10 * np.log10(255 ** 2 / np.mean((ours - source) ** 2)))
    labels = t.series[2].levels[0].asarray()
    out['labelsEqual'] = bool(np.array_equal(labels, zarr.open_array(mask + '/1', mode='r')[0]))
    out['labelMax'] = int(labels.max())
print(json.dumps(out))
`,
    [file, he, mask],
  );
  expect(read.series.map((s) => [s.name, s.dtype])).toEqual([
    ['prediction', 'uint16'],
    ['H&E', 'uint8'],
    ['segmentation', 'uint32'],
  ]);
  // The model's grid: OS-1's level 1.
  for (const series of read.series) {
    expect(series.yx).toEqual([550, 550]);
    expect(series.physical).toEqual(read.series[0]!.physical);
  }
  const mpp = read.series[0]!.physical[0]!;
  expect(mpp).toBeCloseTo(2 * 0.2271, 3);
  for (const xres of read.xres) expect(xres / (10_000 / mpp)).toBeCloseTo(1, 6);
  expect(new Set(read.heCompression)).toEqual(new Set([7]));
  expect(new Set(read.labelCompression)).toEqual(new Set([8]));
  expect(read.psnr).toBeGreaterThan(30);
  expect(read.labelsEqual).toBe(true);
  expect(read.labelMax).toBeGreaterThan(0);
  expect(read.labelMax).toBeLessThanOrEqual(instanceCount);

  const info = await showinf(file, ['-noflat']);
  expect(info).toContain('No validation errors found.');
  expect(info).toMatch(/Series count = 3/);
  const sizes = [...info.matchAll(/PhysicalSizeX="([0-9.e-]+)"/g)].map((m) => Number(m[1]));
  expect(sizes).toEqual([mpp, mpp, mpp]);

  const { stdout } = await run('vipsheader', ['-a', `${file}[page=2]`], { env: systemVipsEnv() });
  expect(Number(/^xres: (.+)$/m.exec(stdout)?.[1])).toBeCloseTo(1000 / mpp, 0);
  expect(stdout).toMatch(/^resolution-unit: cm$/m);
  const openslide = (await run('openslide-show-properties', [file])).stdout;
  expect(Number(/tiff\.XResolution: '([0-9.]+)'/.exec(openslide)?.[1])).toBeCloseTo(10_000 / mpp, 1);
  expect(openslide).toMatch(/tiff\.ResolutionUnit: 'centimeter'/);
});

test('a slide at the model resolution: the H&E keeps its level 0, on the prediction grid, as JPEG', async () => {
  const file = await exportOf(cmuJobId, {
    includeHe: true,
    includeSegmentation: false,
    includeOriginalUpload: false,
  });
  const read = await runPythonJson<{
    series: { name: string; yx: number[]; physical: number[]; levels: number }[];
    compression: number;
    units: number[];
  }>(
    `
import json, sys, tifffile
with tifffile.TiffFile(sys.argv[1]) as t:
    images = tifffile.xml2dict(t.ome_metadata)['OME']['Image']
    series = [{'name': s.name, 'levels': len(s.levels),
               'yx': [s.levels[0].shape[k] for k, a in enumerate(s.axes) if a in 'YX'],
               'physical': [images[i]['Pixels']['PhysicalSizeX'], images[i]['Pixels']['PhysicalSizeY']]}
              for i, s in enumerate(t.series)]
    units = [int(l.keyframe.tags['ResolutionUnit'].value) for s in t.series for l in s.levels]
    print(json.dumps({'series': series, 'compression': int(t.series[1].levels[0].keyframe.compression), 'units': units}))
`,
    [file],
  );
  expect(read.series.map((s) => s.name)).toEqual(['prediction', 'H&E']);
  // CMU-1's own level 0: the model reads it at 0.499 µm.
  expect(read.series[0]!.yx).toEqual([2967, 2220]);
  expect(read.series[1]!.yx).toEqual([2967, 2220]);
  expect(read.series[1]!.physical).toEqual(read.series[0]!.physical);
  expect(read.series[0]!.physical[0]).toBeCloseTo(0.499, 3);
  expect(read.series[1]!.levels).toBeGreaterThan(1);
  expect(read.compression).toBe(7);
  expect(new Set(read.units)).toEqual(new Set([3]));
  const info = await showinf(file, ['-noflat']);
  expect(info).toContain('No validation errors found.');
});
