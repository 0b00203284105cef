/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ImageLevel, RgbImage, SlideImage } from '../../../compute/image';
import {
  closeModelSessions,
  finishPredictionStore,
  type ModelSession,
  nearestLevel,
  openModelSession,
  type PatchGrid,
  type PredictionProgress,
  predictMarkers,
  TilePlan,
} from '../../../compute/prediction';
import {
  type AxisSamples,
  downsampleMarkerIntoQuadrant,
  inputSamples,
  outputSamples,
  STORED_MAX,
  toStored,
} from '../../../compute/prediction/kernels';
import { InputKernel, PlaneKernel, PlaneMemory } from '../../../compute/prediction/plane-kernel';
import { startPlaneWriters } from '../../../compute/prediction/plane-writers';
import { channelWindow, readPredictionLayout } from '../../../compute/prediction/store';
import { buildHePyramid, openHePyramid } from '../../../compute/pyramid';
import { openTiffSlide } from '../../../compute/slide';
import { fileSource } from '../../../compute/source';
import {
  folderStore,
  type KeyValueStore,
  memoryStore,
  openArray,
  type ShardGeometry,
} from '../../../compute/zarr';
import { modelSpec } from '../../../models/registry';
import { runPythonJson } from '../../support/python';
import { readWithZarrita } from '../../support/zarrita';
import { wsiDir } from './helpers';

// The model threads this file's predictions opened; left running, they hold Jest's worker at exit.
afterAll(() => closeModelSessions());

const schemaDir = path.join(__dirname, '../../../../shared/data/schemas/ngff-0.5');
const spec = modelSpec('v0.7');

/** A grid with every position selected, over a level-0 image of `width x height` at `mpp`. */
function fullGrid(
  width: number,
  height: number,
  mpp: number,
  select = (_c: number, _r: number) => true,
): PatchGrid {
  const size = (224 * 0.5) / mpp;
  const cols = Math.ceil(width / size);
  const rows = Math.ceil(height / size);
  const selected = new Uint8Array(cols * rows);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) selected[r * cols + c] = select(c, r) ? 1 : 0;
  return { cols, rows, selected, patchSizeLevel0Px: size };
}

/** Hematoxylin optical density per pixel by Ruifrok-Johnston deconvolution, written independently. */
function hematoxylin(rgb: RgbImage): Float64Array {
  const h = [0.644211, 0.716556, 0.266844];
  const e = [0.092789, 0.954111, 0.283111];
  const norm = (v: number[]) => v.map((x) => x / Math.hypot(...v));
  const H = norm(h);
  const E = norm(e);
  const R = norm([
    H[1]! * E[2]! - H[2]! * E[1]!,
    H[2]! * E[0]! - H[0]! * E[2]!,
    H[0]! * E[1]! - H[1]! * E[0]!,
  ]);
  // Invert the 3x3 stain matrix (rows H, E, R) by cofactors.
  const m = [H, E, R];
  const a = (i: number, j: number) => m[i]![j]!;
  const det =
    a(0, 0) * (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)) -
    a(0, 1) * (a(1, 0) * a(2, 2) - a(1, 2) * a(2, 0)) +
    a(0, 2) * (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0));
  // Column 0 of the inverse: the weights of OD r, g, b on hematoxylin.
  const w = [
    (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)) / det,
    -(a(1, 0) * a(2, 2) - a(1, 2) * a(2, 0)) / det,
    (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0)) / det,
  ];
  const out = new Float64Array(rgb.width * rgb.height);
  for (let i = 0; i < out.length; i++) {
    let v = 0;
    for (let c = 0; c < 3; c++) v += -Math.log10((rgb.data[i * 3 + c]! + 1) / 256) * w[c]!;
    out[i] = v;
  }
  return out;
}

function correlation(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = a.length;
  let ma = 0;
  let mb = 0;
  for (let i = 0; i < n; i++) {
    ma += a[i]!;
    mb += b[i]!;
  }
  ma /= n;
  mb /= n;
  let sab = 0;
  let saa = 0;
  let sbb = 0;
  for (let i = 0; i < n; i++) {
    sab += (a[i]! - ma) * (b[i]! - mb);
    saa += (a[i]! - ma) ** 2;
    sbb += (b[i]! - mb) ** 2;
  }
  return sab / Math.sqrt(saa * sbb);
}

function stored(bytes: Uint8Array): Uint16Array {
  return new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** The CMU-1 small region as an H&E pyramid in memory (mpp 0.499: level 0 is the model's scale). */
async function cmuPyramid(): Promise<{ he: SlideImage; mpp: number; map: Map<string, Uint8Array> }> {
  const source = await fileSource(path.join(wsiDir, 'CMU-1-Small-Region.svs'));
  try {
    const slide = await openTiffSlide(source);
    const mpp = slide.probe.effectiveMpp!;
    const sink = memoryStore();
    await buildHePyramid({ image: slide, sink, mpp, name: 'H&E', shardSize: 1024, chunkSize: 256 });
    return { he: await openHePyramid(sink), mpp, map: sink.map };
  } finally {
    await source.close();
  }
}

describe('TilePlan', () => {
  const levels = (w: number, h: number, n: number): ImageLevel[] =>
    Array.from({ length: n }, (_, k) => ({
      widthPx: Math.floor(w / 2 ** k),
      heightPx: Math.floor(h / 2 ** k),
      downsample: 2 ** k,
    }));

  it('picks the H&E level nearest the model scale', () => {
    expect(nearestLevel(0.25, 4, 0.5)).toBe(1);
    expect(nearestLevel(0.499, 4, 0.5)).toBe(0);
    expect(nearestLevel(0.125, 2, 0.5)).toBe(1);
    // The boundary is the geometric mean of 0.5 and 0.25.
    expect(nearestLevel(0.36, 4, 0.5)).toBe(0);
    expect(nearestLevel(0.35, 4, 0.5)).toBe(1);
  });

  it.each([
    { mpp: 0.25, shard: 256, band: 2 },
    { mpp: 0.499, shard: 300, band: 1 },
    { mpp: 0.23, shard: 512, band: 3 },
  ])(
    'tiles the level exactly, and carries each position only within a band (mpp $mpp)',
    ({ mpp, shard, band }) => {
      const grid = fullGrid(3001, 2203, mpp, (c, r) => (c * 7 + r * 3) % 5 !== 0);
      const plan = new TilePlan({
        grid,
        heLevels: levels(3001, 2203, 4),
        heMpp: mpp,
        modelMpp: 0.5,
        shardSize: shard,
        bandShards: band,
      });
      const cover = new Uint8Array(plan.widthPx * plan.heightPx);
      for (let p = 0; p < plan.positionCount; p++) {
        const sq = plan.square(p);
        for (let y = sq.y0; y < sq.y1; y++)
          for (let x = sq.x0; x < sq.x1; x++) cover[y * plan.widthPx + x]!++;
      }
      expect(cover.every((n) => n === 1)).toBe(true);
      // Walk the order as the predictor does, from every start: each selected position is written
      // in every shard it meets, inferred there or carried from an earlier shard of this run.
      for (const start of [0, 1, Math.floor(plan.order.length / 2)]) {
        const carried = new Set<number>();
        const homes = new Map<number, number>();
        plan.order.forEach((s, i) => {
          if (i < start) return;
          for (const p of plan.positionsOf(s)) {
            if (plan.inferredIn(p, s, start)) carried.delete(p);
            else expect({ p, carried: carried.has(p) }).toEqual({ p, carried: true });
            if (plan.isHome(p, s)) homes.set(p, (homes.get(p) ?? 0) + 1);
            if (plan.neededLater(p, s)) carried.add(p);
            else carried.delete(p);
          }
          expect(plan.orderIndex(s)).toBe(i);
        });
        expect([...homes.values()].every((n) => n === 1)).toBe(true);
      }
    },
  );
});

/** An input tile to fill: the region read, its top-left level pixel, the samples of both axes. */
interface InputCase {
  region: RgbImage;
  regionX: number;
  regionY: number;
  ys: AxisSamples;
  xs: AxisSamples;
}

/** The input fill of the WebAssembly module on a fresh memory: one tile, answered as a copy. */
function fillInput({ region, regionX, regionY, ys, xs }: InputCase): Float32Array {
  const side = xs.first.length;
  const memory = new PlaneMemory(4, 4);
  const into = memory.planeBuffer(3 * side * side + 5);
  new InputKernel(memory, side).fill(region, regionX, regionY, ys, xs, into, 5);
  return into.slice(5);
}

/**
 * The input fill's definition value by value: along x, then along y, each step of
 * (1 - w) * a + w * b in f32 and rounded; a pixel outside the level white, a row outside it white
 * throughout; a weight of 0 gives the first pixel.
 */
function inputByDefinition({ region, regionX, regionY, ys, xs }: InputCase): Float32Array {
  const f32 = Math.fround;
  const blend = (a: number, b: number, w: number) => f32(f32(f32(1 - w) * a) + f32(w * b));
  const n = xs.first.length;
  const rows = ys.first.length;
  const pixel = (x: number, y: number, c: number) =>
    x < 0 ? 255 : region.data[((y - regionY) * region.width + (x - regionX)) * 3 + c]!;
  const along = (y: number, j: number, c: number) => {
    if (y < 0) return 255;
    const w = xs.weight[j]!;
    const a = pixel(xs.first[j]!, y, c);
    return w === 0 ? a : blend(a, pixel(xs.second[j]!, y, c), w);
  };
  const out = new Float32Array(3 * rows * n);
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < rows; i++) {
      const fy = ys.weight[i]!;
      for (let j = 0; j < n; j++) {
        const top = along(ys.first[i]!, j, c);
        out[(c * rows + i) * n + j] = fy === 0 ? top : blend(top, along(ys.second[i]!, j, c), fy);
      }
    }
  }
  return out;
}

describe('resampling kernels', () => {
  it('copies an exact square and pads outside the level with white', () => {
    const region: RgbImage = { width: 4, height: 4, data: new Uint8Array(48).map((_, i) => i) };
    const ys = inputSamples(0, 2, 2, 1, 4);
    const xs = inputSamples(2, 2, 2, 1, 4);
    const into = fillInput({ region, regionX: 0, regionY: 0, ys, xs });
    // Row -1 is outside: white; row 0 columns 1..4, column 4 outside.
    expect(Array.from(into.subarray(0, 8))).toEqual([255, 255, 255, 255, 3, 6, 9, 255]);
    // The tile goes into the kernel's memory, nowhere else.
    const kernel = new InputKernel(new PlaneMemory(4, 4), 4);
    expect(() => kernel.fill(region, 0, 0, ys, xs, new Float32Array(48), 0)).toThrow(RangeError);
  });

  it('reads nothing past a region that ends on the last pixel a tile samples', () => {
    // An exact square whose window ends one pixel inside the level: the region read stops
    // there, and the pixel after each sample (weight 0) does not count.
    const region: RgbImage = { width: 4, height: 4, data: new Uint8Array(48).fill(7) };
    const ys = inputSamples(1, 2, 2, 1, 8);
    const xs = inputSamples(1, 2, 2, 1, 8);
    expect(Array.from(new Set(fillInput({ region, regionX: 0, regionY: 0, ys, xs })))).toEqual([7]);
  });

  it('resamples along x, then along y, as the definition says, inside runs and out of them', () => {
    // Squares as wide as the 224 px tile, a pixel wider (consecutive pixels: four lanes at a
    // time), narrower and much wider (gathered), at the level's corners (white outside it).
    let seed = 5;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const tile = 224;
    const halo = 8;
    const level = 3000;
    const cases = [
      [0, 0, 224],
      [5, 7, 225],
      [100, 50, 181],
      [2700, 2700, 317],
      [2780, 10, 225],
      [-3, -3, 224],
      [300, 300, 250],
    ] as const;
    for (const [x0, y0, side] of cases) {
      const ys = inputSamples(y0, side, tile, halo, level);
      const xs = inputSamples(x0, side, tile, halo, level);
      const inside = (s: AxisSamples) => [...s.first, ...s.second].filter((v) => v >= 0);
      const regionX = Math.min(...inside(xs));
      const regionY = Math.min(...inside(ys));
      const width = Math.max(...inside(xs)) + 1 - regionX;
      const height = Math.max(...inside(ys)) + 1 - regionY;
      const data = new Uint8Array(width * height * 3).map(() => Math.floor(random() * 256));
      const region: RgbImage = { width, height, data };
      const tileCase = { region, regionX, regionY, ys, xs };
      const into = fillInput(tileCase);
      const expected = inputByDefinition(tileCase);
      let differing = 0;
      for (let k = 0; k < expected.length; k++) if (into[k] !== expected[k]) differing++;
      expect({ x0, y0, side, differing }).toEqual({ x0, y0, side, differing: 0 });
    }
  });

  it('maps output samples back symmetrically', () => {
    const s = outputSamples(448, 224);
    expect([s.first[0], s.second[0], s.weight[0]]).toEqual([0, 1, 0]);
    expect(s.first[447]).toBe(223);
    const same = outputSamples(224, 224);
    expect(Array.from(same.first.subarray(0, 3))).toEqual([0, 1, 2]);
  });
});

/** A one-channel uint16 shard of 2 x 2 chunks, one chunk row of `chunksX`. */
function twoByTwoChunks(chunksX: number): ShardGeometry {
  return {
    dataType: 'uint16',
    fillValue: 0,
    channels: 1,
    chunkHeight: 2,
    chunkWidth: 2,
    chunksY: 1,
    chunksX,
    chunkLength: 4,
  };
}

describe('stored values', () => {
  it('maps the output range onto 0..65535, rounding half up, clamping, NaN to 0', () => {
    expect([0, 1, 0.5, -0.2, 1.7, Number.NaN].map((v) => toStored(v, [0, 1]))).toEqual([
      0, 65535, 32768, 0, 65535, 0,
    ]);
    expect(toStored(0, [-1, 1])).toBe(32768);
    expect(toStored(2 / 65535, [0, 1])).toBe(2);
  });

  it('writes a plane in stored units, with histogram and sums of what is stored', () => {
    const tile = 2;
    const same = outputSamples(2, 2);
    const g = twoByTwoChunks(2);
    const memory = new PlaneMemory(tile, 4);
    const kernel = new PlaneKernel(memory, g);
    const source = memory.planeBuffer(4);
    source.set([0, 0.25, 0.5, 1]);
    const shard = memory.shardBuffer(8);
    const histogram = new Uint32Array(4);
    const square = { x0: 2, y0: 0, x1: 4, y1: 2 };
    const sums = kernel.writePlane(
      source,
      0,
      square,
      same,
      same,
      { x0: 0, y0: 0, x1: 4, y1: 2 },
      shard,
      0,
      0,
      histogram,
      [0, 1],
    );
    // The square is the second chunk of the shard.
    expect(Array.from(shard)).toEqual([0, 0, 0, 0, 0, 16384, 32768, 65535]);
    expect(Array.from(histogram)).toEqual([1, 1, 1, 1]);
    expect(sums).toEqual({ count: 4, min: 0, max: 65535, sum: 16384 + 32768 + 65535 });
    // The kernel reads planes in place: one outside its memory is the caller's bug.
    const clip = { x0: 0, y0: 0, x1: 4, y1: 2 };
    const write = (plane: Float32Array) =>
      kernel.writePlane(plane, 0, square, same, same, clip, shard, 0, 0, histogram, [0, 1]);
    expect(() => write(Float32Array.from([0, 0.25, 0.5, 1]))).toThrow(RangeError);
    expect(() => new PlaneKernel(memory, g, 1)).toThrow(RangeError);
  });

  it('resamples, stores and counts every value as the per-value definition does', () => {
    // The definition written out value by value (resampling in f32, each step rounded), against
    // the WebAssembly kernel: planes with NaN, infinities and values past the range, squares wider,
    // narrower and as wide as the tile, cut by the shard's edges.
    const tile = 224;
    const f32 = Math.fround;
    const blend = (a: number, b: number, w: number) => f32(f32(f32(1 - w) * a) + f32(w * b));
    let seed = 7;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    // Planes 0 and 1 noisy; plane 2 smooth, so most runs of neighbours share a bin (the kernel
    // counts those in a register), with a few NaN in it.
    const source = new Float32Array(3 * tile * tile);
    for (let i = 0; i < 2 * tile * tile; i++) {
      const r = random();
      source[i] =
        r < 0.01 ? Number.NaN : r < 0.015 ? Number.POSITIVE_INFINITY : r < 0.1 ? 3 * r - 1.1 : 0.3 + 0.2 * r;
    }
    for (let i = 0; i < tile * tile; i++) {
      const y = Math.floor(i / tile);
      const x = i % tile;
      source[2 * tile * tile + i] =
        random() < 0.001 ? Number.NaN : 0.5 + 0.6 * Math.sin(x / 40) * Math.cos(y / 30);
    }
    const g: ShardGeometry = {
      dataType: 'uint16',
      fillValue: 0,
      channels: 1,
      chunkHeight: 64,
      chunkWidth: 64,
      chunksY: 4,
      chunksX: 4,
      chunkLength: 64 * 64,
    };
    const cases = [
      { side: 225, clip: { x0: 0, y0: 0, x1: 256, y1: 256 }, sq: { x0: 40, y0: 10 }, bins: 256 },
      { side: 224, clip: { x0: 100, y0: 0, x1: 356, y1: 256 }, sq: { x0: 30, y0: 60 }, bins: 256 },
      { side: 181, clip: { x0: 0, y0: 0, x1: 256, y1: 256 }, sq: { x0: 120, y0: 130 }, bins: 4 },
      { side: 317, clip: { x0: 0, y0: 0, x1: 256, y1: 256 }, sq: { x0: -3, y0: -50 }, bins: 256 },
      { side: 224, clip: { x0: 0, y0: 0, x1: 256, y1: 256 }, sq: { x0: 5, y0: 9 }, bins: 256, plane: 2 },
      { side: 250, clip: { x0: 0, y0: 0, x1: 256, y1: 256 }, sq: { x0: 3, y0: 1 }, bins: 64, plane: 2 },
    ];
    for (const [n, c] of cases.entries()) {
      const sq = { x0: c.sq.x0, y0: c.sq.y0, x1: c.sq.x0 + c.side, y1: c.sq.y0 + c.side };
      const s = outputSamples(c.side, tile);
      const range = [-0.5, 1.5] as const;
      const offset = (c.plane ?? n % 2) * tile * tile;
      // Writer 1 of 2: its scratch is not the first one.
      const memory = new PlaneMemory(tile, c.bins, 2);
      const planes = memory.planeBuffer(source.length);
      planes.set(source);
      const shard = memory.shardBuffer(16 * g.chunkLength);
      const histogram = new Uint32Array(c.bins);
      const kernel = new PlaneKernel(memory, g, 1);
      const sums = kernel.writePlane(
        planes,
        offset,
        sq,
        s,
        s,
        c.clip,
        shard,
        c.clip.x0,
        c.clip.y0,
        histogram,
        range,
      );
      const expected = new Uint16Array(shard.length);
      const expectedHistogram = new Uint32Array(c.bins);
      let count = 0;
      let min = Number.POSITIVE_INFINITY;
      let max = Number.NEGATIVE_INFINITY;
      let sum = 0;
      for (let y = Math.max(sq.y0, c.clip.y0); y < Math.min(sq.y1, c.clip.y1); y++) {
        const j = y - sq.y0;
        const fy = s.weight[j]!;
        const rowAt = (col: number) =>
          fy === 0
            ? source[offset + s.first[j]! * tile + col]!
            : blend(
                source[offset + s.first[j]! * tile + col]!,
                source[offset + s.second[j]! * tile + col]!,
                fy,
              );
        for (let x = Math.max(sq.x0, c.clip.x0); x < Math.min(sq.x1, c.clip.x1); x++) {
          const i = x - sq.x0;
          const fx = s.weight[i]!;
          const value = c.side === tile ? rowAt(i) : blend(rowAt(s.first[i]!), rowAt(s.second[i]!), fx);
          const v = toStored(value, range);
          const lx = x - c.clip.x0;
          const ly = y - c.clip.y0;
          const chunk = Math.floor(ly / 64) * 4 + Math.floor(lx / 64);
          expected[chunk * g.chunkLength + (ly % 64) * 64 + (lx % 64)] = v;
          expectedHistogram[(v * c.bins) >>> 16]!++;
          count++;
          min = Math.min(min, v);
          max = Math.max(max, v);
          sum += v;
        }
      }
      expect(count).toBeGreaterThan(1000);
      expect(Array.from(shard)).toEqual(Array.from(expected));
      expect(histogram).toEqual(expectedHistogram);
      expect(sums).toEqual({ count, min, max, sum });
    }
  });

  it('writes, fills, encodes and fills inputs alike in the TypeScript and WebAssembly writers', async () => {
    // One small case through the interface, values the model never gives included (NaN,
    // infinities, past the range): squares wider, narrower and as wide as the tile, cut by the
    // shard, a fill after the writes, each shard encoded, and an input tile.
    const tile = 224;
    const side = 240;
    let seed = 11;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const planes = Float32Array.from({ length: 2 * 3 * tile * tile }, () => {
      const r = random();
      return r < 0.01 ? Number.NaN : r < 0.02 ? Number.NEGATIVE_INFINITY : 3 * r - 1.2;
    });
    const region: RgbImage = {
      width: 300,
      height: 300,
      data: Uint8Array.from({ length: 300 * 300 * 3 }, () => Math.floor(random() * 256)),
    };
    const g: ShardGeometry = {
      dataType: 'uint16',
      fillValue: 0,
      channels: 1,
      chunkHeight: 64,
      chunkWidth: 64,
      chunksY: 4,
      chunksX: 4,
      chunkLength: 64 * 64,
    };
    const clip = { x0: 100, y0: 50, x1: 356, y1: 306 };
    const squares = [
      { x0: 90, y0: 40, x1: 315, y1: 265 },
      { x0: 200, y0: 120, x1: 424, y1: 344 },
      { x0: 300, y0: 260, x1: 481, y1: 441 },
    ];
    const run = async (kernel: 'typescript' | 'webassembly') => {
      const writers = startPlaneWriters({
        kernel,
        threads: 2,
        markers: 3,
        geometry: g,
        tile,
        inputSide: side,
        bins: 256,
        range: [-0.5, 1.5],
      });
      try {
        const source = writers.planeBuffer(planes.length);
        source.set(planes);
        const shards = writers.shardBuffers();
        const written = await writers.write({
          source,
          bases: [0, 3 * tile * tile, 0],
          squares,
          channels: [2, 0, 1],
          clip,
          shards,
        });
        await writers.fill(clip, [{ x0: 100, y0: 280, x1: 200, y1: 306 }], shards, 7);
        const encoded = await Promise.all(
          shards.map((shard, m) => writers.encode(m, shard, { height: 256, width: 256 }, 0, [], 'sized')),
        );
        const input = writers.inputBuffer(3 * side * side);
        writers.fillInput(
          region,
          0,
          0,
          inputSamples(20, 250, tile, 8, 1000),
          inputSamples(10, 231, tile, 8, 1000),
          input,
          0,
        );
        return {
          shards: shards.map((shard) => Array.from(shard)),
          sums: written.sums,
          histograms: written.histograms.map((h) => Array.from(h)),
          encoded: encoded.map((bytes) => (bytes ? Buffer.from(bytes).toString('base64') : bytes)),
          input: Array.from(input),
        };
      } finally {
        await writers.close();
      }
    };
    const reference = await run('typescript');
    expect(reference.sums.flat().every((s) => s.count > 0)).toBe(true);
    expect(await run('webassembly')).toEqual(reference);
  });

  it('sets a rectangle of a shard to a value, across chunks, and nothing around it', () => {
    const g = twoByTwoChunks(2);
    const memory = new PlaneMemory(2, 4);
    const kernel = new PlaneKernel(memory, g);
    const shard = memory.shardBuffer(8);
    shard.fill(7);
    // Shard pixels (1..3) x (1..2) of a shard at level pixel (10, 20): one column of each chunk.
    kernel.fillRect(shard, 10, 20, { x0: 11, y0: 21, x1: 13, y1: 22 }, 0x1234);
    expect(Array.from(shard)).toEqual([7, 7, 7, 0x1234, 7, 7, 0x1234, 7]);
    kernel.fillRect(shard, 10, 20, { x0: 10, y0: 20, x1: 14, y1: 21 }, 0);
    expect(Array.from(shard)).toEqual([0, 0, 7, 0x1234, 0, 0, 0x1234, 7]);
    expect(() => kernel.fillRect(new Uint16Array(8), 0, 0, { x0: 0, y0: 0, x1: 1, y1: 1 }, 0)).toThrow(
      RangeError,
    );
  });

  it('halves a level as the 2x2 mean rounded half up', () => {
    const g = twoByTwoChunks(1);
    const parent = new Uint16Array(4);
    downsampleMarkerIntoQuadrant(Uint16Array.from([1, 2, 2, 2]), parent, g, {
      y: 0,
      x: 1,
      validHeight: 2,
      validWidth: 2,
    });
    expect(Array.from(parent)).toEqual([0, 2, 0, 0]);
    downsampleMarkerIntoQuadrant(
      Uint16Array.from([STORED_MAX, STORED_MAX, STORED_MAX, STORED_MAX - 1]),
      parent,
      g,
      {
        y: 1,
        x: 0,
        validHeight: 2,
        validWidth: 2,
      },
    );
    expect(parent[2]).toBe(STORED_MAX);
  });

  it('windows the 0.5th to 99.5th percentiles in stored units', () => {
    const histogram = new Array<number>(256).fill(0);
    histogram[0] = 1;
    histogram[100] = 998;
    histogram[255] = 1;
    const window = channelWindow({ count: 1000, min: 3, max: 65535, sum: 0, histogram });
    expect(window).toEqual({ min: 3, max: 65535, start: 100 * 256, end: 101 * 256 - 1 });
    expect(channelWindow(undefined)).toEqual({ min: 0, max: 65535, start: 0, end: 65535 });
  });
});

describe('predictMarkers on CMU-1-Small-Region', () => {
  let he: SlideImage;
  let mpp: number;
  let session: ModelSession;
  let dir: string;
  beforeAll(async () => {
    ({ he, mpp } = await cmuPyramid());
    session = await openModelSession(spec);
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-prediction-'));
  }, 120_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function predict(sink: KeyValueStore, options: Partial<Parameters<typeof predictMarkers>[0]> = {}) {
    return predictMarkers({
      he,
      heMpp: mpp,
      grid: fullGrid(he.widthPx, he.heightPx, mpp, (c, r) => (c + r) % 4 !== 3),
      model: session,
      markers: ['DAPI', 'PanCK', 'aSMA'],
      sink,
      batchSize: 4,
      shardSize: 512,
      chunkSize: 128,
      bandShards: 2,
      ...options,
    });
  }

  it('predicts a DAPI that follows hematoxylin, leaves unselected positions at 0, and counts every position', async () => {
    const sink = memoryStore();
    const grid = fullGrid(he.widthPx, he.heightPx, mpp, (c, r) => (c + r) % 4 !== 3);
    const result = await predict(sink, { grid });
    const selected = grid.selected.reduce((n, v) => n + v, 0);
    expect(result).toMatchObject({ tiles: selected, failedTiles: 0 });
    expect(result.layout).toMatchObject({
      heLevel: 0,
      widthPx: he.widthPx,
      heightPx: he.heightPx,
      pixelSizeUm: mpp,
    });
    const array = await openArray(sink, 'markers/DAPI/0');
    expect(array.spec.shape).toEqual([1, he.heightPx, he.widthPx]);
    const dapi = (await array.readRegion(sink, {
      x: 0,
      y: 0,
      width: he.widthPx,
      height: he.heightPx,
    })) as Uint16Array;
    const plan = new TilePlan({
      grid,
      heLevels: he.levels,
      heMpp: mpp,
      modelMpp: 0.5,
      shardSize: 512,
      bandShards: 2,
    });
    let outside = 0;
    let inside = 0;
    for (let p = 0; p < plan.positionCount; p++) {
      const sq = plan.square(p);
      for (let y = sq.y0; y < sq.y1; y++) {
        for (let x = sq.x0; x < sq.x1; x++) {
          if (grid.selected[p] === 1) inside++;
          else if (dapi[y * he.widthPx + x] !== 0) outside++;
        }
      }
    }
    expect(outside).toBe(0);
    expect(result.statistics.DAPI!.count).toBe(inside);
    // The store holds every value counted: no chunk a position wrote into was left out, and
    // none holds what an earlier shard left in a reused buffer.
    expect(dapi.reduce((n, v) => n + v, 0)).toBe(result.statistics.DAPI!.sum);
    // DAPI against hematoxylin density over a tissue-rich region (both smoothed alike by eye:
    // the model smooths with sigma 1 px, which costs little correlation).
    const region = { level: 0, x: 1000, y: 1400, width: 400, height: 400 };
    const rgb = await he.readRegion(region);
    const h = hematoxylin(rgb);
    const values: number[] = [];
    const dens: number[] = [];
    for (let y = 0; y < region.height; y++) {
      for (let x = 0; x < region.width; x++) {
        const gx = region.x + x;
        const gy = region.y + y;
        const p =
          Math.floor(gy / plan.grid.patchSizeLevel0Px) * grid.cols +
          Math.floor(gx / plan.grid.patchSizeLevel0Px);
        if (grid.selected[p] !== 1) continue;
        values.push(dapi[gy * he.widthPx + gx]!);
        dens.push(h[y * region.width + x]!);
      }
    }
    expect(values.length).toBeGreaterThan(50_000);
    expect(correlation(values, dens)).toBeGreaterThan(0.75);
  }, 120_000);

  it('resumes from any shard with the same bytes, counts and statistics', async () => {
    const whole = memoryStore();
    const reference = await predict(whole);
    for (const stopAfter of [1, 5, 11]) {
      const map = new Map<string, Uint8Array>();
      const controller = new AbortController();
      let token: PredictionProgress | undefined;
      await expect(
        predict(memoryStore(map), {
          signal: controller.signal,
          onProgress: (_done, _total, t) => {
            token = t;
            if (t.shardsDone >= stopAfter) controller.abort();
          },
        }),
      ).rejects.toThrow();
      expect(token!.shardsDone).toBeGreaterThanOrEqual(stopAfter);
      const resumed = await predict(memoryStore(map), { resume: token });
      expect(resumed.tiles).toBe(reference.tiles);
      expect(resumed.statistics).toEqual(reference.statistics);
      expect([...map.keys()].sort()).toEqual([...whole.map.keys()].sort());
      for (const [key, bytes] of whole.map)
        expect({ key, same: Buffer.compare(bytes, map.get(key)!) === 0 }).toEqual({ key, same: true });
    }
  }, 240_000);

  it('writes the same bytes with the TypeScript reference writers as with the WebAssembly ones', async () => {
    // The reference computes each value as the definitions say, on this thread; the WebAssembly
    // writers run on two threads sharing their memory: every object of the store must match.
    const fast = memoryStore();
    const slow = memoryStore();
    // A corner of the slide, over several shards and a band edge, with a few gaps.
    const grid = fullGrid(he.widthPx, he.heightPx, mpp, (c, r) => c < 5 && r < 6 && (c + r) % 4 !== 3);
    const viaWasm = await predict(fast, { grid, kernel: 'webassembly', writers: 2 });
    const viaReference = await predict(slow, { grid, kernel: 'typescript' });
    expect(viaReference.statistics).toEqual(viaWasm.statistics);
    expect(viaReference.tiles).toBe(viaWasm.tiles);
    expect([...slow.map.keys()].sort()).toEqual([...fast.map.keys()].sort());
    expect(fast.map.size).toBeGreaterThan(3);
    for (const [key, bytes] of fast.map)
      expect({ key, same: Buffer.compare(bytes, slow.map.get(key)!) === 0 }).toEqual({ key, same: true });
  }, 240_000);

  it('retries a failing batch tile by tile, counts the tile that fails alone and leaves it at 0', async () => {
    const sink = memoryStore();
    let poisoned: Float32Array | undefined;
    let batches = 0;
    const flaky: ModelSession = {
      spec: session.spec,
      async run(input, count, output) {
        // A tile of the twentieth batch (a shard whose buffers held an earlier shard's pixels)
        // fails for good, alone too; any batch holding it fails.
        const side = spec.tileSize + 2 * spec.halo;
        const length = 3 * side * side;
        if (count === 4) batches++;
        for (let k = 0; k < count; k++) {
          const tile = input.subarray(k * length, (k + 1) * length);
          if (poisoned === undefined && batches === 20 && k === 2) poisoned = tile.slice();
          if (poisoned && tile.every((v, i) => v === poisoned![i])) throw new Error('inference failed');
        }
        return session.run(input, count, output);
      },
    };
    // Every position selected: whatever an earlier shard left in the buffers is tissue.
    const grid = fullGrid(he.widthPx, he.heightPx, mpp);
    const result = await predict(sink, { model: flaky, grid });
    expect(result.failedTiles).toBe(1);
    const reference = memoryStore();
    await predict(reference, { grid });
    const read = async (s: KeyValueStore) =>
      (await (
        await openArray(s, 'markers/DAPI/0')
      ).readRegion(s, {
        x: 0,
        y: 0,
        width: he.widthPx,
        height: he.heightPx,
      })) as Uint16Array;
    const [flakyDapi, referenceDapi] = [await read(sink), await read(reference)];
    // Only the failed position's square differs, and it holds the fill value.
    const box = { x0: he.widthPx, y0: he.heightPx, x1: 0, y1: 0 };
    let nonzero = 0;
    for (let i = 0; i < flakyDapi.length; i++) {
      if (flakyDapi[i] === referenceDapi[i]) continue;
      if (flakyDapi[i] !== 0) nonzero++;
      const x = i % he.widthPx;
      const y = Math.floor(i / he.widthPx);
      box.x0 = Math.min(box.x0, x);
      box.y0 = Math.min(box.y0, y);
      box.x1 = Math.max(box.x1, x + 1);
      box.y1 = Math.max(box.y1, y + 1);
    }
    expect(nonzero).toBe(0);
    expect(box.x1 - box.x0).toBeGreaterThan(100);
    expect(box.x1 - box.x0).toBeLessThanOrEqual(225);
    expect(box.y1 - box.y0).toBeLessThanOrEqual(225);
  }, 120_000);

  it('writes a store that validates as OME-NGFF 0.5 and reads the same in zarr-python and zarrita', async () => {
    const root = path.join(dir, 'store');
    const sink = folderStore(root);
    // mpp 0.45 makes squares of 249 px: the resampling path, on both sides of inference.
    const heMpp = 0.45;
    const result = await predict(sink, { heMpp, grid: fullGrid(he.widthPx, he.heightPx, heMpp) });
    await finishPredictionStore({ sink, layout: result.layout, statistics: result.statistics });
    const checked = await runPythonJson<{
      errors: Record<string, string[]>;
      values: Record<string, number[]>;
    }>(
      `
import json, pathlib, sys
import numpy as np, zarr
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
schema_dir, store = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
schemas = {p.name: json.loads(p.read_text()) for p in schema_dir.glob('*.schema')}
registry = Registry().with_resources((s['$id'], Resource.from_contents(s, default_specification=DRAFT202012)) for s in schemas.values())
errors = {}
for path in sorted(store.rglob('zarr.json')):
    doc = json.loads(path.read_text())
    if doc['node_type'] != 'group':
        continue
    if 'ome' not in doc['attributes']:
        # A plain group (markers/): present so the tree is navigable, and nothing more.
        errors[str(path.relative_to(store))] = [] if doc['attributes'] == {} else ['a plain group with attributes']
        continue
    problems = []
    for name in ('image.schema', 'strict_image.schema'):
        validator = Draft202012Validator(schemas[name], registry=registry)
        problems += [f'{name}: {e.message}' for e in validator.iter_errors(doc['attributes'])]
    errors[str(path.relative_to(store))] = problems
group = zarr.open_group(str(store), mode='r')
values = {}
for ms in group.attrs['ome']['multiscales']:
    for d in ms['datasets']:
        a = group[d['path']]
        assert a.dtype == np.uint16 and a.shape[0] == 1, (d['path'], a.dtype, a.shape)
        values[d['path']] = a[0, 300:340, 500:560].ravel().tolist() if d['path'].endswith('/0') else [int(a[:].sum())]
print(json.dumps({'errors': errors, 'values': values}))
`,
      [schemaDir, root],
    );
    expect(checked.errors).toEqual({
      'zarr.json': [],
      'markers/zarr.json': [],
      'markers/DAPI/zarr.json': [],
      'markers/PanCK/zarr.json': [],
      'markers/aSMA/zarr.json': [],
    });
    for (const marker of ['DAPI', 'PanCK', 'aSMA']) {
      const read = await readWithZarrita(root, `markers/${marker}/0`, [null, [300, 340], [500, 560]]);
      expect(read.dtype).toBe('uint16');
      expect(Array.from(stored(read.data))).toEqual(checked.values[`markers/${marker}/0`]);
    }
    // The stated scale and the statistics in the model's units; the layout reads back from it.
    const attributes = JSON.parse((await sink.get('zarr.json'))!.toString()).attributes.prediction;
    expect(attributes.valueScale).toEqual({ scale: 1 / 65535, offset: 0 });
    const dapi = attributes.statistics.DAPI;
    expect(dapi.min).toBeGreaterThanOrEqual(0);
    expect(dapi.max).toBeLessThanOrEqual(1);
    expect(dapi.mean).toBeCloseTo(result.statistics.DAPI!.sum / result.statistics.DAPI!.count / 65535, 12);
    const group = JSON.parse((await sink.get('markers/DAPI/zarr.json'))!.toString()).attributes;
    expect(group.prediction.valueScale).toEqual({ scale: 1 / 65535, offset: 0 });
    expect(group.ome.omero.channels[0].window.max).toBe(result.statistics.DAPI!.max);
    expect(await readPredictionLayout(sink)).toEqual(result.layout);
    const levels = Object.keys(checked.values).filter((k) => k.startsWith('markers/DAPI/'));
    expect(levels).toEqual(['markers/DAPI/0', 'markers/DAPI/1', 'markers/DAPI/2', 'markers/DAPI/3']);
    expect(result.layout.heLevel).toBe(0);
  }, 240_000);
});
