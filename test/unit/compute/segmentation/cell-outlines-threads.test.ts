import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { writeCellOutlines } from '../../../../compute/segmentation/cell-files';
import { M, MEASUREMENT_COUNT } from '../../../../compute/segmentation/features';
import type { TileObjects } from '../../../../compute/segmentation/objects';
import { writeMarkerTables } from '../../../../compute/segmentation/tables';
import type { SegmentationTile } from '../../../../compute/segmentation/tiles';

/**
 * The outline files traced on worker threads are byte for byte those traced on the calling
 * thread (the reference), on a synthetic layer of 3 x 3 tiles whose cells have holes, come in
 * two pieces, cross tile borders, or lie wholly under an earlier cell; row groups smaller than a
 * tile so rows of several tiles share one.
 */

const TILE = 64;
const ACROSS = 3;
const SIZE = TILE * ACROSS;
const PITCH = 16;
const PER_ROW = TILE / PITCH;

/** Cell `k` of a tile: a disc (a ring every 5th, two discs every 7th, under a neighbour every 11th). */
function cellPixels(tile: SegmentationTile, k: number, label: number): (x: number, y: number) => boolean {
  const cx = tile.x + PITCH * (k % PER_ROW) + 8 + (label % 3);
  const cy = tile.y + PITCH * Math.floor(k / PER_ROW) + 8 + (label % 2);
  const r = 4 + (label % 4);
  const disc = (x: number, y: number, ox: number, oy: number, radius: number) =>
    (x + 0.5 - ox) ** 2 + (y + 0.5 - oy) ** 2 <= radius * radius;
  if (label % 11 === 0) return (x, y) => disc(x, y, cx - PITCH, cy, 2);
  if (label % 7 === 0) return (x, y) => disc(x, y, cx - 3, cy, 2) || disc(x, y, cx + 3, cy, 2);
  if (label % 5 === 0) return (x, y) => disc(x, y, cx, cy, r) && !disc(x, y, cx, cy, 2);
  // Reaching past the tile's right edge into the next one.
  if (k % PER_ROW === PER_ROW - 1) return (x, y) => disc(x, y, cx + 4, cy, r + 2);
  return (x, y) => disc(x, y, cx, cy, r);
}

const tiles: SegmentationTile[] = Array.from({ length: ACROSS * ACROSS }, (_, index) => ({
  index,
  x: (index % ACROSS) * TILE,
  y: Math.floor(index / ACROSS) * TILE,
  width: TILE,
  height: TILE,
}));
const perTile = PER_ROW * PER_ROW;
const offsets = tiles.map((tile) => tile.index * perTile);

const mask = new Uint32Array(SIZE * SIZE);
const objects: TileObjects[] = tiles.map((tile) => {
  const measurements = new Float64Array(perTile * MEASUREMENT_COUNT);
  const runs: number[] = [];
  const runStart = new Uint32Array(perTile + 1);
  const nucleusRuns: number[] = [];
  const nucleusRunStart = new Uint32Array(perTile + 1);
  for (let k = 0; k < perTile; k++) {
    const label = offsets[tile.index]! + k + 1;
    const inside = cellPixels(tile, k, label);
    let minX = SIZE;
    let minY = SIZE;
    let maxX = 0;
    let maxY = 0;
    for (let y = 0; y < SIZE; y++)
      for (let x = 0; x < SIZE; x++) {
        if (!inside(x, y)) continue;
        runs.push(y, x, x + 1);
        // The nucleus: every other pixel of the cell's top half, so it comes in pieces.
        if ((x + y) % 2 === 0 && y < (minY === SIZE ? y : minY) + 3) nucleusRuns.push(y, x, x + 1);
        if (mask[y * SIZE + x] === 0) mask[y * SIZE + x] = label;
        minX = Math.min(minX, x);
        minY = Math.min(minY, y);
        maxX = Math.max(maxX, x + 1);
        maxY = Math.max(maxY, y + 1);
      }
    runStart[k + 1] = runs.length / 3;
    nucleusRunStart[k + 1] = nucleusRuns.length / 3;
    const b = k * MEASUREMENT_COUNT;
    measurements[b + M.bbox_min_x] = minX;
    measurements[b + M.bbox_min_y] = minY;
    measurements[b + M.bbox_max_x] = maxX;
    measurements[b + M.bbox_max_y] = maxY;
    measurements[b + M.area] = runStart[k + 1]! - runStart[k]!;
    measurements[b + M.nucleus_area] = nucleusRunStart[k + 1]! - nucleusRunStart[k]!;
    measurements[b + M.mean_hematoxylin_od] = label / 7;
  }
  return {
    tile,
    count: perTile,
    measurements,
    runStart,
    runs: Uint32Array.from(runs),
    nuclei: { runStart: nucleusRunStart, runs: Uint32Array.from(nucleusRuns) },
    cutObjects: 0,
  };
});

const source = {
  tiles,
  labelOffsets: offsets,
  loadTileObjects: async (index: number) => objects[index]!,
  instanceIdBase: 3n << 32n,
  metadata: { mpp: '0.5', units: 'micrometer', layer_id: 'layer-1', schema_version: '1.0' },
  rowGroupRows: 40,
};

let folder: string;
beforeAll(async () => {
  folder = await mkdtemp(path.join(tmpdir(), 'cell-outlines-threads-'));
  await writeMarkerTables({
    ...source,
    markers: ['CD3'],
    pathOf: () => path.join(folder, 'CD3.parquet'),
    readMarkerRegion: async (_marker, rect) =>
      Float32Array.from({ length: rect.width * rect.height }, (_, i) => (i % 13) / 13),
    valueRange: [0, 1],
  });
});
afterAll(() => rm(folder, { recursive: true, force: true }));

async function outlines(threads: number) {
  const geojsonPath = path.join(folder, `cells-${threads}.geojson`);
  const geoparquetPath = path.join(folder, `outlines-${threads}.parquet`);
  const result = await writeCellOutlines({
    ...source,
    mpp: 0.5,
    // A view into a larger buffer, as a region cache may give: the pool must not take it away.
    readMask: async (rect) => {
      const out = new Uint32Array(rect.width * rect.height + 8).subarray(4, 4 + rect.width * rect.height);
      for (let y = 0; y < rect.height; y++) {
        const from = (rect.y + y) * SIZE + rect.x;
        out.set(mask.subarray(from, from + rect.width), y * rect.width);
      }
      return out;
    },
    geojsonPath,
    geoparquetPath,
    markerTables: [{ marker: 'CD3', path: path.join(folder, 'CD3.parquet') }],
    threads,
  });
  return { result, geojson: await readFile(geojsonPath), geoparquet: await readFile(geoparquetPath) };
}

it('writes the same bytes on worker threads as on the calling thread', async () => {
  const reference = await outlines(0);
  expect(reference.result.cells).toBe(tiles.length * perTile);
  // Cells under a neighbour have no feature; the layer has holes and cells in two pieces.
  expect(reference.result.features).toBeLessThan(reference.result.cells);
  const collection = JSON.parse(reference.geojson.toString('utf8'));
  const types = new Set(collection.features.map((f: { geometry: { type: string } }) => f.geometry.type));
  expect([...types].sort()).toEqual(['MultiPolygon', 'Polygon']);
  expect(
    collection.features.some(
      (f: { geometry: { type: string; coordinates: unknown[] } }) =>
        f.geometry.type === 'Polygon' && f.geometry.coordinates.length === 2,
    ),
  ).toBe(true);
  for (const threads of [1, 2, 3]) {
    const parallel = await outlines(threads);
    expect(parallel.result).toEqual(reference.result);
    expect(parallel.geojson.equals(reference.geojson)).toBe(true);
    expect(parallel.geoparquet.equals(reference.geoparquet)).toBe(true);
  }
});
