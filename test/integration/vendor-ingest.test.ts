import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readPyramidLevel } from '../../compute/pyramid';
import { prefixedStore } from '../../compute/store';
import { workflowIds } from '../../schemas/temporal';
import { apiClient } from '../support/http';
import { runPythonJson } from '../support/python';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI, uploadBytes, uploadFile } from '../support/uploads';
import { tinyTiff } from '../unit/compute/helpers';

/**
 * The vendor slides of ../shared/data/wsi/synthetic (Leica SCN, Ventana BIF, Philips TIFF, from
 * CMU-1's tissue) through the service as a user sends them: upload -> ready -> a one-marker
 * prediction and a segmentation; the stored file is de-identified to the byte, and the H&E
 * pyramid's level 0 is OpenSlide's read_region of the original. Formats refused by name end in
 * `preprocess_failed` saying what to do.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;
let scratch: string;

const vendorSlides: [
  string,
  { vendor: string; widthPx: number; heightPx: number; metadata: Record<string, string> },
][] = [
  [
    'CMU-1-Small-Region.leica.scn',
    {
      vendor: 'leica',
      widthPx: 2208,
      heightPx: 2960,
      // Where the XML places the main image on the slide, as OpenSlide reports it.
      metadata: {
        'openslide.objective-power': '20',
        'openslide.bounds-x': '16032',
        'openslide.bounds-y': '80160',
        'openslide.bounds-width': '2208',
        'openslide.bounds-height': '2960',
      },
    },
  ],
  [
    'CMU-1-Small-Region.ventana.bif',
    { vendor: 'ventana', widthPx: 2040, heightPx: 3056, metadata: { 'openslide.objective-power': '20' } },
  ],
  ['CMU-1-Small-Region.philips.tiff', { vendor: 'philips', widthPx: 2048, heightPx: 2560, metadata: {} }],
];
/** Each vendor slide's upload (its sample id), all sent at once so that they ingest side by side. */
const uploads = new Map<string, Promise<string>>();

beforeAll(async () => {
  stack = await startStack({ worker: true });
  call = apiClient(stack.api, stack.tenant.apiKey);
  scratch = await mkdtemp(path.join(tmpdir(), 'sps-vendor-ingest-'));
  for (const [file] of vendorSlides) {
    const upload = uploadFile(call, path.join(SHARED_WSI, 'synthetic', file)).then(({ id }) => id as string);
    // Awaited by the slide's first test, whose failure it then is.
    upload.catch(() => {});
    uploads.set(file, upload);
  }
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await rm(scratch, { recursive: true, force: true });
});

/** OpenSlide 4's level 0 where the main image lies (SCN: at its bounds), as raw RGB in a file. */
const openslideLevel0 = `
import json, sys, numpy as np, openslide
path, out, w, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = openslide.OpenSlide(path)
p = s.properties
x, y = int(p.get('openslide.bounds-x', 0)), int(p.get('openslide.bounds-y', 0))
np.asarray(s.read_region((x, y), 0, (w, h)).convert('RGB')).tofile(out)
print(json.dumps({'vendor': p['openslide.vendor'], 'mpp': float(p['openslide.mpp-x'])}))
`;

const barcodes = ['CMU-1', Buffer.from('CMU-1').toString('base64').replace(/=+$/, '')];

describe.each(vendorSlides)('%s', (file, expected) => {
  const original = path.join(SHARED_WSI, 'synthetic', file);
  let sampleId: string;

  test('reaches ready with the main image, its scale and a de-identified stored file', async () => {
    sampleId = await uploads.get(file)!;
    const result = await stack.client.workflow.getHandle(workflowIds.ingest(sampleId)).result();
    expect(result).toEqual({ status: 'ready', statusMessage: null });
    const detail = (await call('GET', `/samples/${sampleId}`)).json;
    expect(detail).toMatchObject({ status: 'ready', widthPx: expected.widthPx, heightPx: expected.heightPx });
    expect(detail.mpp).toBeCloseTo(0.499, 6);
    const [slide] = await stack.sql`SELECT * FROM sample_slides WHERE sample_id = ${sampleId}`;
    expect(slide!.vendor).toBe(expected.vendor);
    expect(slide!.patch_count).toBeGreaterThan(0);

    const stored = Buffer.from(
      (await stack.store.get(
        `orgs/${stack.tenant.organizationId}/samples/${sampleId}/deidentified/${file}`,
      ))!,
    );
    for (const text of barcodes) expect(stored.includes(Buffer.from(text))).toBe(false);

    // The pyramid's level 0 is OpenSlide's reading of the original, pixel for pixel: the
    // tiles were copied, not re-encoded, and the store is lossless.
    const he = await readPyramidLevel(prefixedStore(stack.store, slide!.he_prefix), 0);
    expect([he.width, he.height]).toEqual([expected.widthPx, expected.heightPx]);
    const reference = path.join(scratch, `${file}.rgb`);
    const seen = await runPythonJson<{ vendor: string; mpp: number }>(openslideLevel0, [
      original,
      reference,
      String(he.width),
      String(he.height),
    ]);
    expect(seen.vendor).toBe(expected.vendor);
    expect(seen.mpp).toBeCloseTo(detail.mpp, 6);
    expect(Buffer.from(he.data).equals(await readFile(reference))).toBe(true);
  }, 300_000);

  test('a one-marker prediction and a segmentation complete on it', async () => {
    const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: ['DAPI'] });
    expect(submitted.status).toBe(202);
    const segmentation = await call('POST', `/samples/${sampleId}/segmentation`);
    expect(segmentation.status).toBe(202);
    const jobId = submitted.json.jobId as string;
    await stack.client.workflow.getHandle(workflowIds.prediction(jobId)).result();
    await stack.client.workflow.getHandle(workflowIds.segmentation(sampleId, 1)).result();
    const job = (await call('GET', `/jobs/${jobId}`)).json;
    expect(job.status).toBe('completed');
    const state = (await call('GET', `/samples/${sampleId}/segmentation`)).json;
    expect(state.status).toBe('completed');
  }, 600_000);
});

describe('formats refused by name', () => {
  test.each([
    ['slide.mrxs', Buffer.from('[GENERAL]\r\nSLIDE_VERSION = 01.02\r\n'), 'MIRAX'],
    ['slide.vms', Buffer.from('[Virtual Microscope Specimen]\nNoLayers=1\n'), 'Hamamatsu VMS'],
    ['slide.svslide', Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(84)]), 'Sakura SVSLIDE'],
    // A VSI's own file is a small TIFF; its pixels are in the .ets files beside it.
    [
      'slide.vsi',
      Buffer.from(
        tinyTiff([
          { tag: 256, type: 3, values: [16] },
          { tag: 257, type: 3, values: [16] },
        ]),
      ),
      'Olympus VSI',
    ],
  ])('%s ends in preprocess_failed, naming the format and the conversion', async (filename, bytes, name) => {
    const upload = await uploadBytes(call, bytes, { filename });
    const result = await stack.client.workflow.getHandle(workflowIds.ingest(upload.id)).result();
    expect(result.status).toBe('preprocess_failed');
    expect(result.statusMessage).toContain(name);
    expect(result.statusMessage).toContain('OME-TIFF');
    expect(result.statusMessage).toContain('bioformats2raw');
    const detail = (await call('GET', `/samples/${upload.id}`)).json;
    expect(detail.status).toBe('preprocess_failed');
  });
});
