import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
// The modules themselves, not the index: the bench runs without ONNX Runtime.
import { writeCellOutlines } from '../compute/segmentation/cell-files';
import { M, MEASUREMENT_COUNT } from '../compute/segmentation/features';
import type { TileObjects } from '../compute/segmentation/objects';
import { writeMarkerTables } from '../compute/segmentation/tables';
import type { SegmentationTile } from '../compute/segmentation/tiles';

/**
 * The cell outline writers (`features/cells.geojson` and `features/outlines.parquet`) on a
 * synthetic layer: `--cells` cells (default 1,000,000) on 1024 px tiles, each a disc of 6 to
 * 10 px radius on a 20 px lattice with jitter (a few with a hole) around a nucleus of half its
 * radius (as single-pixel runs, the worst case), and `--markers` marker tables
 * whose means the GeoJSON carries. The marker tables are written first (not timed); the outline
 * pass (tracing from the mask, simplification, both writers) runs in a child process of its own
 * so its wall time, CPU time and peak RSS are its alone (on a busy machine the CPU time is the
 * steadier figure). `--threads N` traces on N worker threads (default: the cores, up to 4), `--threads 0`
 * on the main thread (the reference).
 *
 *   npm run bench:export-outlines [-- --cells 1000000 --markers 3 --threads 0]
 */
const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    cells: { type: 'string', default: '1000000' },
    markers: { type: 'string', default: '3' },
    threads: { type: 'string' },
    phase: { type: 'string' },
  },
});
const scratch = path.join(process.env.SPS_TEST_SCRATCH ?? '/tmp', 'bench-export-outlines');
const TILE = 1024;
const PITCH = 20;
const PER_ROW = Math.floor(TILE / PITCH) - 1;
const catalogue = ['DAPI', 'CD3', 'CD8', 'CD20', 'CD68', 'PanCK', 'Ki67', 'SMA'];

interface Layer {
  tiles: SegmentationTile[];
  counts: number[];
  offsets: number[];
}

function layerOf(cells: number): Layer {
  const perTile = PER_ROW * PER_ROW;
  const tileCount = Math.ceil(cells / perTile);
  const across = Math.ceil(Math.sqrt(tileCount));
  const tiles: SegmentationTile[] = [];
  const counts: number[] = [];
  const offsets: number[] = [];
  for (let i = 0; i < tileCount; i++) {
    tiles.push({
      index: i,
      x: (i % across) * TILE,
      y: Math.floor(i / across) * TILE,
      width: TILE,
      height: TILE,
    });
    offsets.push(i * perTile);
    counts.push(Math.min(perTile, cells - i * perTile));
  }
  return { tiles, counts, offsets };
}

/** A cell's disc (and hole) from its label alone, so the tile objects and the mask agree. */
function cellShape(tile: SegmentationTile, k: number, label: number) {
  const hash = Math.imul(label, 2654435761) >>> 0;
  const cx = tile.x + PITCH * (1 + (k % PER_ROW)) + ((hash & 3) - 1.5);
  const cy = tile.y + PITCH * (1 + Math.floor(k / PER_ROW)) + (((hash >> 2) & 3) - 1.5);
  const r = 6 + ((hash >> 4) & 3);
  const hole = (hash >> 6) % 16 === 0 ? 2.5 : 0;
  return { cx, cy, r, hole };
}

/** The last few tiles made: the mask of a tile reads its neighbours' cells too. */
const recent = new Map<number, TileObjects>();

function tileObjects(layer: Layer, index: number): TileObjects {
  let objects = recent.get(index);
  if (!objects) {
    objects = makeTileObjects(layer, index);
    recent.set(index, objects);
    if (recent.size > 8) recent.delete(recent.keys().next().value!);
  }
  return objects;
}

function makeTileObjects(layer: Layer, index: number): TileObjects {
  const tile = layer.tiles[index]!;
  const count = layer.counts[index]!;
  const measurements = new Float64Array(count * MEASUREMENT_COUNT);
  const runStart = new Uint32Array(count + 1);
  const runs: number[] = [];
  const nucleusRunStart = new Uint32Array(count + 1);
  const nucleusRuns: number[] = [];
  for (let k = 0; k < count; k++) {
    const { cx, cy, r, hole } = cellShape(tile, k, layer.offsets[index]! + k + 1);
    let area = 0;
    for (let y = Math.floor(cy - r); y <= Math.ceil(cy + r); y++) {
      let x0 = -1;
      for (let x = Math.floor(cx - r); x <= Math.ceil(cx + r) + 1; x++) {
        const d = (x + 0.5 - cx) ** 2 + (y + 0.5 - cy) ** 2;
        const inside = d <= r * r && d >= hole * hole;
        // The nucleus: the inner half of the cell's radius, the hole left out.
        if (inside && d <= (r * r) / 4 && d >= hole * hole) nucleusRuns.push(y, x, x + 1);
        if (inside && x0 < 0) x0 = x;
        if (!inside && x0 >= 0) {
          runs.push(y, x0, x);
          area += x - x0;
          x0 = -1;
        }
      }
    }
    runStart[k + 1] = runs.length / 3;
    nucleusRunStart[k + 1] = nucleusRuns.length / 3;
    const b = k * MEASUREMENT_COUNT;
    measurements[b + M.bbox_min_x] = Math.floor(cx - r);
    measurements[b + M.bbox_min_y] = Math.floor(cy - r);
    measurements[b + M.bbox_max_x] = Math.ceil(cx + r) + 2;
    measurements[b + M.bbox_max_y] = Math.ceil(cy + r) + 1;
    measurements[b + M.area] = area;
    measurements[b + M.nucleus_area] = area / 2;
  }
  return {
    tile,
    count,
    measurements,
    runStart,
    runs: Uint32Array.from(runs),
    nuclei: { runStart: nucleusRunStart, runs: Uint32Array.from(nucleusRuns) },
    cutObjects: 0,
  };
}

/** The mask under `rect`: the runs of the tiles' cells painted with their labels. */
function maskOf(layer: Layer, rect: { x: number; y: number; width: number; height: number }): Uint32Array {
  const out = new Uint32Array(rect.width * rect.height);
  for (const tile of layer.tiles) {
    if (tile.x >= rect.x + rect.width || tile.x + TILE <= rect.x) continue;
    if (tile.y >= rect.y + rect.height || tile.y + TILE <= rect.y) continue;
    const objects = tileObjects(layer, tile.index);
    for (let k = 0; k < objects.count; k++) {
      for (let r = objects.runStart[k]! * 3; r < objects.runStart[k + 1]! * 3; r += 3) {
        const y = objects.runs[r]! - rect.y;
        if (y < 0 || y >= rect.height) continue;
        const x0 = Math.max(objects.runs[r + 1]!, rect.x) - rect.x;
        const x1 = Math.min(objects.runs[r + 2]!, rect.x + rect.width) - rect.x;
        if (x1 > x0) out.fill(layer.offsets[tile.index]! + k + 1, y * rect.width + x0, y * rect.width + x1);
      }
    }
  }
  return out;
}

async function phase(name: string, cells: number, markers: string[]): Promise<void> {
  const layer = layerOf(cells);
  const source = {
    tiles: layer.tiles,
    labelOffsets: layer.offsets,
    loadTileObjects: async (index: number) => tileObjects(layer, index),
    instanceIdBase: 1n << 32n,
    metadata: { mpp: '0.25', units: 'micrometer', layer_id: 'bench', schema_version: '1.0' },
  };
  const markerPath = (marker: string) => path.join(scratch, `${marker}.parquet`);
  const started = performance.now();
  const cpu = process.cpuUsage();
  if (name === 'markers') {
    await writeMarkerTables({
      ...source,
      markers,
      pathOf: markerPath,
      readMarkerRegion: async (_marker, rect) => new Float32Array(rect.width * rect.height).fill(0.5),
      valueRange: [0, 1],
    });
    process.stdout.write('{}');
    return;
  }
  const result = await writeCellOutlines({
    ...source,
    mpp: 0.25,
    readMask: async (rect) => maskOf(layer, rect),
    geojsonPath: path.join(scratch, 'cells.geojson'),
    geoparquetPath: path.join(scratch, 'outlines.parquet'),
    markerTables: markers.map((marker) => ({ marker, path: markerPath(marker) })),
    threads: values.threads === undefined ? undefined : Number(values.threads),
  });
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  const peakMiB = Math.round(process.resourceUsage().maxRSS / 1024);
  process.stdout.write(JSON.stringify({ ...result, seconds, cpuSeconds, peakMiB }));
}

async function child(name: string, cells: number, markers: number) {
  const args = [__filename, '--phase', name, '--cells', String(cells), '--markers', String(markers)];
  if (values.threads !== undefined) args.push('--threads', values.threads);
  const { stdout } = await run(process.execPath, args, { maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}

async function main(): Promise<void> {
  const cells = Number(values.cells);
  const markerCount = Number(values.markers);
  const markers = catalogue.slice(0, markerCount);
  if (values.phase) return phase(values.phase, cells, markers);
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true });
  await child('markers', cells, markerCount);
  const r = await child('outlines', cells, markerCount);
  const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
  console.log(
    `outlines of ${r.cells.toLocaleString('en')} cells (${markers.length} marker means, ` +
      `${values.threads ?? 'default'} tracing threads): ` +
      `${r.seconds.toFixed(1)} s (CPU ${r.cpuSeconds.toFixed(1)} s), peak RSS ${r.peakMiB} MiB; ` +
      `cells.geojson ${mib(r.geojsonBytes)} MiB (${r.features} features), outlines.parquet ${mib(r.geoparquetBytes)} MiB`,
  );
  await rm(scratch, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
