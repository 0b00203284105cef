import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { type DeidReport, deidentifyTiff } from '../../../compute/deid';
import { isComputeError } from '../../../compute/errors';
import { parseAperioDescription, probeSlide } from '../../../compute/slide';
import { bytesSource } from '../../../compute/source';
import { allIfds, FieldType, openTiff, readTile, Tag, type TiffFile } from '../../../compute/tiff';
import { runPython } from '../../support/python';
import { fixtureDir, MemorySink, tinyTiff, withSource, wsiDir } from './helpers';

interface Copy {
  original: TiffFile;
  originalBytes: Buffer;
  copy: TiffFile;
  bytes: Buffer;
  report: DeidReport;
}

/** De-identifies a file into memory and parses both sides; the original stays open for the test. */
async function deidentify(file: string, options: { bigTiff?: boolean } = {}): Promise<Copy> {
  return withSource(file, async (source) => {
    const sink = new MemorySink();
    const report = await deidentifyTiff(source, sink, options);
    const bytes = sink.bytes();
    const originalBytes = Buffer.from(await source.read(0, source.size));
    const original = await openTiff(bytesSource(originalBytes));
    return { original, originalBytes, copy: await openTiff(bytesSource(bytes)), bytes, report };
  });
}

/** Every tile of `levels` (original IFD index -> copy IFD index) has the same bytes in both files. */
async function expectSameTiles(copy: Copy, pairs: Array<[string, string]>): Promise<void> {
  const byPath = (tiff: TiffFile, p: string) => allIfds(tiff).find((ifd) => ifd.path.join('/') === p)!;
  for (const [from, to] of pairs) {
    const a = byPath(copy.original, from);
    const b = byPath(copy.copy, to);
    expect([b.width, b.height, b.tileCount, b.compression]).toEqual([
      a.width,
      a.height,
      a.tileCount,
      a.compression,
    ]);
    for (let i = 0; i < a.tileCount; i++) {
      const [x, y] = await Promise.all([readTile(a, i), readTile(b, i)]);
      if (!Buffer.from(x).equals(Buffer.from(y))) throw new Error(`tile ${i} of IFD ${from} differs`);
    }
  }
}

const slide = (name: string) => path.join(wsiDir, name);

describe('deidentifyTiff: CMU-1-Small-Region.svs', () => {
  let copy: Copy;
  beforeAll(async () => {
    copy = await deidentify(slide('CMU-1-Small-Region.svs'));
  });

  test('no identifying value of the original description survives anywhere in the bytes', () => {
    const description = copy.original.ifds[0]!.description!;
    const identifying = ['Filename', 'Date', 'Time', 'User', 'ScanScope ID', 'ImageID'];
    const values = parseAperioDescription(description)
      .properties.filter(({ key }) => identifying.includes(key))
      .map(({ value }) => value);
    expect(values).toEqual([
      'CPAPERIOCS',
      'CMU-1',
      '12/29/09',
      '09:59:15',
      'b414003d-95c6-48b0-9369-8010ed517ba7',
      '1004486',
    ]);
    for (const value of values) {
      expect(copy.originalBytes.includes(value)).toBe(true);
      expect(copy.bytes.includes(value)).toBe(false);
    }
    expect(copy.report.scrubbed).toEqual(
      expect.arrayContaining(['aperio.Filename', 'aperio.User', 'aperio.Date']),
    );
  });

  test('the description keeps the Aperio header and the scale keys', () => {
    const description = copy.copy.ifds[0]!.description!;
    expect(description.startsWith('Aperio Image Library')).toBe(true);
    const keys = parseAperioDescription(description).properties.map(({ key }) => key);
    expect(keys).toEqual(expect.arrayContaining(['AppMag', 'MPP']));
    expect(keys).not.toEqual(expect.arrayContaining(['Filename']));
  });

  test('label and macro are gone; level and thumbnail stay', async () => {
    expect(copy.copy.ifds.map((ifd) => [ifd.width, ifd.height])).toEqual([
      [2220, 2967],
      [574, 768],
    ]);
    expect(copy.report.droppedImages.map((d) => d.kind)).toEqual(['label', 'macro']);
    const probe = await probeSlide(bytesSource(copy.bytes));
    expect(probe.associated).toEqual({ thumbnail: [1] });
    expect(probe.effectiveMpp).toBe(0.499);
    expect(probe.vendor).toBe('aperio');
  });

  test('every level-0 tile and thumbnail strip is byte-identical', async () => {
    await expectSameTiles(copy, [
      ['0', '0'],
      ['1', '1'],
    ]);
    expect(copy.copy.ifds[0]!.jpegTables).toEqual(copy.original.ifds[0]!.jpegTables);
  });

  const openslide = '/usr/bin/openslide-show-properties';
  // OpenSlide (Debian openslide-tools) is a required test tool: .ci/run installs it.
  test('OpenSlide opens the copy as Aperio with its MPP', async () => {
    expect(existsSync(openslide)).toBe(true);
    const dir = await mkdtemp(path.join(tmpdir(), 'deid-'));
    try {
      const file = path.join(dir, 'copy.svs');
      await writeFile(file, copy.bytes);
      const properties = execFileSync(openslide, [file], { encoding: 'utf8' });
      expect(properties).toContain("openslide.vendor: 'aperio'");
      expect(properties).toContain("openslide.mpp-x: '0.499'");
      expect(properties).toContain("openslide.mpp-y: '0.499'");
      expect(properties).not.toContain('CMU-1');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('deidentifyTiff: other slides re-parse with identical tiles', () => {
  test('JPEG 2000 SVS', async () => {
    const copy = await deidentify(slide('tcga-cr-7395-01a-01-ts1.svs'));
    await expectSameTiles(copy, [
      ['0', '0'],
      ['1', '1'],
      ['2', '2'],
    ]);
    const probe = await probeSlide(bytesSource(copy.bytes));
    expect(probe).toMatchObject({ vendor: 'aperio', mpp: null, associated: { thumbnail: [1] } });
    expect(probe.levels).toHaveLength(2);
  });

  test('generic pyramidal TIFF', async () => {
    const copy = await deidentify(slide('BRACS_1640_N_3_cropped.tiff'));
    await expectSameTiles(copy, [
      ['0', '0'],
      ['1', '1'],
      ['2', '2'],
    ]);
    expect(copy.report.droppedImages).toEqual([]);
  });

  test('big-endian OME-TIFF stays big-endian; OME-XML loses file names and keeps the scale', async () => {
    const copy = await deidentify(slide('OS-1-detail.ome.tif'));
    expect(copy.copy.littleEndian).toBe(false);
    await expectSameTiles(copy, [['0', '0']]);
    expect(copy.copy.ifds[0]!.has(Tag.Software)).toBe(false);
    expect(copy.bytes.includes('FileName=')).toBe(false);
    const probe = await probeSlide(bytesSource(copy.bytes));
    expect(probe.effectiveMpp).toBeCloseTo(0.2271, 4);
  });

  test('SubIFD pyramid keeps its SubIFDs', async () => {
    const copy = await deidentify(slide('CMU-1-Small-Region.derived-pyramid.ome.tif'));
    await expectSameTiles(copy, [
      ['0', '0'],
      ['0/0', '0/0'],
      ['0/1', '0/1'],
      ['0/2', '0/2'],
      ['0/3', '0/3'],
    ]);
  });

  test('NDPI: macro, map, serial number, property map and dates are dropped', async () => {
    const copy = await deidentify(slide('test3-TRITC-2-560.ndpi'));
    await expectSameTiles(copy, [
      ['0', '0'],
      ['3', '3'],
    ]);
    expect(copy.report.droppedImages.map((d) => d.kind)).toEqual(['macro', 'other']);
    expect(copy.report.droppedTags).toEqual(
      expect.arrayContaining(['NdpiScannerSerial', 'NdpiPropertyMap', 'DateTime', 'Software']),
    );
    expect(copy.originalBytes.includes('950291')).toBe(true);
    expect(copy.bytes.includes('950291')).toBe(false);
    expect((await probeSlide(bytesSource(copy.bytes))).effectiveMpp).toBeCloseTo(0.22818, 5);
  });

  test('libtiff big-endian strips', async () => {
    const copy = await deidentify(path.join(fixtureDir, 'bracs-l2.strips-be.tif'));
    await expectSameTiles(copy, [['0', '0']]);
  });

  test('BigTIFF on request (chosen anyway past 4 GiB), re-read as BigTIFF', async () => {
    const copy = await deidentify(slide('CMU-1-Small-Region.svs'), { bigTiff: true });
    expect(copy.report.bigTiff).toBe(true);
    expect(copy.copy.bigTiff).toBe(true);
    await expectSameTiles(copy, [
      ['0', '0'],
      ['1', '1'],
    ]);
  });

  test('a BigTIFF input stays BigTIFF', async () => {
    const copy = await deidentify(path.join(fixtureDir, 'bracs-l2.bigtiff-be.tif'));
    expect([copy.copy.bigTiff, copy.copy.littleEndian]).toEqual([true, false]);
    await expectSameTiles(copy, [['0', '0']]);
  });
});

describe('deidentifyTiff: every identifying key and tag the issue names', () => {
  const markers = {
    description: [
      'Title = Secret-Title-7',
      'Barcode = BC-998877',
      'DSR ID = dsr-host-31',
      'Time Zone = GMT+0100',
      'Filename = patient-jones',
      'Date = 01/02/24',
      'Time = 03:04:05',
      'User = 5c1e-user-uuid',
      'ScanScope ID = SS-9999',
    ],
    tags: [
      'Artist-Dr-Who',
      'HostComputer-pc-42',
      'Copyright-ACME-Path',
      'DocumentName-Case-77',
      'XMP-creator-jane',
      'Software-Scanner-9.1',
      '2024:01:02 03:04:05',
    ],
  };

  test('a slide carrying all of them keeps none, and keeps its scale', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sps-deid-tags-'));
    try {
      const file = path.join(dir, 'identifying.svs');
      const description = `Aperio Image Library v12.0.15\r\n64x64 [0,0 64x64] (16x16) RAW|AppMag = 20|MPP = 0.5|${markers.description.join('|')}`;
      await runPython(
        `
import sys, numpy as np, tifffile
xmp = b'<x:xmpmeta><dc:creator>XMP-creator-jane</dc:creator></x:xmpmeta>'
tifffile.imwrite(sys.argv[1], np.full((64, 64, 3), 200, np.uint8), tile=(16, 16), photometric='rgb',
  description=sys.argv[2], metadata=None, software='Software-Scanner-9.1', datetime='2024:01:02 03:04:05',
  extratags=[(315, 's', 0, 'Artist-Dr-Who', True), (316, 's', 0, 'HostComputer-pc-42', True),
             (33432, 's', 0, 'Copyright-ACME-Path', True), (269, 's', 0, 'DocumentName-Case-77', True),
             (700, 'B', len(xmp), xmp, True)])
`,
        [file, description],
      );
      const original = await readFile(file);
      const { bytes } = await deidentify(file);
      for (const marker of [...markers.description, ...markers.tags]) {
        expect({ marker, inOriginal: original.includes(marker.split(' = ').at(-1)!) }).toEqual({
          marker,
          inOriginal: true,
        });
        expect({ marker, inCopy: bytes.includes(marker.split(' = ').at(-1)!) }).toEqual({
          marker,
          inCopy: false,
        });
      }
      const kept = parseAperioDescription((await openTiff(bytesSource(bytes))).ifds[0]!.description ?? '');
      expect(kept.properties).toEqual(
        expect.arrayContaining([
          { key: 'MPP', value: '0.5' },
          { key: 'AppMag', value: '20' },
        ]),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('deidentifyTiff failures', () => {
  /** The copy fails its sink with the same error, so an upload reading from it fails too. */
  const errorsOf = (sink: MemorySink) => {
    const errors: unknown[] = [];
    sink.on('error', (err) => errors.push(err));
    return errors;
  };

  test('tile offsets past the end fail before anything is written, and the sink is destroyed', async () => {
    const bytes = tinyTiff([
      { tag: Tag.ImageWidth, type: FieldType.LONG, values: [16] },
      { tag: Tag.ImageLength, type: FieldType.LONG, values: [16] },
      { tag: Tag.StripOffsets, type: FieldType.LONG, values: [8] },
      { tag: Tag.StripByteCounts, type: FieldType.LONG, values: [768] },
    ]);
    const sink = new MemorySink();
    const sinkErrors = errorsOf(sink);
    const error = await deidentifyTiff(bytesSource(bytes), sink).catch((err: unknown) => err);
    expect(isComputeError(error, 'MalformedTiff')).toBe(true);
    expect(sink.destroyed).toBe(true);
    await new Promise(setImmediate);
    expect(sinkErrors).toEqual([error]);
    expect(sink.bytes()).toHaveLength(0);
  });

  test('an aborted copy rejects and destroys the sink', async () => {
    await withSource(slide('CMU-1-Small-Region.svs'), async (source) => {
      const sink = new MemorySink();
      const sinkErrors = errorsOf(sink);
      const controller = new AbortController();
      controller.abort();
      await expect(deidentifyTiff(source, sink, { signal: controller.signal })).rejects.toThrow();
      expect(sink.destroyed).toBe(true);
      await new Promise(setImmediate);
      expect(sinkErrors).toHaveLength(1);
    });
  });
});
