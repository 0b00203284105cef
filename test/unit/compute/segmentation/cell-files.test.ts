import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from 'hyparquet';
import { writeCellOutlines } from '../../../../compute/segmentation/cell-files';
import { M, MEASUREMENT_COUNT } from '../../../../compute/segmentation/features';
import type { TileObjects } from '../../../../compute/segmentation/objects';
import { writeMarkerTables } from '../../../../compute/segmentation/tables';
import type { SegmentationTile } from '../../../../compute/segmentation/tiles';

/**
 * The outline files of a small layer of two tiles: a cell that crosses into the second tile's
 * core is whole, a cell with a hole keeps it, a cell the mask gave to an earlier tile has a row
 * with an empty outline and no feature; the GeoParquet rows and the GeoJSON features agree,
 * and the files carry the layer's metadata.
 */

const width = 40;
const height = 20;
const tiles: SegmentationTile[] = [
  { index: 0, x: 0, y: 0, width: 20, height },
  { index: 1, x: 20, y: 0, width: 20, height },
];

/** Cells as sets of level-0 pixels, per tile; labels follow tile order. */
const cells: { tile: number; pixels: (x: number, y: number) => boolean }[] = [
  // Crosses x = 20 into tile 1's core, owned by tile 0 (its centroid is left of it).
  { tile: 0, pixels: (x, y) => x >= 12 && x < 23 && y >= 2 && y < 8 },
  // A ring with a hole.
  {
    tile: 0,
    pixels: (x, y) => x >= 2 && x < 9 && y >= 10 && y < 17 && !(x >= 4 && x < 7 && y >= 12 && y < 15),
  },
  { tile: 1, pixels: (x, y) => x >= 28 && x < 35 && y >= 10 && y < 18 },
  // Wholly under cell 1: the mask keeps cell 1 (the lower tile), so this one has no pixels.
  { tile: 1, pixels: (x, y) => x >= 21 && x < 23 && y >= 3 && y < 6 },
];

function maskImage(): Uint32Array {
  const labels = new Uint32Array(width * height);
  cells.forEach((cell, k) => {
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++)
        if (cell.pixels(x, y) && labels[y * width + x] === 0) labels[y * width + x] = k + 1;
  });
  return labels;
}

function tileObjects(tile: SegmentationTile): TileObjects {
  const own = cells.filter((cell) => cell.tile === tile.index);
  const measurements = new Float64Array(own.length * MEASUREMENT_COUNT);
  const runs: number[] = [];
  const runStart = new Uint32Array(own.length + 1);
  // Each cell's nucleus: its pixels in the cell's first two rows.
  const nucleusRuns: number[] = [];
  const nucleusRunStart = new Uint32Array(own.length + 1);
  own.forEach((cell, k) => {
    const b = k * MEASUREMENT_COUNT;
    let minX = width;
    let minY = height;
    let maxX = 0;
    let maxY = 0;
    let area = 0;
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++) {
        if (!cell.pixels(x, y)) continue;
        runs.push(y, x, x + 1);
        if (y < minY + 2) nucleusRuns.push(y, x, x + 1);
        area++;
        minX = Math.min(minX, x);
        minY = Math.min(minY, y);
        maxX = Math.max(maxX, x + 1);
        maxY = Math.max(maxY, y + 1);
      }
    runStart[k + 1] = runs.length / 3;
    nucleusRunStart[k + 1] = nucleusRuns.length / 3;
    measurements[b + M.bbox_min_x] = minX;
    measurements[b + M.bbox_min_y] = minY;
    measurements[b + M.bbox_max_x] = maxX;
    measurements[b + M.bbox_max_y] = maxY;
    measurements[b + M.area] = area;
    measurements[b + M.nucleus_area] = area / 2;
  });
  return {
    tile,
    count: own.length,
    measurements,
    runStart,
    runs: Uint32Array.from(runs),
    nuclei: { runStart: nucleusRunStart, runs: Uint32Array.from(nucleusRuns) },
    cutObjects: 0,
  };
}

function evenOdd(rings: number[][][], px: number, py: number): boolean {
  let inside = false;
  for (const ring of rings)
    for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
      const [xi, yi] = ring[i]!;
      const [xj, yj] = ring[j]!;
      if (yi! > py !== yj! > py && px < ((xj! - xi!) * (py - yi!)) / (yj! - yi!) + xi!) inside = !inside;
    }
  return inside;
}

let folder: string;
beforeAll(async () => {
  folder = await mkdtemp(path.join(tmpdir(), 'cell-files-'));
});
afterAll(() => rm(folder, { recursive: true, force: true }));

it('writes whole outlines as QuPath GeoJSON and GeoParquet, row for row with the instances', async () => {
  const mask = maskImage();
  const objects = tiles.map(tileObjects);
  const source = {
    tiles,
    labelOffsets: [0, 2],
    loadTileObjects: async (index: number) => objects[index]!,
    instanceIdBase: 5n << 32n,
    metadata: { mpp: '0.5', units: 'micrometer', layer_id: 'layer-1', schema_version: '1.0' },
  };
  const markerPath = path.join(folder, 'CD3.parquet');
  await writeMarkerTables({
    ...source,
    markers: ['CD3'],
    pathOf: () => markerPath,
    readMarkerRegion: async (_marker, rect) => new Float32Array(rect.width * rect.height).fill(0.25),
    valueRange: [0, 1],
  });
  const geojsonPath = path.join(folder, 'cells.geojson');
  const geoparquetPath = path.join(folder, 'outlines.parquet');
  const result = await writeCellOutlines({
    ...source,
    mpp: 0.5,
    readMask: async (rect) => {
      const out = new Uint32Array(rect.width * rect.height);
      for (let y = 0; y < rect.height; y++)
        out.set(
          mask.subarray((rect.y + y) * width + rect.x, (rect.y + y) * width + rect.x + rect.width),
          y * rect.width,
        );
      return out;
    },
    geojsonPath,
    geoparquetPath,
    markerTables: [{ marker: 'CD3', path: markerPath }],
  });
  expect(result).toMatchObject({ cells: 4, features: 3 });

  const collection = JSON.parse(await readFile(geojsonPath, 'utf8'));
  expect(collection.type).toBe('FeatureCollection');
  expect(collection.features).toHaveLength(3);
  for (const feature of collection.features) {
    const label = feature.properties.local_label as number;
    expect(feature.properties).toMatchObject({
      objectType: 'cell',
      instance_id: ((5n << 32n) + BigInt(label)).toString(),
      measurements: { 'Cell: CD3 mean': 0.25 },
    });
    expect(feature.geometry.type).toBe('Polygon');
    const rings = feature.geometry.coordinates as number[][][];
    for (const ring of rings) expect(ring[0]).toEqual(ring.at(-1));
    let pixels = 0;
    for (let y = 0; y < height; y++)
      for (let x = 0; x < width; x++) {
        expect([label, evenOdd(rings, x + 0.5, y + 0.5)]).toEqual([label, mask[y * width + x] === label]);
        if (mask[y * width + x] === label) pixels++;
      }
    expect(feature.properties.measurements['Cell: Area px']).toBe(pixels);
    // The nucleus: the cell's first two rows, a rectangle (cell 2's first rows are whole).
    const nucleus = feature.nucleusGeometry.coordinates[0] as number[][];
    const ys = nucleus.map(([, y]) => y!);
    expect(Math.max(...ys) - Math.min(...ys)).toBe(2);
    expect(nucleus).toHaveLength(5);
    expect(feature.properties.measurements['Cell: Area µm^2']).toBe(pixels * 0.25);
  }
  const withHole = collection.features.find(
    (f: { properties: { local_label: number } }) => f.properties.local_label === 2,
  );
  expect(withHole.geometry.coordinates).toHaveLength(2);

  const file = await asyncBufferFromFile(geoparquetPath);
  const metadata = await parquetMetadataAsync(file);
  const kv = Object.fromEntries((metadata.key_value_metadata ?? []).map(({ key, value }) => [key, value]));
  expect(kv).toMatchObject({ mpp: '0.5', units: 'micrometer', layer_id: 'layer-1', schema_version: '1.0' });
  const geo = JSON.parse(kv.geo!);
  expect(geo).toMatchObject({
    version: '1.1.0',
    primary_column: 'geometry',
    columns: { geometry: { encoding: 'WKB', crs: null, geometry_types: ['Polygon'], bbox: [2, 2, 35, 18] } },
  });
  const rows = await parquetReadObjects({ file });
  expect(rows.map((row) => Number(row.local_label))).toEqual([1, 2, 3, 4]);
  expect(rows.map((row) => row.instance_id)).toEqual([1n, 2n, 3n, 4n].map((l) => (5n << 32n) + l));
  for (const feature of collection.features) {
    expect(rows[feature.properties.local_label - 1]!.geometry).toEqual(feature.geometry);
    expect(rows[feature.properties.local_label - 1]!.nucleus_geometry).toEqual(feature.nucleusGeometry);
  }
  expect(geo.columns.nucleus_geometry).toMatchObject({
    encoding: 'WKB',
    crs: null,
    geometry_types: ['Polygon'],
  });
  expect(rows[3]!.geometry).toEqual({ type: 'Polygon', coordinates: [] });
  const markerMetadata = await parquetMetadataAsync(await asyncBufferFromFile(markerPath));
  expect(markerMetadata.key_value_metadata).toEqual(
    expect.arrayContaining([
      { key: 'layer_id', value: 'layer-1' },
      { key: 'marker', value: 'CD3' },
    ]),
  );
});
