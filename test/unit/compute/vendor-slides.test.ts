import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { type DeidReport, deidentifyTiff } from '../../../compute/deid';
import { isComputeError } from '../../../compute/errors';
import { openTiffSlide, probeSlide, type SlideProbe } from '../../../compute/slide';
import { detectSlideFormat } from '../../../compute/slide/format';
import { bytesSource } from '../../../compute/source';
import { allIfds, openTiff, readTile, type TiffFile } from '../../../compute/tiff';
import { runPythonJson } from '../../support/python';
import { MemorySink, withSource, wsiDir } from './helpers';

/**
 * The three vendor layouts of ../shared/data/wsi/synthetic (Leica SCN, Ventana BIF, Philips
 * TIFF, made from CMU-1's tissue): probed, de-identified and read, each checked against
 * OpenSlide 4 (openslide-python with the openslide-bin library, in the test venv).
 */
const synthetic = path.join(wsiDir, 'synthetic');

interface VendorCase {
  file: string;
  vendor: SlideProbe['vendor'];
  levels: Array<[number, number]>;
  /** Original IFD -> IFD of the copy, for every image the copy keeps. */
  kept: Array<[number, number]>;
  dropped: Array<{ ifd: number; kind: string }>;
  /** What identifies the slide, its scan or the site, in the vendor metadata. */
  identifying: string[];
}

const barcode = [
  'CMU-1',
  Buffer.from('CMU-1').toString('base64'),
  Buffer.from('CMU-1').toString('base64').replace(/=+$/, ''),
];

const cases: VendorCase[] = [
  {
    file: 'CMU-1-Small-Region.leica.scn',
    vendor: 'leica',
    levels: [
      [2208, 2960],
      [552, 740],
      [138, 185],
    ],
    kept: [
      [2, 0],
      [3, 1],
      [4, 2],
    ],
    dropped: [
      { ifd: 0, kind: 'macro' },
      { ifd: 1, kind: 'other' },
    ],
    identifying: [
      ...barcode,
      '7d3b8a1e',
      'uuid',
      'creationDate',
      '2009-12-29',
      'Macro',
      'device',
      '<barcode',
    ],
  },
  {
    file: 'CMU-1-Small-Region.ventana.bif',
    vendor: 'ventana',
    levels: [
      [2040, 3056],
      [1020, 1528],
      [510, 764],
    ],
    kept: [
      [1, 0],
      [2, 1],
      [3, 2],
      [4, 3],
    ],
    dropped: [{ ifd: 0, kind: 'macro' }],
    // iScan's SlideAnnotation holds the barcode as plain text.
    identifying: [
      'CMU-1',
      'SlideAnnotation',
      'UserName',
      'UnitNumber',
      'BI10N0001',
      'BuildDate',
      'CalibrationImage',
      'Label Image',
    ],
  },
  {
    file: 'CMU-1-Small-Region.philips.tiff',
    vendor: 'philips',
    levels: [
      [2048, 2560],
      [1024, 1280],
      [512, 640],
      [256, 320],
    ],
    kept: [
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
    ],
    dropped: [
      { ifd: 4, kind: 'label' },
      { ifd: 5, kind: 'macro' },
    ],
    identifying: [
      ...barcode,
      'PIM_DP_UFS_BARCODE',
      'FMT-TEST-0001',
      'DICOM_DEVICE_SERIAL_NUMBER',
      '20091229',
      'DICOM_ACQUISITION_DATETIME',
      'PIM_DP_SOURCE_FILE',
      '%FILENAME%',
      'sourceFilename',
      'LABELIMAGE',
      'MACROIMAGE',
    ],
  },
];

interface OpenSlideView {
  vendor: string;
  properties: Record<string, string>;
  levelDimensions: Array<[number, number]>;
  associated: string[];
  /** Raw RGB file of each requested level, read where the main image lies on that level. */
  regions: string[];
}

/**
 * What OpenSlide sees of `file`; with `levels`, each level's region of that size at the main
 * image's origin, which is (0, 0) but for SCN, whose levels span the whole slide: there it is
 * the `openslide.bounds-*` origin, mapped to each level the way OpenSlide maps level-0
 * coordinates (truncating division by the level's downsample).
 */
const openslideScript = `
import json, math, sys, numpy as np, openslide
path, out, levels = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s = openslide.OpenSlide(path)
p = s.properties
bx, by = int(p.get('openslide.bounds-x', 0)), int(p.get('openslide.bounds-y', 0))
regions = []
for k, (w, h) in enumerate(levels):
    ds = s.level_downsamples[k]
    def origin(b):
        target = int(b / ds)
        x = math.floor(target * ds)
        while int(x / ds) < target: x += 1
        return x
    rgb = np.asarray(s.read_region((origin(bx), origin(by)), k, (w, h)).convert('RGB'))
    name = f'{out}/openslide-{k}.rgb'
    rgb.tofile(name)
    regions.append(name)
print(json.dumps({'vendor': p.get('openslide.vendor'), 'properties': dict(p),
                  'levelDimensions': list(s.level_dimensions), 'associated': sorted(s.associated_images),
                  'regions': regions}))
`;

function openslideView(
  file: string,
  out: string,
  levels: Array<[number, number]> = [],
): Promise<OpenSlideView> {
  return runPythonJson<OpenSlideView>(openslideScript, [file, out, JSON.stringify(levels)]);
}

interface Copy {
  original: TiffFile;
  originalBytes: Buffer;
  copy: TiffFile;
  bytes: Buffer;
  report: DeidReport;
}

async function deidentify(file: string): Promise<Copy> {
  return withSource(file, async (source) => {
    const sink = new MemorySink();
    const report = await deidentifyTiff(source, sink);
    const bytes = sink.bytes();
    const originalBytes = Buffer.from(await source.read(0, source.size));
    return {
      original: await openTiff(bytesSource(originalBytes)),
      originalBytes,
      copy: await openTiff(bytesSource(bytes)),
      bytes,
      report,
    };
  });
}

describe.each(cases)('$file', (vendorCase) => {
  const file = path.join(synthetic, vendorCase.file);
  let dir: string;
  let copy: Copy;
  let copyFile: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'sps-vendor-'));
    copy = await deidentify(file);
    copyFile = path.join(dir, `deidentified-${vendorCase.file}`);
    await writeFile(copyFile, copy.bytes);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('the probe finds the main image, its levels and its scale where OpenSlide does', async () => {
    const probe = await withSource(file, (source) => probeSlide(source));
    const reference = await openslideView(file, dir);
    expect(reference.vendor).toBe(vendorCase.vendor);
    expect(probe.vendor).toBe(vendorCase.vendor);
    expect(probe.levels.map((level) => [level.widthPx, level.heightPx])).toEqual(vendorCase.levels);
    expect(probe.mpp!.x).toBeCloseTo(Number(reference.properties['openslide.mpp-x']), 6);
    expect(probe.mpp!.y).toBeCloseTo(Number(reference.properties['openslide.mpp-y']), 6);
    expect(probe.effectiveMpp).toBeCloseTo(0.499, 6);
    expect(probe.metadata['openslide.objective-power']).toBe(
      reference.properties['openslide.objective-power'],
    );
    if (vendorCase.vendor === 'leica') {
      // SCN levels span the whole slide in OpenSlide; the sample is the main image, placed at the bounds.
      for (const key of ['x', 'y', 'width', 'height']) {
        expect(probe.metadata[`openslide.bounds-${key}`]).toBe(
          reference.properties[`openslide.bounds-${key}`],
        );
      }
      expect([probe.widthPx, probe.heightPx]).toEqual([
        Number(reference.properties['openslide.bounds-width']),
        Number(reference.properties['openslide.bounds-height']),
      ]);
    } else {
      expect(probe.levels.map((level) => [level.widthPx, level.heightPx])).toEqual(reference.levelDimensions);
    }
  });

  test('de-identification drops the label and macro, scrubs the vendor metadata and copies tiles byte for byte', async () => {
    expect(copy.report.droppedImages.map(({ ifd, kind }) => ({ ifd: ifd[0], kind }))).toEqual(
      vendorCase.dropped,
    );
    for (const [from, to] of vendorCase.kept) {
      const a = copy.original.ifds[from]!;
      const b = copy.copy.ifds[to]!;
      expect([b.width, b.height, b.tileCount]).toEqual([a.width, a.height, a.tileCount]);
      for (let i = 0; i < a.tileCount; i++) {
        const [x, y] = await Promise.all([readTile(a, i), readTile(b, i)]);
        if (!Buffer.from(x).equals(Buffer.from(y))) throw new Error(`tile ${i} of IFD ${from} differs`);
      }
    }
    expect(allIfds(copy.copy)).toHaveLength(vendorCase.kept.length);
  });

  test('no label or macro pixel, barcode or identifying field survives anywhere in the stored bytes', async () => {
    for (const text of vendorCase.identifying) {
      if (copy.bytes.includes(Buffer.from(text)))
        throw new Error(`the copy still holds ${JSON.stringify(text)}`);
      // The check can fail: the original holds every one of them.
      expect(copy.originalBytes.includes(Buffer.from(text))).toBe(true);
    }
    for (const { ifd } of vendorCase.dropped) {
      const image = copy.original.ifds[ifd]!;
      for (let i = 0; i < image.tileCount; i++) {
        const data = Buffer.from(await readTile(image, i));
        // Compressed pixel data past the JPEG headers, in 64-byte windows: none may be in the copy.
        for (let at = Math.min(1024, data.length >> 1); at + 64 <= data.length; at += 4096) {
          if (copy.bytes.includes(data.subarray(at, at + 64))) {
            throw new Error(`bytes of IFD ${ifd} (${image.width} x ${image.height}) survive in the copy`);
          }
        }
      }
    }
  });

  test('the copy reads as the same slide, and OpenSlide opens it without label or macro', async () => {
    const probe = await probeSlide(bytesSource(copy.bytes));
    expect(probe.vendor).toBe(vendorCase.vendor);
    expect(probe.levels.map((level) => [level.widthPx, level.heightPx])).toEqual(vendorCase.levels);
    expect(probe.effectiveMpp).toBeCloseTo(0.499, 6);
    const reference = await openslideView(copyFile, dir);
    expect(reference.vendor).toBe(vendorCase.vendor);
    expect(reference.associated.filter((name) => name !== 'thumbnail')).toEqual([]);
    expect(Number(reference.properties['openslide.mpp-x'])).toBeCloseTo(0.499, 6);
  });

  test("every level of the copy is OpenSlide's read_region of the original, pixel for pixel", async () => {
    const slide = await openTiffSlide(bytesSource(copy.bytes));
    const reference = await openslideView(file, dir, vendorCase.levels);
    for (const [level, [width, height]] of vendorCase.levels.entries()) {
      const ours = await slide.readRegion({ level, x: 0, y: 0, width, height });
      const theirs = await readFile(reference.regions[level]!);
      let differing = 0;
      for (let i = 0; i < theirs.length; i++) if (ours.data[i] !== theirs[i]) differing++;
      expect({ level, differing }).toEqual({ level, differing: 0 });
    }
  });
});

describe('formats refused by name', () => {
  const refusal = (bytes: Uint8Array, filename?: string) =>
    detectSlideFormat(bytesSource(bytes), undefined, filename).then(
      () => 'read',
      (err: unknown) => (isComputeError(err, 'UnsupportedFormat') ? err.message : String(err)),
    );

  test('by signature whatever the name, by extension whatever the bytes', async () => {
    const tiffHeader = new Uint8Array([0x49, 0x49, 42, 0, 8, 0, 0, 0]);
    expect(await refusal(Buffer.from('\xEF\xBB\xBF[GENERAL]\r\n', 'latin1'), 'upload.bin')).toContain(
      'MIRAX',
    );
    expect(await refusal(Buffer.from('[Virtual Microscope Specimen]\n'))).toContain('Hamamatsu VMS');
    expect(await refusal(Buffer.from('SQLite format 3\0'))).toContain('Sakura SVSLIDE');
    const vsi = await refusal(tiffHeader, 'Scan 12.VSI');
    expect(vsi).toContain('Olympus VSI');
    expect(vsi).toContain('OME-TIFF');
    expect(vsi).toContain('raw2ometiff');
    expect(await refusal(tiffHeader, 'slide.tif')).toBe('read');
  });
});
