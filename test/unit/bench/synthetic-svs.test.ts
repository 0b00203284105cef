import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { type SyntheticSvsReport, writeSyntheticSvs } from '../../../bench/synthetic-svs';
import { decodeJpeg } from '../../../compute/decode/jpeg';
import { probeSlide } from '../../../compute/slide';
import { openTiff, readTile, type TiffFile } from '../../../compute/tiff';
import { withSource, wsiDir } from '../compute/helpers';

const cmu = path.join(wsiDir, 'CMU-1-Small-Region.svs');

/** OpenSlide's rendering of the top-left `width x height` pixels of a level, as RGB. */
async function openslideRegion(file: string, level: number, width: number, height: number): Promise<Buffer> {
  const png = path.join(path.dirname(file), `level-${level}.png`);
  execFileSync('/usr/bin/openslide-write-png', [
    file,
    '0',
    '0',
    String(level),
    String(width),
    String(height),
    png,
  ]);
  return sharp(png).removeAlpha().raw().toBuffer();
}

function meanAbsoluteDifference(a: Uint8Array, b: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs((a[i] ?? 0) - (b[i] ?? 0));
  return sum / a.length;
}

describe('writeSyntheticSvs: 2600 x 3000 from CMU-1-Small-Region (past one repeat on each axis)', () => {
  let dir: string;
  let file: string;
  let report: SyntheticSvsReport;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'synthetic-svs-'));
    file = path.join(dir, 'synthetic.svs');
    report = await writeSyntheticSvs({ source: cmu, out: file, width: 2600, height: 3000 });
  });

  afterAll(() => rm(dir, { recursive: true, force: true }));

  test('report: classic TIFF, three levels at downsamples 1, 4 and 16', () => {
    expect(report.bigTiff).toBe(false);
    expect(report.levels).toEqual([
      { widthPx: 2600, heightPx: 3000, tiles: 11 * 13 },
      { widthPx: 650, heightPx: 750, tiles: 3 * 4 },
      { widthPx: 163, heightPx: 188, tiles: 1 },
    ]);
  });

  test('our parser: JPEG tiles of 240, level 0 byte for byte the source tiles repeated 9 x 12, with its tables', async () => {
    await withSource(file, async (out) => {
      await withSource(cmu, async (src) => {
        const [copy, original] = await Promise.all([openTiff(out), openTiff(src)]);
        expect(copy.littleEndian).toBe(true);
        expect(out.size).toBe(report.bytesWritten);
        expect(
          copy.ifds.map((i) => [i.width, i.height, i.tileWidth, i.tileHeight, i.compression, i.photometric]),
        ).toEqual([
          [2600, 3000, 240, 240, 7, 2],
          [650, 750, 240, 240, 7, 6],
          [163, 188, 240, 240, 7, 6],
        ]);
        const [level0, source] = [copy.ifds[0]!, original.ifds[0]!];
        expect(level0.description).toMatch(
          /^Aperio Image Library .*\r\n2600x3000 .*\|AppMag = 20\|MPP = 0\.499$/s,
        );
        expect(Buffer.from(level0.jpegTables!).equals(Buffer.from(source.jpegTables!))).toBe(true);
        // Output tile (col, row) is source tile (col mod 9, row mod 12): the source's full tiles.
        for (const [col, row] of [
          [0, 0],
          [8, 11],
          [9, 0],
          [10, 12],
        ] as const) {
          const written = await readTile(level0, row * 11 + col);
          const expected = await readTile(source, (row % 12) * source.tilesAcross + (col % 9));
          expect(Buffer.from(written).equals(Buffer.from(expected))).toBe(true);
        }
        await expectLowerTilesDecode(copy);
      });
    });
  });

  test('our probe: Aperio, 0.499 µm, three levels', async () => {
    const probe = await withSource(file, (source) => probeSlide(source));
    expect(probe).toMatchObject({ vendor: 'aperio', widthPx: 2600, heightPx: 3000, effectiveMpp: 0.499 });
    expect(probe.levels.map((l) => [l.widthPx, l.heightPx])).toEqual([
      [2600, 3000],
      [650, 750],
      [163, 188],
    ]);
  });

  test('OpenSlide: dimensions, mpp, and every level shows the same picture', async () => {
    const properties = execFileSync('/usr/bin/openslide-show-properties', [file], { encoding: 'utf8' });
    expect(properties).toContain("openslide.vendor: 'aperio'");
    expect(properties).toContain("openslide.level-count: '3'");
    expect(properties).toContain("openslide.level[0].width: '2600'");
    expect(properties).toContain("openslide.level[0].height: '3000'");
    expect(properties).toContain("openslide.level[1].downsample: '4'");
    expect(properties).toContain("openslide.mpp-x: '0.499'");
    expect(properties).toContain("openslide.mpp-y: '0.499'");
    // Past the first repeat on each axis (2160 x 2880), so the seams are compared too.
    const level0 = await openslideRegion(file, 0, 2400, 2960);
    const level1 = await openslideRegion(file, 1, 600, 740);
    const shrunk = await sharp(level0, { raw: { width: 2400, height: 2960, channels: 3 } })
      .resize(600, 740)
      .raw()
      .toBuffer();
    // Measured 3.6: resampling and JPEG differences only; wrong colours or tiles would be tens.
    expect(meanAbsoluteDifference(shrunk, level1)).toBeLessThan(8);
  });

  test('rejects a lower level that is not an exact downscale of the repeated block, and an empty slide', async () => {
    const out = path.join(dir, 'rejected.svs');
    await expect(
      writeSyntheticSvs({ source: cmu, out, width: 500, height: 500, lowerLevels: [7] }),
    ).rejects.toThrow(RangeError);
    await expect(writeSyntheticSvs({ source: cmu, out, width: 0, height: 500 })).rejects.toThrow(RangeError);
  });
});

/** The lower levels' tiles are standalone YCbCr JPEGs: they decode without tables or a colour override. */
async function expectLowerTilesDecode(tiff: TiffFile): Promise<void> {
  for (const ifd of tiff.ifds.slice(1)) {
    const rgb = await decodeJpeg(await readTile(ifd, 0), { colorSpace: 'auto' });
    expect([rgb.width, rgb.height]).toEqual([240, 240]);
  }
}
