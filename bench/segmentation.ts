import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { getHeapStatistics } from 'node:v8';
import type { SlideImage } from '../compute/image';
import {
  createClassicalSegmenter,
  DEFAULT_HALO_UM,
  decodeTileObjects,
  dropDuplicateObjects,
  EarlierTileObjects,
  encodeTileObjects,
  grownRect,
  haloPixels,
  labelOffsets,
  planSegmentationTiles,
  type SegmentationTile,
  segmentTileObjects,
  segmentWindowObjects,
  type TileObjects,
  writeInstanceTable,
  writeLabelMask,
} from '../compute/segmentation';
import { openTiffSlide } from '../compute/slide';
import { fileSource } from '../compute/source';
import { folderStore } from '../compute/zarr';
import { cpuSeconds } from './cpu';
import { writeSyntheticSvs } from './synthetic-svs';

/**
 * Whole-slide segmentation throughput: a synthetic SVS made from CMU-1-Small-Region (real
 * tissue, 0.499 µm/px) is segmented tile by tile through the layer's path (read core + halo,
 * classical segmenter, owned objects measured, duplicates dropped, objects stored), then the
 * label mask and the instance table are written from the stored objects. Each size runs in a
 * process of its own, so its peak RSS is the pipeline's and can be compared across sizes; it
 * is printed after each phase too, so the phase that raises it shows (issue 6: memory flat in
 * slide size).
 *
 * The same algorithm in scikit-image (bench/segmentation_skimage.py) runs on a sample of the
 * same tiles (exported once as raw RGB), single-threaded, in the same run, and the ratio is
 * printed: both sides time segmentation plus the measurements of the cells a tile owns.
 *
 *   npm run bench:segmentation [-- --sizes 10000,20000 --core 1024 --sample 24]
 */
const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,20000' },
    core: { type: 'string', default: '1024' },
    sample: { type: 'string', default: '24' },
    python: {
      type: 'string',
      default:
        process.env.SPS_TEST_PYTHON ?? path.join(process.env.HOME ?? '/root', '.cache/sps/venv/bin/python'),
    },
    keep: { type: 'boolean', default: false },
    // V8 flags for the measured child (e.g. `--max-semi-space-size=8`): for diagnosis only.
    'node-flags': { type: 'string', default: '' },
    // Internal: the measured phase of one size, in a child process of its own.
    measure: { type: 'string' },
  },
});
const scratch = path.join(process.env.SPS_TEST_SCRATCH ?? '/tmp', 'bench-segmentation');
const sharedSlide = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'CMU-1-Small-Region.svs');
const peakMiB = () => Math.round(process.resourceUsage().maxRSS / 1024);

interface Measured {
  side: number;
  mpp: number;
  tiles: number;
  corePixels: number;
  windowPixels: number;
  cells: number;
  dropped: number;
  /** Most tiles whose objects were held for their later neighbours at once. */
  keptTiles: number;
  segmentSeconds: number;
  segmentCpuSeconds: number;
  maskSeconds: number;
  tableSeconds: number;
  peakMiB: number;
  phases: PhaseMemory[];
  sample: { tiles: number; pixels: number; cells: number; cpuSeconds: number };
}

/**
 * Memory at the end of a phase: the process's peak RSS so far (it only rises, so the phase
 * that raises it is the one whose figure jumps), and what is live now: RSS, V8 heap used and
 * reserved, and the bytes of typed arrays outside the heap.
 */
interface PhaseMemory {
  phase: string;
  peakMiB: number;
  rssMiB: number;
  heapUsedMiB: number;
  heapTotalMiB: number;
  arrayBuffersMiB: number;
}

function phaseMemory(phase: string): PhaseMemory {
  const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
  const usage = process.memoryUsage();
  const heap = getHeapStatistics();
  return {
    phase,
    peakMiB: peakMiB(),
    rssMiB: mib(usage.rss),
    heapUsedMiB: mib(heap.used_heap_size),
    heapTotalMiB: mib(heap.total_heap_size),
    arrayBuffersMiB: mib(usage.arrayBuffers),
  };
}

/** Every `step`-th tile of the plan, at most `count`, away from nothing in particular: a spread sample. */
function sampleTiles(tiles: readonly SegmentationTile[], count: number): SegmentationTile[] {
  const step = Math.max(1, Math.floor(tiles.length / count));
  return tiles.filter((_, i) => i % step === 0).slice(0, count);
}

async function measure(dir: string): Promise<void> {
  const source = await fileSource(path.join(dir, 'synthetic.svs'));
  try {
    const slide = await openTiffSlide(source);
    const mpp = slide.probe.effectiveMpp ?? 0.499;
    const segmenter = createClassicalSegmenter();
    const haloPx = haloPixels(DEFAULT_HALO_UM, mpp);
    const tiles = planSegmentationTiles(slide, { coreSize: Number(values.core) });
    const sink = folderStore(path.join(dir, 'layer'));
    const stored = async (index: number): Promise<TileObjects> =>
      decodeTileObjects((await sink.get(`objects/${index}.bin`))!);

    const phases = [phaseMemory('open')];
    // The sample for scikit-image, timed here on the very same windows.
    const sample = await timeSample(slide, tiles, { segmenter, mpp, haloPx }, dir);
    phases.push(phaseMemory('sample'));

    let windowPixels = 0;
    let dropped = 0;
    let keptTiles = 0;
    const earlier = new EarlierTileObjects(tiles, haloPx, stored);
    const counts: number[] = [];
    const started = performance.now();
    const cpuStarted = cpuSeconds();
    for (const tile of tiles) {
      const segmented = await segmentTileObjects(slide, tile, { segmenter, mpp, haloPx });
      const objects = dropDuplicateObjects(segmented, await earlier.of(tile));
      keptTiles = Math.max(keptTiles, earlier.size);
      dropped += segmented.count - objects.count;
      counts.push(objects.count);
      await sink.put(`objects/${tile.index}.bin`, encodeTileObjects(objects));
      earlier.add(objects);
      const window = grownRect(tile, haloPx, slide);
      windowPixels += window.width * window.height;
    }
    const segmentSeconds = (performance.now() - started) / 1000;
    const segmentCpuSeconds = cpuSeconds() - cpuStarted;
    phases.push(phaseMemory('segment'));
    const { offsets, total } = labelOffsets(counts);

    let at = performance.now();
    await writeLabelMask(folderStore(path.join(dir, 'layer', 'mask')), {
      widthPx: slide.widthPx,
      heightPx: slide.heightPx,
      pixelSizeUm: mpp,
      tiles,
      haloPx,
      labelOffsets: offsets,
      loadTileObjects: stored,
    });
    const maskSeconds = (performance.now() - at) / 1000;
    phases.push(phaseMemory('mask'));
    at = performance.now();
    await mkdir(path.join(dir, 'layer', 'features'), { recursive: true });
    await writeInstanceTable({
      path: path.join(dir, 'layer', 'features', 'instances.parquet'),
      mpp,
      tiles,
      labelOffsets: offsets,
      loadTileObjects: stored,
      instanceIdBase: 0n,
    });
    const tableSeconds = (performance.now() - at) / 1000;
    phases.push(phaseMemory('table'));
    const result: Measured = {
      side: slide.widthPx,
      mpp,
      tiles: tiles.length,
      corePixels: slide.widthPx * slide.heightPx,
      windowPixels,
      cells: total,
      dropped,
      keptTiles,
      segmentSeconds,
      segmentCpuSeconds,
      maskSeconds,
      tableSeconds,
      peakMiB: peakMiB(),
      phases,
      sample,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await source.close();
  }
}

/** Exports the sample windows as raw RGB for Python and times the TS path on them. */
async function timeSample(
  slide: SlideImage,
  tiles: readonly SegmentationTile[],
  options: { segmenter: ReturnType<typeof createClassicalSegmenter>; mpp: number; haloPx: number },
  dir: string,
): Promise<Measured['sample']> {
  const chosen = sampleTiles(tiles, Number(values.sample));
  const entries = [];
  let cpu = 0;
  let pixels = 0;
  let cells = 0;
  for (const tile of chosen) {
    const window = grownRect(tile, options.haloPx, slide);
    const rgb = await slide.readRegion({ level: 0, ...window });
    const file = path.join(dir, 'sample', `${tile.index}.rgb`);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, rgb.data);
    const core = [
      tile.x - window.x,
      tile.y - window.y,
      tile.x - window.x + tile.width,
      tile.y - window.y + tile.height,
    ];
    entries.push({ path: file, width: rgb.width, height: rgb.height, core });
    const before = cpuSeconds();
    const objects = await segmentWindowObjects(rgb, window, tile, slide, options);
    cpu += cpuSeconds() - before;
    pixels += rgb.width * rgb.height;
    cells += objects.count;
  }
  const spec = { mpp: options.mpp, params: options.segmenter.parameters, tiles: entries };
  await writeFile(path.join(dir, 'sample.json'), JSON.stringify(spec));
  return { tiles: chosen.length, pixels, cells, cpuSeconds: cpu };
}

interface Skimage {
  seconds: number;
  pixels: number;
  cells: number;
}

async function runSize(side: number): Promise<{ measured: Measured; skimage: Skimage }> {
  const dir = path.join(scratch, String(side));
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await writeSyntheticSvs({
    source: sharedSlide,
    out: path.join(dir, 'synthetic.svs'),
    width: side,
    height: side,
    lowerLevels: [],
  });
  const { stdout } = await run(
    process.execPath,
    [
      ...values['node-flags'].split(' ').filter(Boolean),
      __filename,
      '--measure',
      dir,
      '--core',
      values.core,
      '--sample',
      values.sample,
    ],
    {
      maxBuffer: 16 << 20,
    },
  );
  const measured = JSON.parse(stdout.trim().split('\n').pop()!) as Measured;
  const single = { OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1', MKL_NUM_THREADS: '1' };
  const script = path.join(__dirname, '..', '..', 'bench', 'segmentation_skimage.py');
  const python = await run(values.python, [script, path.join(dir, 'sample.json')], {
    env: { ...process.env, ...single },
    maxBuffer: 16 << 20,
  });
  const skimage = JSON.parse(python.stdout.trim()) as Skimage;
  if (!values.keep) await rm(dir, { recursive: true, force: true });
  return { measured, skimage };
}

function report(side: number, { measured: m, skimage: s }: { measured: Measured; skimage: Skimage }): void {
  const mp = (pixels: number) => pixels / 1e6;
  const f = (n: number, digits = 2) => n.toFixed(digits);
  console.log(
    `\n${side} x ${side} px at ${m.mpp} µm/px: ${m.tiles} tiles of ${values.core} px (+${haloPixels(DEFAULT_HALO_UM, m.mpp)} px halo)`,
  );
  console.log(
    `  segment (read, classical, measure, dedup, store): ${f(m.segmentSeconds, 1)} s wall, ${f(m.segmentCpuSeconds, 1)} s CPU; ` +
      `${m.cells} cells (${m.dropped} duplicates dropped; objects of at most ${m.keptTiles} tiles held)`,
  );
  console.log(
    `  per core: ${f(mp(m.corePixels) / m.segmentCpuSeconds)} MP/s of slide, ${f(mp(m.windowPixels) / m.segmentCpuSeconds)} MP/s of windows read, ` +
      `${f(m.cells / m.segmentCpuSeconds, 0)} cells/s`,
  );
  console.log(
    `  label mask ${f(m.maskSeconds, 1)} s, instance table ${f(m.tableSeconds, 1)} s; peak RSS ${m.peakMiB} MiB`,
  );
  for (const p of m.phases) {
    console.log(
      `    after ${p.phase.padEnd(7)} peak RSS ${String(p.peakMiB).padStart(4)} MiB; now RSS ${p.rssMiB} MiB, ` +
        `heap ${p.heapUsedMiB} of ${p.heapTotalMiB} MiB, array buffers ${p.arrayBuffersMiB} MiB`,
    );
  }
  const ours = mp(m.sample.pixels) / m.sample.cpuSeconds;
  const theirs = mp(s.pixels) / s.seconds;
  console.log(
    `  same ${m.sample.tiles} windows (${f(mp(m.sample.pixels), 1)} MP), one core: ours ${f(ours)} MP/s (${f(m.sample.cells / m.sample.cpuSeconds, 0)} cells/s), ` +
      `scikit-image ${f(theirs)} MP/s (${f(s.cells / s.seconds, 0)} cells/s): ${f(ours / theirs)}x; cells ${m.sample.cells} vs ${s.cells}`,
  );
}

async function main(): Promise<void> {
  if (values.measure) return measure(values.measure);
  const sizes = values.sizes.split(',').map(Number);
  for (const side of sizes) report(side, await runSize(side));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
