import { execFileSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { openTiffSlide } from '../../compute/slide';
import { fileSource } from '../../compute/source';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { SHARED_SLIDES } from '../support/shared-slides';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadBytes, uploadFile } from '../support/uploads';
import { tinyTiff } from '../unit/compute/helpers';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ worker: true, sharedSlides: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

async function ingested(sampleId: string) {
  const result = await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
  return { result, ...(await ingestedRecords(sampleId)) };
}

/** What ingest left of a sample: its API detail and upload, and its slide row. */
async function ingestedRecords(sampleId: string) {
  const detail = await call('GET', `/samples/${sampleId}`);
  const upload = await call('GET', `/uploads/${sampleId}`);
  const [slide] = await stack.sql`SELECT * FROM sample_slides WHERE sample_id = ${sampleId}`;
  return { detail: detail.json, upload: upload.json, slide };
}

/** The unit of the H&E store's x axis and the x scale of each of its levels. */
async function heScales(sampleId: string) {
  const key = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/he/zarr.json`;
  const root = JSON.parse(Buffer.from((await stack.store.get(key))!).toString());
  const [multiscale] = root.attributes.ome.multiscales as {
    axes: { unit?: string }[];
    datasets: { coordinateTransformations: { scale: number[] }[] }[];
  }[];
  return {
    unit: multiscale!.axes[2]!.unit,
    scales: multiscale!.datasets.map((d) => d.coordinateTransformations[0]!.scale[2]),
  };
}

async function keysUnder(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of stack.store.list(prefix)) keys.push(key);
  return keys;
}

const slides: [string, { widthPx: number; heightPx: number; mpp: number | null }][] = [
  ['CMU-1-Small-Region.svs', { widthPx: 2220, heightPx: 2967, mpp: 0.499 }],
  ['tcga-cr-7395-01a-01-ts1.svs', { widthPx: 4443, heightPx: 3567, mpp: null }],
  ['BRACS_1640_N_3_cropped.tiff', { widthPx: 650, heightPx: 743, mpp: null }],
  ['OS-1-detail.ome.tif', { widthPx: 1101, heightPx: 1101, mpp: 0.2271 }],
  ['CMU-1-Small-Region.derived-pyramid.ome.tif', { widthPx: 2220, heightPx: 2967, mpp: 0.499 }],
  ['test3-TRITC-2-560.ndpi', { widthPx: 3968, heightPx: 4864, mpp: 0.2282 }],
  ['dicom/CMU-1-Small-Region/level-0-frames-0-30.dcm', { widthPx: 2220, heightPx: 2967, mpp: 0.499 }],
];

describe('ingest of every slide in ../shared/data/wsi', () => {
  // CMU-1's SVS is the run's shared slide, ingested by the real worker once per run (its
  // template is not built unless that ingest ends ready); the other slides are uploaded here,
  // all at once before the first test, so that the worker ingests them side by side.
  const uploads = new Map<string, Promise<string>>();
  beforeAll(() => {
    for (const [file] of slides) {
      if (SHARED_SLIDES.some((name) => name === file)) continue;
      const upload = uploadFile(call, path.join(SHARED_WSI, file)).then(({ id }) => id as string);
      // Awaited by the slide's test, whose failure it then is.
      upload.catch(() => {});
      uploads.set(file, upload);
    }
  });

  test.each(slides)(
    '%s reaches ready with its size, scale, pyramid and tissue mask',
    async (file, expected) => {
      const shared = SHARED_SLIDES.find((name) => name === file);
      const sampleId = shared ? stack.sharedSample(shared) : await uploads.get(file)!;
      if (!shared) {
        const result = await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
        expect(result).toEqual({ status: 'ready', statusMessage: null });
      }
      const { detail, upload, slide } = await ingestedRecords(sampleId);
      expect(upload).toMatchObject({ status: 'ready', statusMessage: null });
      expect(detail).toMatchObject({
        status: 'ready',
        widthPx: expected.widthPx,
        heightPx: expected.heightPx,
      });
      if (expected.mpp === null) expect(detail.mpp).toBeNull();
      else expect(detail.mpp).toBeCloseTo(expected.mpp, 3);

      // The de-identified copy replaced the raw upload.
      const prefix = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/`;
      expect(await stack.store.stat(`${prefix}original/${path.basename(file)}`)).toBeUndefined();
      expect(await stack.store.stat(`${prefix}deidentified/${path.basename(file)}`)).toBeDefined();

      // The pyramid, thumbnail and mask are where the row says.
      expect(slide!.he_prefix).toBe(`${prefix}he/`);
      const root = JSON.parse(Buffer.from((await stack.store.get(`${prefix}he/zarr.json`))!).toString());
      expect(root.attributes.ome.version).toBe('0.5');
      const levels = slide!.he_levels as { widthPx: number; heightPx: number }[];
      expect(levels[0]).toMatchObject({ widthPx: expected.widthPx, heightPx: expected.heightPx });
      expect(Math.min(levels.at(-1)!.widthPx, levels.at(-1)!.heightPx)).toBeLessThan(512);
      expect(await stack.store.stat(slide!.thumbnail_key)).toBeDefined();
      expect(await stack.store.stat(slide!.tissue_mask_png_key)).toBeDefined();
      if (expected.mpp === null) expect(slide!.patch_count).toBeNull();
      else expect(slide!.patch_count).toBeGreaterThanOrEqual(0);
    },
    // The first slide's test may wait for all six ingests at once.
    300_000,
  );

  test('every lower level of the DICOM pyramid is a VOLUME instance that ingests on its own too', async () => {
    const dir = path.join(SHARED_WSI, 'dicom', 'CMU-1-Small-Region');
    const levels = (await readdir(dir)).filter(
      (file) => file.endsWith('.dcm') && !file.startsWith('level-0-'),
    );
    expect(levels).toHaveLength(11);
    // All at once: the worker ingests several samples side by side, as it would for users.
    const ingests = await Promise.all(
      levels.map(async (file) => {
        const upload = await uploadFile(call, path.join(dir, file));
        return { file, ...(await ingested(upload.id)) };
      }),
    );
    for (const { file, result, detail } of ingests) {
      expect({ file, result }).toEqual({ file, result: { status: 'ready', statusMessage: null } });
      expect(detail.widthPx).toBeGreaterThan(0);
    }
  });

  test('CMU-1: the tissue covers most of the slide and the patch count follows the mpp', async () => {
    const sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
    const { slide } = await ingestedRecords(sampleId);
    expect(slide!.tissue_fraction).toBeGreaterThan(0.3);
    // 2220 x 2967 px at 0.499 µm is 1108 x 1481 µm: 10 x 14 positions of 112 µm.
    expect(slide!.patch_count).toBeGreaterThan(40);
    expect(slide!.patch_count).toBeLessThanOrEqual(140);
    const before = slide!.patch_count as number;

    const patched = await call('PATCH', `/samples/${sampleId}`, { mpp: 0.998 });
    expect(patched.status).toBe(200);
    const recount = await stack.client.workflow.getHandle(workflowIds.recount(sampleId)).result();
    // Twice the microns per pixel: the same pixels cover four times the area.
    expect(recount.patchCount).toBeGreaterThan(before * 3);
    const [after] =
      await stack.sql`SELECT patch_count, patch_count_mpp FROM sample_slides WHERE sample_id = ${sampleId}`;
    expect(after).toEqual({ patch_count: recount.patchCount, patch_count_mpp: 0.998 });
    expect(await heScales(sampleId)).toEqual({ unit: 'micrometer', scales: [0.998, 1.996, 3.992, 7.984] });
  });

  test('a slide without a scale: the H&E store takes the one set later, in micrometers', async () => {
    const sampleId = await uploads.get('BRACS_1640_N_3_cropped.tiff')!;
    await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
    expect(await heScales(sampleId)).toEqual({ unit: undefined, scales: [1, 2] });
    const heKey = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/he/zarr.json`;
    const written = (await stack.store.stat(heKey))!.lastModified;

    expect((await call('PATCH', `/samples/${sampleId}`, { mpp: 0.25 })).status).toBe(200);
    await stack.client.workflow.getHandle(workflowIds.recount(sampleId)).result();
    expect(await heScales(sampleId)).toEqual({ unit: 'micrometer', scales: [0.25, 0.5] });
    const rescaled = (await stack.store.stat(heKey))!.lastModified;
    expect(rescaled).not.toEqual(written);

    // The same scale again recounts but leaves the store's metadata as it is.
    expect((await call('PATCH', `/samples/${sampleId}`, { mpp: 0.25 })).status).toBe(200);
    await stack.client.workflow.getHandle(workflowIds.recount(sampleId)).result();
    expect((await stack.store.stat(heKey))!.lastModified).toEqual(rescaled);
  });

  test("zarr-python and ome-zarr-py read the stored pyramid with the slide's own pixels", async () => {
    const file = path.join(SHARED_WSI, 'CMU-1-Small-Region.svs');
    const { slide } = await ingestedRecords(stack.sharedSample('CMU-1-Small-Region.svs'));
    const region = { level: 0, x: 1000, y: 1500, width: 64, height: 48 };
    const source = await fileSource(file);
    const expected = await (await openTiffSlide(source)).readRegion(region);
    await source.close();
    const read = await runPythonJson<{ shapes: number[][]; omeShapes: number[][]; pixels: number[] }>(
      `
import json, sys
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
store, x, y, w, h = sys.argv[1], *map(int, sys.argv[2:])
group = zarr.open_group(store, mode='r')
paths = [d['path'] for d in group.attrs['ome']['multiscales'][0]['datasets']]
node = list(Reader(parse_url(store))())[0]
print(json.dumps({
  'shapes': [list(group[p].shape) for p in paths],
  'omeShapes': [list(level.shape) for level in node.data],
  'pixels': group[paths[0]][:, y:y + h, x:x + w].transpose(1, 2, 0).ravel().tolist(),
}))
`,
      [
        path.join(stack.fsRoot, slide!.he_prefix),
        ...[region.x, region.y, region.width, region.height].map(String),
      ],
    );
    expect(read.shapes[0]).toEqual([3, 2967, 2220]);
    expect(read.omeShapes).toEqual(read.shapes);
    expect(Buffer.from(read.pixels).equals(Buffer.from(expected.data))).toBe(true);
  });

  test('the de-identified SVS keeps no identifying string and OpenSlide opens it with its MPP', async () => {
    const sampleId = stack.sharedSample('CMU-1-Small-Region.svs');
    const key = `orgs/${stack.tenant.organizationId}/samples/${sampleId}/deidentified/CMU-1-Small-Region.svs`;
    const copy = Buffer.from((await stack.store.get(key))!);
    const original = await readFile(path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'));
    expect(original.includes('CMU-1')).toBe(true);
    for (const identifying of ['CMU-1', 'Filename', 'ScanScope ID', 'Date = ', 'Time = ', 'User = ']) {
      expect(copy.includes(identifying)).toBe(false);
    }
    const file = path.join(stack.fsRoot, key);
    const properties = execFileSync('openslide-show-properties', [file], { encoding: 'utf8' });
    expect(properties).toContain("openslide.mpp-x: '0.499");
  });
});

const T = { short: 3, long: 4 };
const tag = (id: number, type: number, ...values: number[]) => ({ tag: id, type, values });

/** A grey 8-bit TIFF of one declared 256 x 256 tile grid, with a single tile offset. */
function tiledTiff(side: number, tileOffset: number): Uint8Array {
  return tinyTiff(
    [
      tag(256, T.long, side),
      tag(257, T.long, side),
      tag(258, T.short, 8),
      tag(259, T.short, 1),
      tag(262, T.short, 1),
      tag(322, T.short, 256),
      tag(323, T.short, 256),
      tag(324, T.long, tileOffset),
      tag(325, T.long, 65_536),
    ],
    { trailing: 1024 },
  );
}

/**
 * A few hundred bytes that claim 150,000 x 150,000 RGB pixels in one Deflate strip: 67 GB if
 * anything tried to inflate it. De-identification copies it (the bytes are harmless); the
 * probe refuses the size before any pixel is decoded.
 */
function decompressionBomb(): Uint8Array {
  const strip = deflateSync(Buffer.alloc(1 << 20));
  const entries = (offset: number) => [
    tag(256, T.long, 150_000),
    tag(257, T.long, 150_000),
    tag(258, T.short, 8),
    tag(259, T.short, 8),
    tag(262, T.short, 2),
    tag(273, T.long, offset),
    tag(277, T.short, 3),
    tag(278, T.long, 150_000),
    tag(279, T.long, strip.length),
  ];
  const header = tinyTiff(entries(0));
  const bytes = tinyTiff(entries(header.length), { trailing: strip.length });
  bytes.set(strip, header.length);
  return bytes;
}

describe('failures end in *_failed with a reason, and the worker keeps going', () => {
  const corpus: [string, Uint8Array, 'deid_failed' | 'preprocess_failed', RegExp][] = [];

  beforeAll(async () => {
    const svs = await readFile(path.join(SHARED_WSI, 'CMU-1-Small-Region.svs'));
    corpus.push(['zero bytes', new Uint8Array(0), 'deid_failed', /empty \(0 bytes\)/]);
    corpus.push([
      'not a TIFF',
      Buffer.from('%PDF-1.7 this is a document, not a slide'),
      'deid_failed',
      /not a whole-slide/,
    ]);
    corpus.push([
      'truncated SVS',
      svs.subarray(0, Math.floor(svs.length / 2)),
      'deid_failed',
      /the file is truncated or damaged/,
    ]);
    // 4,000,000,000 px a side with one tile offset; then one tile a gigabyte past the end.
    corpus.push([
      'absurd dimensions',
      tiledTiff(4_000_000_000, 200),
      'deid_failed',
      /TileOffsets has 1 values/,
    ]);
    corpus.push(['tile offsets past the end', tiledTiff(256, 1_000_000_000), 'deid_failed', /past the end/]);
    corpus.push(['decompression bomb', decompressionBomb(), 'preprocess_failed', /150000 x 150000/]);
  });

  test('each bad file fails with its reason and leaves no derived objects', async () => {
    // The bad files side by side, as users would send them; then a good one still ingests.
    const failures = await Promise.all(
      corpus.map(async ([name, bytes]) => {
        const { id } = await uploadBytes(call, bytes, { filename: `${name.replaceAll(' ', '-')}.svs` });
        return { id, ...(await ingested(id)) };
      }),
    );
    for (const [index, [name, , status, reason]] of corpus.entries()) {
      const { id, result, upload: after } = failures[index]!;
      expect({ name, status: result.status }).toEqual({ name, status });
      expect(result.statusMessage).toMatch(reason);
      expect(after).toMatchObject({ status, statusMessage: result.statusMessage });
      const prefix = `orgs/${stack.tenant.organizationId}/samples/${id}/`;
      expect(await keysUnder(`${prefix}he/`)).toEqual([]);
      expect(await keysUnder(`${prefix}tissue/`)).toEqual([]);
      // A fault of the file is found on the first attempt of each activity: no retry mends it.
      const history = await stack.client.workflow.getHandle(workflowIds.ingest(id)).fetchHistory();
      const attempts = history.events!.flatMap(
        (event) => event.activityTaskStartedEventAttributes?.attempt ?? [],
      );
      expect({ name, attempts: Math.max(...attempts) }).toEqual({ name, attempts: 1 });
    }
    const good = await uploadFile(call, path.join(SHARED_WSI, 'BRACS_1640_N_3_cropped.tiff'));
    expect((await ingested(good.id)).result.status).toBe('ready');
  });
});
