import { createClassicalSegmenter } from '../../../../compute/segmentation/classical';
import { segmentationQuality } from '../../../../compute/segmentation/quality';
import { stainDensities } from '../../../../compute/segmentation/stain';
import type { LabelImage } from '../../../../compute/segmentation/types';
import { monusegTiles, readAnnotatedTile } from './monuseg';

/** Labels used, out of 1..count, and labels beyond count: contiguous means `count` and 0. */
function labelUse(image: LabelImage): { used: number; beyond: number } {
  const seen = new Uint8Array(image.count + 1);
  let beyond = 0;
  for (const l of image.labels) {
    if (l > image.count) beyond++;
    else seen[l] = 1;
  }
  let used = 0;
  for (let l = 1; l <= image.count; l++) used += seen[l]!;
  return { used, beyond };
}

/** Nucleus pixels whose cell label differs from their nucleus label. */
function nucleiOutsideTheirCells(nuclei: LabelImage, cells: LabelImage): number {
  let wrong = 0;
  for (let i = 0; i < nuclei.labels.length; i++)
    if (nuclei.labels[i] !== 0 && cells.labels[i] !== nuclei.labels[i]) wrong++;
  return wrong;
}

function referenceCount(reference: Uint16Array): number {
  return new Set(reference).size - (reference.includes(0) ? 1 : 0);
}

describe('the classical segmenter', () => {
  const segmenter = createClassicalSegmenter();

  it.each(monusegTiles)('finds the nuclei of a crop of $name', async ({ name, mpp }) => {
    const { image, reference } = await readAnnotatedTile(name, {
      left: 300,
      top: 300,
      width: 320,
      height: 280,
    });
    const { nuclei, cells } = await segmenter.segment(image, mpp);
    expect([nuclei.width, nuclei.height]).toEqual([320, 280]);
    // Per-pixel expect() would take seconds; count the failures instead.
    expect(labelUse(nuclei)).toEqual({ used: nuclei.count, beyond: 0 });
    expect(labelUse(cells)).toEqual({ used: cells.count, beyond: 0 });
    expect(cells.count).toBe(nuclei.count);
    expect(nucleiOutsideTheirCells(nuclei, cells)).toBe(0);
    const expected = referenceCount(reference);
    expect(nuclei.count).toBeGreaterThan(0.6 * expected);
    expect(nuclei.count).toBeLessThan(1.4 * expected);
    // Well below the whole-tile figures (bench/segmentation-quality.ts), above what a broken step gives.
    expect(segmentationQuality(reference, nuclei.labels).f1).toBeGreaterThan(0.55);
  });

  it('finds nothing on glass or on even pink stroma', async () => {
    const size = 64;
    for (const rgb of [
      [245, 245, 245],
      [230, 160, 200],
    ]) {
      const data = new Uint8Array(size * size * 3);
      for (let i = 0; i < data.length; i++) data[i] = rgb[i % 3]!;
      const { nuclei } = await segmenter.segment({ data, width: size, height: size }, 0.25);
      expect(nuclei.count).toBe(0);
    }
  });

  it('states its name, version and every parameter, and rejects a bad scale', async () => {
    const custom = createClassicalSegmenter({ minAreaUm2: 9 });
    expect(custom.name).toBe('classical-watershed');
    expect(custom.parameters.minAreaUm2).toBe(9);
    expect(custom.parameters.smoothingUm).toBeGreaterThan(0);
    const tile = { data: new Uint8Array(3), width: 1, height: 1 };
    await expect(custom.segment(tile, 0)).rejects.toThrow(RangeError);
  });
});

describe('stain densities', () => {
  it('unmixes pure hematoxylin and pure eosin into their own channels', () => {
    // Pixels of density 1 of one stain: I = 256 * 10^-od - 1 per channel (stain.ts convention).
    const pixel = (od: readonly number[]) => od.map((v) => Math.round(256 * 10 ** -v - 1));
    const hematoxylin = [0.644211, 0.716556, 0.266844];
    const eosin = [0.092789, 0.954111, 0.283111];
    const unit = (v: number[]) => v.map((x) => x / Math.hypot(...v));
    const data = Uint8Array.from([...pixel(unit(hematoxylin)), ...pixel(unit(eosin)), 255, 255, 255]);
    const d = stainDensities({ data, width: 3, height: 1 });
    expect(d.hematoxylin[0]).toBeCloseTo(1, 1);
    expect(Math.abs(d.eosin[0]!)).toBeLessThan(0.05);
    expect(d.eosin[1]).toBeCloseTo(1, 1);
    expect(Math.abs(d.hematoxylin[1]!)).toBeLessThan(0.05);
    expect(d.hematoxylin[2]).toBe(0);
    expect(d.eosin[2]).toBe(0);
  });
});
