import { createClassicalSegmenter, estimateSlideStain } from '../../../../compute/segmentation/classical';
import { writeLabelMask } from '../../../../compute/segmentation/mask';
import {
  decodeTileObjects,
  dropDuplicateObjects,
  earlierNeighbours,
  encodeTileObjects,
  labelOffsets,
  segmentTileObjects,
  type TileObjects,
} from '../../../../compute/segmentation/objects';
import { DEFAULT_HALO_UM, haloPixels, planSegmentationTiles } from '../../../../compute/segmentation/tiles';
import type { LabelImage } from '../../../../compute/segmentation/types';
import { memoryStore, openArray } from '../../../../compute/zarr';
import { memorySlide } from './helpers';
import { monusegTiles, readAnnotatedTile } from './monuseg';

/**
 * Stitching on real tissue with the real segmenter: the central 600 x 600 px of a MoNuSeg tile
 * (1000 x 1000 at 0.25 µm) cut into 200 px cores, so about one nucleus in three crosses a core
 * border (over 200 nuclei, 70 crossing). The stitched mask must hold every object once and
 * whole, as the segmenter sees it in one piece.
 */
const { name, mpp } = monusegTiles[0];
const coreSize = 200;
/** 3 x 3 cores: the middle one borders another core on every side. */
const crop = { left: 200, top: 200, width: 600, height: 600 };

interface Region {
  area: number;
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
  sumX: number;
  sumY: number;
}

function regions(labels: Uint32Array, width: number): Map<number, Region> {
  const out = new Map<number, Region>();
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i]!;
    if (label === 0) continue;
    const x = i % width;
    const y = Math.floor(i / width);
    const r = out.get(label);
    if (!r) out.set(label, { area: 1, minX: x, minY: y, maxX: x, maxY: y, sumX: x, sumY: y });
    else {
      r.area++;
      r.sumX += x;
      r.sumY += y;
      r.minX = Math.min(r.minX, x);
      r.maxX = Math.max(r.maxX, x);
      r.minY = Math.min(r.minY, y);
      r.maxY = Math.max(r.maxY, y);
    }
  }
  return out;
}

/** Connected pieces (8-connected) of each label. */
function piecesPerLabel(labels: Uint32Array, width: number, height: number): Map<number, number> {
  const seen = new Uint8Array(labels.length);
  const pieces = new Map<number, number>();
  const stack: number[] = [];
  for (let start = 0; start < labels.length; start++) {
    const label = labels[start]!;
    if (label === 0 || seen[start]) continue;
    pieces.set(label, (pieces.get(label) ?? 0) + 1);
    seen[start] = 1;
    stack.push(start);
    while (stack.length > 0) {
      const i = stack.pop()!;
      const x = i % width;
      const y = (i - x) / width;
      for (let dy = -1; dy <= 1; dy++) {
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          const ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
          const j = ny * width + nx;
          if (!seen[j] && labels[j] === label) {
            seen[j] = 1;
            stack.push(j);
          }
        }
      }
    }
  }
  return pieces;
}

/** Per stitched label, the whole-image label it overlaps most and their IoU. */
function bestMatches(
  stitched: Uint32Array,
  whole: LabelImage,
  ours: Map<number, Region>,
  theirs: Map<number, Region>,
): Map<number, { label: number; iou: number }> {
  const overlap = new Map<number, Map<number, number>>();
  for (let i = 0; i < stitched.length; i++) {
    const a = stitched[i]!;
    const b = whole.labels[i]!;
    if (a === 0 || b === 0) continue;
    let row = overlap.get(a);
    if (!row) {
      row = new Map();
      overlap.set(a, row);
    }
    row.set(b, (row.get(b) ?? 0) + 1);
  }
  const out = new Map<number, { label: number; iou: number }>();
  for (const [a, row] of overlap) {
    let best = { label: 0, iou: 0 };
    for (const [b, n] of row) {
      const iou = n / (ours.get(a)!.area + theirs.get(b)!.area - n);
      if (iou > best.iou) best = { label: b, iou };
    }
    out.set(a, best);
  }
  return out;
}

describe('stitching real tissue', () => {
  // The default segmenter estimates its stains and Otsu cut per window, so a window and the
  // whole image can disagree on faint nuclei whatever the stitching does. With the stains and
  // cut pinned to the whole image's (as a slide's run pins them), any remaining difference between the stitched mask and the whole image is the
  // stitcher's (or the halo's).
  it.each([
    ['the cut pinned to the whole image', true],
    ['a cut per window', false],
  ])(
    'holds every nucleus once and whole across 200 px tile borders, %s',
    async (_, pinned) => {
      const { image } = await readAnnotatedTile(name, crop);
      const { width, height } = image;
      const slide = memorySlide(image);
      const wholeImage = [{ x: 0, y: 0, width, height }];
      const stain = pinned ? await estimateSlideStain(slide, wholeImage, mpp) : undefined;
      const segmenter = createClassicalSegmenter({}, stain);
      const haloPx = haloPixels(DEFAULT_HALO_UM, mpp);
      const tiles = planSegmentationTiles(slide, { coreSize });
      const stored = new Map<number, TileObjects>();
      for (const tile of tiles) {
        const segmented = await segmentTileObjects(slide, tile, { segmenter, mpp, haloPx });
        expect(segmented.cutObjects).toBe(0);
        const earlier = earlierNeighbours(tiles, tile, haloPx).map((t) => stored.get(t.index)!);
        const objects = dropDuplicateObjects(segmented, earlier);
        stored.set(tile.index, decodeTileObjects(encodeTileObjects(objects)));
      }
      const { offsets, total } = labelOffsets(tiles.map((t) => stored.get(t.index)!.count));
      const sink = memoryStore();
      await writeLabelMask(sink, {
        widthPx: width,
        heightPx: height,
        pixelSizeUm: mpp,
        tiles,
        haloPx,
        labelOffsets: offsets,
        loadTileObjects: async (index) => stored.get(index)!,
        shardSize: 512,
        chunkSize: 128,
      });
      const array = await openArray(sink, '0');
      const stitched = (await array.readRegion(sink, { x: 0, y: 0, width, height })) as Uint32Array;
      const whole = (await segmenter.segment(image, mpp)).cells;

      const ours = regions(stitched, width);
      const theirs = regions(whole.labels, width);
      // Labels 1..N, every one painted, each in one piece.
      expect(total).toBeGreaterThan(150);
      expect(ours.size).toBe(total);
      expect(Math.max(...ours.keys())).toBe(total);
      const pieces = piecesPerLabel(stitched, width, height);
      const split = [...pieces].filter(([, n]) => n > 1).map(([label]) => label);
      expect(split).toEqual([]);

      // Many objects cross a core border: the test is about them.
      const crossing = [...ours].filter(
        ([, r]) =>
          Math.floor(r.minX / coreSize) !== Math.floor(r.maxX / coreSize) ||
          Math.floor(r.minY / coreSize) !== Math.floor(r.maxY / coreSize),
      );
      expect(crossing.length).toBeGreaterThan(total / 5);

      // No duplicates: no two labels with (nearly) the same centroid.
      const centroids = [...ours.values()].map((r) => [r.sumX / r.area, r.sumY / r.area] as const);
      centroids.sort((p, q) => p[0] - q[0]);
      let duplicates = 0;
      for (let i = 0; i < centroids.length; i++) {
        for (let j = i + 1; j < centroids.length && centroids[j]![0] - centroids[i]![0] < 3; j++) {
          if (Math.abs(centroids[j]![1] - centroids[i]![1]) < 3) duplicates++;
        }
      }
      expect(duplicates).toBe(0);

      // The same objects as the whole-image segmentation, away from the image edge (where a tile's
      // window and the whole image see different context).
      const matches = bestMatches(stitched, whole, ours, theirs);
      const margin = 20;
      const inner = [...ours].filter(
        ([, r]) =>
          r.minX >= margin && r.minY >= margin && r.maxX < width - margin && r.maxY < height - margin,
      );
      const good = inner.filter(([label]) => (matches.get(label)?.iou ?? 0) >= 0.9);
      const goodCrossing = crossing.filter(([label]) => (matches.get(label)?.iou ?? 0) >= 0.9);
      expect(Math.abs(total - whole.count)).toBeLessThan(0.02 * whole.count);
      if (pinned) {
        expect(good.length).toBeGreaterThan(0.95 * inner.length);
        expect(goodCrossing.length).toBeGreaterThan(0.95 * crossing.length);
      }
    },
    120_000,
  );
});
