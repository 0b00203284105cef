import { execFile } from 'node:child_process';
import { mkdir, open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import {
  heTiffImage,
  planPredictionArchive,
  predictionTiffImage,
  writeOmeTiff,
  writeZarrZip,
} from '../compute/export';
import { toStored } from '../compute/prediction/kernels';
import { finishPredictionStore, markerArray, type PredictionStoreLayout } from '../compute/prediction/store';
import { buildHePyramid } from '../compute/pyramid';
import { openTiffSlide } from '../compute/slide';
import { systemVipsEnv } from '../compute/slide/normalize';
import { fileSource } from '../compute/source';
import { folderStore, openArray } from '../compute/zarr';
import { writeSyntheticSvs } from './synthetic-svs';

/**
 * Export throughput: a synthetic prediction store (`--markers` uint16 markers of smooth values
 * with fine texture on an elliptical "tissue", background 0 and left out as the real store
 * does) is exported to a pyramidal OME-TIFF (deflate, level 6, no predictor) and to a zipped
 * OME-Zarr, each in a child process of its own so its peak RSS is the export's alone.
 *
 * The reference is libvips on the same pixels in the same run: each marker's level 0 is written
 * out raw (not timed), loaded once into a `.v` file (not timed), and
 * `vips tiffsave --tile --pyramid --subifd --bigtiff --compression deflate --predictor none`
 * (512 tiles) is timed per marker, summed; vips builds its levels itself where we copy
 * the store's. The same without compression is printed too.
 *
 * The H&E as the OME-TIFF export stores it (JPEG, YCbCr 4:2:0): an H&E pyramid built by
 * ingest's `buildHePyramid` from a synthetic SVS (CMU-1's tiles repeated), exported as one JPEG
 * image, against `vips tiffsave --compression jpeg --Q q` (libtiff's YCbCr 2x2, 512 tiles,
 * pyramid in SubIFDs) of its level 0, written out raw and loaded into a `.v` (not timed), at
 * `--jpeg-quality` (default 85). Not at the export's 90: from Q 90 up libvips 8.14 writes RGB
 * JPEG without chroma subsampling, another encoding (2.4x the bytes on this H&E).
 *
 *   npm run bench:export [-- --sizes 8000,16000 --markers 8]
 */
const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '8000,16000' },
    markers: { type: 'string', default: '8' },
    keep: { type: 'boolean', default: false },
    'jpeg-quality': { type: 'string', default: '85' },
    // Internal: one phase of one size, in a child process of its own.
    phase: { type: 'string' },
    size: { type: 'string' },
  },
});
const scratch = path.join(process.env.SPS_TEST_SCRATCH ?? '/tmp', 'bench-export');
const catalogue = ['DAPI', 'CD3', 'CD8', 'CD20', 'CD68', 'PanCK', 'Ki67', 'SMA', 'CD4', 'FOXP3'];
const peakMiB = () => Math.round(process.resourceUsage().maxRSS / 1024);
const seconds = (since: number) => (performance.now() - since) / 1000;
const mib = (bytes: number) => bytes / 2 ** 20;

function layoutOf(side: number, markers: number): PredictionStoreLayout {
  return {
    markers: catalogue.slice(0, markers),
    widthPx: side,
    heightPx: side,
    heLevel: 1,
    pixelSizeUm: 0.998,
    // As predictMarkers writes the real store (its default shard and chunk).
    shardSize: 1024,
    chunkSize: 512,
    model: 'synthetic',
    outputRange: [0, 1],
  };
}

/**
 * Level 0 of every marker, shard by shard: a separable smooth field plus a texture table, inside
 * an ellipse covering about 60 % of the slide; outside it the fill value.
 */
async function makeStore(dir: string, layout: PredictionStoreLayout): Promise<void> {
  const sink = folderStore(path.join(dir, 'prediction'));
  const side = layout.widthPx;
  const texture = Float32Array.from({ length: 4096 }, (_, i) => Math.sin(i * 12.9898) * 0.04);
  for (const [m, marker] of layout.markers.entries()) {
    const array = markerArray(layout, marker, 0);
    await array.writeMetadata(sink);
    const columns = Float32Array.from({ length: side }, (_, x) => Math.sin((x + 97 * m) / 211));
    const rows = Float32Array.from({ length: side }, (_, y) => Math.cos((y - 53 * m) / 173));
    const { chunkHeight, chunkWidth, chunksX, chunkLength } = array.geometry;
    const shard = array.allocateShard();
    for (let sy = 0; sy < array.shardsY; sy++) {
      for (let sx = 0; sx < array.shardsX; sx++) {
        shard.fill(0);
        const extent = array.shardExtent(sy, sx);
        for (let y = 0; y < extent.height; y++) {
          const gy = sy * layout.shardSize + y;
          const dy = (gy - side / 2) / (0.45 * side);
          const rowBase =
            Math.floor(y / chunkHeight) * chunksX * chunkLength + (y % chunkHeight) * chunkWidth;
          for (let x = 0; x < extent.width; x++) {
            const gx = sx * layout.shardSize + x;
            const dx = (gx - side / 2) / (0.45 * side);
            if (dx * dx + dy * dy > 1) continue;
            const at = rowBase + Math.floor(x / chunkWidth) * chunkLength + (x % chunkWidth);
            shard[at] = toStored(
              0.5 + 0.35 * columns[gx]! * rows[gy]! + texture[(gx * 7 + gy * 13) & 4095]!,
              layout.outputRange,
            );
          }
        }
        await array.writeShard(sink, sy, sx, shard);
      }
    }
  }
  await finishPredictionStore({ sink, layout, statistics: {} });
}

/** Each marker's level 0 as a raw uint16 file, read back from the store a shard row at a time. */
async function writeRawPlanes(dir: string, layout: PredictionStoreLayout): Promise<void> {
  const sink = folderStore(path.join(dir, 'prediction'));
  for (const marker of layout.markers) {
    const array = markerArray(layout, marker, 0);
    const file = await open(path.join(dir, `${marker}.raw`), 'w');
    try {
      for (let y = 0; y < layout.heightPx; y += layout.shardSize) {
        const height = Math.min(layout.shardSize, layout.heightPx - y);
        const rows = await array.readRegion(sink, { x: 0, y, width: layout.widthPx, height });
        await file.write(new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength));
      }
    } finally {
      await file.close();
    }
  }
}

interface PhaseResult {
  seconds: number;
  bytes: number;
  peakMiB: number;
  /** Highest V8 heap in use and array-buffer bytes seen (sampled every 20 ms), MiB. */
  heapMiB?: number;
  arrayBuffersMiB?: number;
}

/**
 * Samples the V8 heap and array buffers while a phase runs: with the peak RSS they say whether
 * memory that grows with the slide is JavaScript objects, buffers, or native (zlib, libuv).
 */
function sampleMemory(): () => { heapMiB: number; arrayBuffersMiB: number } {
  let heap = 0;
  let buffers = 0;
  const sample = () => {
    const usage = process.memoryUsage();
    heap = Math.max(heap, usage.heapUsed);
    buffers = Math.max(buffers, usage.arrayBuffers);
  };
  const timer = setInterval(sample, 20);
  return () => {
    clearInterval(timer);
    sample();
    return { heapMiB: Math.round(mib(heap)), arrayBuffersMiB: Math.round(mib(buffers)) };
  };
}

async function phase(name: string, side: number, markers: number): Promise<void> {
  const dir = path.join(scratch, String(side));
  const layout = layoutOf(side, markers);
  const started = performance.now();
  const sampled = sampleMemory();
  let bytes = 0;
  if (name === 'make') {
    await makeStore(dir, layout);
    await writeRawPlanes(dir, layout);
  } else if (name === 'tiff') {
    const image = await predictionTiffImage(folderStore(path.join(dir, 'prediction')));
    bytes = (await writeOmeTiff(path.join(dir, 'export.ome.tif'), [image], { compressionLevel: 6 })).bytes;
  } else if (name === 'he-make') {
    await makeHeStore(dir, side);
  } else if (name === 'he-tiff') {
    const image = await heTiffImage(folderStore(path.join(dir, 'he')), { name: 'H&E' });
    const written = await writeOmeTiff(path.join(dir, 'he.ome.tif'), [{ ...image, compression: 'jpeg' }], {
      jpegQuality: jpegQuality(),
    });
    bytes = written.bytes;
  } else if (name === 'zip') {
    const entries = await planPredictionArchive({ prediction: folderStore(path.join(dir, 'prediction')) });
    bytes = (await writeZarrZip(path.join(dir, 'export.ome.zarr.zip'), entries)).bytes;
  } else {
    throw new Error(`unknown phase ${name}`);
  }
  const result: PhaseResult = { seconds: seconds(started), bytes, peakMiB: peakMiB(), ...sampled() };
  process.stdout.write(JSON.stringify(result));
}

function memory(r: PhaseResult): string {
  return `peak ${r.peakMiB} MiB (heap ${r.heapMiB} MiB, array buffers ${r.arrayBuffersMiB} MiB)`;
}

async function child(name: string, side: number, markers: number): Promise<PhaseResult> {
  const { stdout } = await run(
    process.execPath,
    [
      __filename,
      '--phase',
      name,
      '--size',
      String(side),
      '--markers',
      String(markers),
      '--jpeg-quality',
      values['jpeg-quality'],
    ],
    { maxBuffer: 1 << 20 },
  );
  return JSON.parse(stdout) as PhaseResult;
}

/** `vips tiffsave` of a loaded image as a 512-px tiled pyramid; answers seconds, bytes, peak RSS, and removes both files. */
async function vipsTiffsave(loaded: string, out: string, compression: string[]) {
  const started = performance.now();
  const { stderr } = await run(
    '/usr/bin/time',
    [
      '-f',
      'maxrss=%M',
      'vips',
      'tiffsave',
      loaded,
      out,
      '--tile',
      '--tile-width',
      '512',
      '--tile-height',
      '512',
      '--pyramid',
      '--subifd',
      '--bigtiff',
      ...compression,
    ],
    { env: systemVipsEnv() },
  );
  const result = {
    seconds: seconds(started),
    bytes: (await stat(out)).size,
    peakMiB: Math.round(Number(/maxrss=(\d+)/.exec(stderr)?.[1] ?? 0) / 1024),
  };
  await rm(out);
  await rm(loaded);
  return result;
}

/** `vips tiffsave` of every marker plane; answers seconds, bytes and the largest peak RSS. */
async function vipsReference(dir: string, layout: PredictionStoreLayout, compress: boolean) {
  // libvips 8.14 has no deflate level: libtiff's default, zlib's 6, as ours.
  const compression = compress
    ? ['--compression', 'deflate', '--predictor', 'none']
    : ['--compression', 'none'];
  let total = 0;
  let bytes = 0;
  let peak = 0;
  for (const marker of layout.markers) {
    const loaded = path.join(dir, `${marker}.v`);
    await run(
      'vips',
      [
        'rawload',
        path.join(dir, `${marker}.raw`),
        loaded,
        String(layout.widthPx),
        String(layout.heightPx),
        '1',
        '--format',
        'ushort',
      ],
      { env: systemVipsEnv() },
    );
    const saved = await vipsTiffsave(loaded, path.join(dir, `${marker}.vips.tif`), compression);
    total += saved.seconds;
    bytes += saved.bytes;
    peak = Math.max(peak, saved.peakMiB);
  }
  return { seconds: total, bytes, peakMiB: peak };
}

const jpegQuality = () => Number(values['jpeg-quality']);
const sharedSlide = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'wsi', 'CMU-1-Small-Region.svs');

/** The H&E store as ingest builds it, and its level 0 as a raw interleaved RGB file. */
async function makeHeStore(dir: string, side: number): Promise<void> {
  const slidePath = path.join(dir, 'synthetic.svs');
  await writeSyntheticSvs({
    source: sharedSlide,
    out: slidePath,
    width: side,
    height: side,
    lowerLevels: [],
  });
  const source = await fileSource(slidePath);
  try {
    const image = await openTiffSlide(source);
    await buildHePyramid({ image, sink: folderStore(path.join(dir, 'he')), mpp: 0.499, name: 'H&E' });
  } finally {
    await source.close();
  }
  await rm(slidePath);
  const sink = folderStore(path.join(dir, 'he'));
  const level0 = await openArray(sink, '0');
  const file = await open(path.join(dir, 'he.raw'), 'w');
  try {
    const band = 512;
    for (let y = 0; y < side; y += band) {
      const height = Math.min(band, side - y);
      const planar = await level0.readRegion(sink, { x: 0, y, width: side, height });
      const plane = side * height;
      const rgb = Buffer.alloc(plane * 3);
      for (let i = 0; i < plane; i++) {
        rgb[3 * i] = Number(planar[i]);
        rgb[3 * i + 1] = Number(planar[plane + i]);
        rgb[3 * i + 2] = Number(planar[2 * plane + i]);
      }
      await file.write(rgb);
    }
  } finally {
    await file.close();
  }
}

/** `vips tiffsave` of the H&E level 0 as a JPEG pyramid; answers seconds, bytes, peak RSS. */
async function vipsHeReference(dir: string, side: number) {
  const loaded = path.join(dir, 'he.v');
  await run('vips', ['rawload', path.join(dir, 'he.raw'), loaded, String(side), String(side), '3'], {
    env: systemVipsEnv(),
  });
  return vipsTiffsave(loaded, path.join(dir, 'he.vips.tif'), [
    '--compression',
    'jpeg',
    '--Q',
    String(jpegQuality()),
  ]);
}

/** The H&E JPEG comparison at one size: one printed line. */
async function heJpegComparison(side: number): Promise<string> {
  const dir = path.join(scratch, String(side));
  await mkdir(dir, { recursive: true });
  process.stdout.write(`${side} x ${side} H&E: making the store... `);
  const made = await child('he-make', side, 0);
  process.stdout.write(`${made.seconds.toFixed(1)} s\n`);
  const ours = await child('he-tiff', side, 0);
  const vips = await vipsHeReference(dir, side);
  const line = [
    `${side / 1000}k x ${side / 1000}k H&E, JPEG Q${jpegQuality()} 4:2:0 (${mib(side * side * 3).toFixed(0)} MiB level 0)`,
    `OME-TIFF ${ours.seconds.toFixed(1)} s, ${mib(ours.bytes).toFixed(1)} MiB, ${memory(ours)}`,
    `vips jpeg ${vips.seconds.toFixed(1)} s, ${mib(vips.bytes).toFixed(1)} MiB, peak ${vips.peakMiB} MiB`,
    `OME-TIFF / vips jpeg: time ${(ours.seconds / vips.seconds).toFixed(2)}x, size ${(ours.bytes / vips.bytes).toFixed(3)}x`,
  ].join('\n  ');
  console.log(`  ${line}`);
  return line;
}

async function main(): Promise<void> {
  const markers = Number(values.markers);
  if (values.phase) return phase(values.phase, Number(values.size), markers);
  const sizes = values.sizes.split(',').map(Number);
  const rows: string[] = [];
  for (const side of sizes) {
    const dir = path.join(scratch, String(side));
    const layout = layoutOf(side, markers);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    process.stdout.write(`${side} x ${side}, ${markers} markers: making the store... `);
    const made = await child('make', side, markers);
    process.stdout.write(`${made.seconds.toFixed(1)} s\n`);
    const tiff = await child('tiff', side, markers);
    const zip = await child('zip', side, markers);
    const vips = await vipsReference(dir, layout, true);
    const vipsRaw = await vipsReference(dir, layout, false);
    const raw = side * side * 2 * markers;
    const line = [
      `${side / 1000}k x ${side / 1000}k, ${markers} markers (${mib(raw).toFixed(0)} MiB level 0)`,
      `OME-TIFF ${tiff.seconds.toFixed(1)} s, ${mib(tiff.bytes).toFixed(0)} MiB, ${memory(tiff)}`,
      `zip ${zip.seconds.toFixed(1)} s, ${mib(zip.bytes).toFixed(0)} MiB, ${memory(zip)}`,
      `vips deflate ${vips.seconds.toFixed(1)} s, ${mib(vips.bytes).toFixed(0)} MiB, peak ${vips.peakMiB} MiB`,
      `vips none ${vipsRaw.seconds.toFixed(1)} s, ${mib(vipsRaw.bytes).toFixed(0)} MiB`,
      `OME-TIFF / vips deflate ${(tiff.seconds / vips.seconds).toFixed(2)}x`,
    ].join('\n  ');
    console.log(`  ${line}`);
    rows.push(line);
    rows.push(await heJpegComparison(side));
    if (!values.keep) await rm(dir, { recursive: true, force: true });
  }
  console.log(`\n${rows.join('\n')}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
