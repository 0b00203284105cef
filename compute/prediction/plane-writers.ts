import { Worker } from 'node:worker_threads';
import type { ShardExtent, ShardGeometry, TypedArray } from '../zarr';
import type { PlaneSums } from './kernels';
import type { PixelRect } from './plan';
import { InputKernel, PlaneMemory } from './plane-kernel';

/**
 * Threads that write the model's output planes into a shard's buffers (`PlaneKernel.writePlane`:
 * resample, store as uint16 into the chunk, statistics) and set the rest to the fill value
 * (`fillRect`), and that encode the finished shards (zstd, `encodeShardSync`), so that this
 * work, fourteen planes a tile, runs beside the inference and beside each other instead of on the
 * one thread that also reads the H&E and stores shards. Writer `w` owns the markers `m` with
 * `m % count === w`: each marker's buffer and histogram have one writer, so no two threads touch
 * the same bytes.
 *
 * A writer's kernel is WebAssembly, which works only in its own memory: the writers share one
 * `PlaneMemory`, and the shard buffers (`shardBuffers`) and the planes they read (the model's
 * outputs, `planeBuffer`) are allocated in it: a message carries handles, never pixels. The worker
 * runs the compiled .js beside this file; under Jest, which runs the TypeScript sources, it
 * compiles them with @swc/core as Jest itself does.
 */
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
if (workerData.kernels.endsWith('.ts')) {
  const { readFileSync } = require('node:fs');
  const swc = require('@swc/core');
  require.extensions['.ts'] = (module, file) => {
    const { code } = swc.transformSync(readFileSync(file, 'utf8'), {
      filename: file,
      jsc: { target: 'es2023', parser: { syntax: 'typescript' } },
      module: { type: 'commonjs' },
    });
    module._compile(code, file);
  };
}
const { outputSamples } = require(workerData.kernels);
const { encodeShardSync } = require(workerData.zarr);
const { PlaneKernel } = require(workerData.planeKernel);
const { geometry, markers, tile, bins, range, memory, writer, writers } = workerData;
const kernel = new PlaneKernel({ memory, tile, bins, writers }, geometry, writer);
const samples = new Map();
const samplesOf = (length) => {
  let s = samples.get(length);
  if (!s) samples.set(length, (s = outputSamples(length, tile)));
  return s;
};
parentPort.on('message', ({ id, encode, fill, rects, source, bases, squares, channels, clip, shards, shardX, shardY }) => {
  try {
    if (encode !== undefined) {
      const bytes = encodeShardSync(geometry, encode.shard, encode.extent, encode.level, encode.knownFill);
      parentPort.postMessage({ id, bytes }, bytes ? [bytes.buffer] : []);
      return;
    }
    if (fill !== undefined) {
      for (const m of markers) for (const rect of rects) kernel.fillRect(shards[m], shardX, shardY, rect, fill);
      parentPort.postMessage({ id });
      return;
    }
    const count = bases.length;
    const sums = new Float64Array(count * markers.length * 4);
    const histograms = new Uint32Array(markers.length * bins);
    for (let k = 0; k < count; k++) {
      const sq = { x0: squares[4 * k], y0: squares[4 * k + 1], x1: squares[4 * k + 2], y1: squares[4 * k + 3] };
      const ys = samplesOf(sq.y1 - sq.y0);
      const xs = samplesOf(sq.x1 - sq.x0);
      markers.forEach((m, j) => {
        const s = kernel.writePlane(source, bases[k] + channels[m] * tile * tile, sq, ys, xs, clip,
          shards[m], shardX, shardY, histograms.subarray(j * bins, (j + 1) * bins), range);
        sums.set([s.count, s.min, s.max, s.sum], (k * markers.length + j) * 4);
      });
    }
    parentPort.postMessage({ id, sums, histograms }, [sums.buffer, histograms.buffer]);
  } catch (e) {
    parentPort.postMessage({ id, error: String((e && e.stack) || e) });
  }
});
`;

/** Output planes of several positions in one shared buffer, each written into one shard. */
export interface PlaneWrite {
  /** From `planeBuffer`: position k's plane of marker m starts at `bases[k] + channels[m] * T * T`. */
  source: Float32Array;
  bases: readonly number[];
  squares: readonly PixelRect[];
  /** Per stored marker, its channel in `source`. */
  channels: readonly number[];
  /** The shard's pixels, and its buffers (one per marker, from `shardBuffers`). */
  clip: PixelRect;
  shards: readonly Uint16Array[];
}

/** Per position (in `bases` order) and marker: what was written; histograms added per marker. */
export interface PlaneWriteResult {
  sums: PlaneSums[][];
  histograms: Uint32Array[];
}

export interface PlaneWriters {
  /** Buffers of `length` values for one shard, one per marker, in the writers' memory. */
  shardBuffers(length: number): Uint16Array[];
  /**
   * A buffer of `length` floats in the writers' memory, for planes they read (`PlaneWrite.source`)
   * and for model inputs that an `inputKernel` fills.
   */
  planeBuffer(length: number): Float32Array;
  /** The model-input fill on the writers' memory, for the calling thread (inputs `side` px a side). */
  inputKernel(side: number): InputKernel;
  /**
   * Sets `rects` (level pixels inside the shard at `clip`) of the shard buffers (one per marker)
   * to `value`; ordered with the writes, as every message is.
   */
  fill(
    clip: PixelRect,
    rects: readonly PixelRect[],
    shards: readonly Uint16Array[],
    value: number,
  ): Promise<void>;
  write(job: PlaneWrite): Promise<PlaneWriteResult>;
  /**
   * Marker `marker`'s shard buffer encoded by its writer (compute/zarr `encodeShardSync`), after
   * the writes and fills before it, the chunks `knownFill` left out unread; `undefined` when it
   * holds only the fill value.
   */
  encode(
    marker: number,
    shard: TypedArray,
    extent: ShardExtent,
    level: number,
    knownFill: readonly number[],
  ): Promise<Uint8Array | undefined>;
  close(): Promise<void>;
}

export interface PlaneWritersOptions {
  count: number;
  markers: number;
  geometry: ShardGeometry;
  tile: number;
  bins: number;
  range: readonly [number, number];
}

interface Reply {
  id: number;
  sums?: Float64Array;
  histograms?: Uint32Array;
  bytes?: Uint8Array;
  error?: string;
}

export function startPlaneWriters(options: PlaneWritersOptions): PlaneWriters {
  const count = Math.max(1, Math.min(options.count, options.markers));
  const owned = Array.from({ length: count }, (_, w) =>
    Array.from({ length: options.markers }, (_, m) => m).filter((m) => m % count === w),
  );
  const memory = new PlaneMemory(options.tile, options.bins, count);
  const pending = new Map<number, (reply: Reply) => void>();
  let broken: Error | undefined;
  const workers = owned.map((markers, w) => {
    const worker = new Worker(workerSource, {
      eval: true,
      workerData: {
        kernels: require.resolve('./kernels'),
        planeKernel: require.resolve('./plane-kernel'),
        zarr: require.resolve('../zarr'),
        memory: memory.memory,
        writer: w,
        writers: count,
        geometry: { ...options.geometry },
        markers,
        tile: options.tile,
        bins: options.bins,
        range: [...options.range],
      },
    });
    worker.on('message', (reply: Reply) => {
      const settle = pending.get(reply.id);
      pending.delete(reply.id);
      settle?.(reply);
    });
    const fail = (err: Error) => {
      broken ??= err;
      for (const settle of pending.values()) settle({ id: -1, error: err.message });
      pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`plane writer exited (${code})`)));
    return worker;
  });
  let next = 0;
  const ask = (w: number, message: Record<string, unknown>): Promise<Reply> => {
    if (broken) return Promise.reject(broken);
    const id = next++;
    return new Promise((resolve, reject) => {
      pending.set(id, (reply) =>
        reply.error === undefined ? resolve(reply) : reject(new Error(reply.error)),
      );
      workers[w]!.postMessage({ id, ...message });
    });
  };
  return {
    shardBuffers(length) {
      return Array.from({ length: options.markers }, () => memory.shardBuffer(length));
    },
    planeBuffer: (length) => memory.planeBuffer(length),
    inputKernel: (side) => new InputKernel(memory, side),
    async fill(clip, rects, shards, value) {
      if (rects.length === 0) return;
      const message = {
        fill: value,
        rects: rects.map((r) => ({ ...r })),
        shards: [...shards],
        shardX: clip.x0,
        shardY: clip.y0,
      };
      await Promise.all(workers.map((_, w) => ask(w, message)));
    },
    async write(job) {
      const squares = new Int32Array(job.squares.length * 4);
      for (const [k, sq] of job.squares.entries()) squares.set([sq.x0, sq.y0, sq.x1, sq.y1], 4 * k);
      const message = {
        source: job.source,
        bases: [...job.bases],
        squares,
        channels: [...job.channels],
        clip: { ...job.clip },
        shards: [...job.shards],
        shardX: job.clip.x0,
        shardY: job.clip.y0,
      };
      const replies = await Promise.all(workers.map((_, w) => ask(w, message)));
      const result: PlaneWriteResult = {
        sums: job.bases.map(() => new Array<PlaneSums>(options.markers)),
        histograms: new Array<Uint32Array>(options.markers),
      };
      replies.forEach((reply, w) => {
        owned[w]!.forEach((m, j) => {
          result.histograms[m] = reply.histograms!.subarray(j * options.bins, (j + 1) * options.bins);
          job.bases.forEach((_, k) => {
            const at = (k * owned[w]!.length + j) * 4;
            const s = reply.sums!;
            result.sums[k]![m] = { count: s[at]!, min: s[at + 1]!, max: s[at + 2]!, sum: s[at + 3]! };
          });
        });
      });
      return result;
    },
    async encode(marker, shard, extent, level, knownFill) {
      const reply = await ask(marker % count, {
        encode: { shard, extent: { ...extent }, level, knownFill: [...knownFill] },
      });
      return reply.bytes;
    },
    async close() {
      await Promise.all(workers.map((worker) => worker.terminate()));
    },
  };
}
