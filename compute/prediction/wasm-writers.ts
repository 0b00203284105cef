import type { ShardExtent, ShardGeometry, ZstdFraming } from '../zarr';
import type { PlaneSums } from './kernels';
import type { PixelRect } from './plan';
import { InputKernel, PlaneMemory, planeWasmFound } from './plane-kernel';
import type {
  Downsample,
  ParentQuadrant,
  PlaneWriteResult,
  PlaneWriters,
  PlaneWritersOptions,
} from './plane-writers';
import { startWorker } from './worker-entry';

/**
 * The plane writers as WebAssembly kernels (plane-kernel.ts) on worker threads
 * (plane-writer-worker.ts), so that writing fourteen planes a tile and encoding the shards runs
 * beside the inference and beside each other instead of on the one thread that also reads the
 * H&E and stores shards. Writer `w` owns the markers `m` with `m % threads === w`: each marker's
 * buffer and histogram have one writer, so no two threads touch the same bytes.
 *
 * WebAssembly works only in its own memory, so every buffer handed out here is allocated in one
 * shared `PlaneMemory`: the model reads its inputs and writes its answers there, the writers
 * read the planes in place, and a message carries views of that memory, never pixels.
 */

/** What each writer thread is started with. */
export interface WriterData {
  memory: PlaneMemory['memory'];
  writer: number;
  writers: number;
  geometry: ShardGeometry;
  /** The markers this writer owns. */
  markers: number[];
  tile: number;
  bins: number;
  range: [number, number];
}

/** Views of the shared memory and plain values only: nothing large is copied. */
export type WriterRequest =
  | {
      kind: 'write';
      id: number;
      source: Float32Array;
      bases: number[];
      /** `x0, y0, x1, y1` per position. */
      squares: Int32Array;
      channels: number[];
      clip: PixelRect;
      shards: Uint16Array[];
    }
  | { kind: 'fill'; id: number; value: number; rects: PixelRect[]; clip: PixelRect; shards: Uint16Array[] }
  | {
      kind: 'encode';
      id: number;
      shard: Uint16Array;
      extent: ShardExtent;
      level: number;
      knownFill: number[];
      framing: ZstdFraming;
      average: ParentQuadrant | undefined;
    }
  | { kind: 'downsample'; id: number; child: Uint16Array; parent: Uint16Array; into: Downsample };

export type WriterReply =
  /** Per position and owned marker `count, min, max, sum`; per owned marker its bins. */
  | { kind: 'written'; id: number; sums: Float64Array; histograms: Uint32Array }
  | { kind: 'filled'; id: number }
  | { kind: 'encoded'; id: number; bytes: Uint8Array | undefined }
  | { kind: 'downsampled'; id: number }
  | { kind: 'error'; id: number; error: string };

type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;
type Request = WithoutId<WriterRequest>;

/** Whether these writers run here: shared WebAssembly memory, and plane.wasm built. */
export function webAssemblyRuns(): boolean {
  return PlaneMemory.supported() && planeWasmFound();
}

export function wasmWriters(options: PlaneWritersOptions): PlaneWriters {
  const count = Math.max(1, Math.min(options.threads, options.markers));
  const owned = Array.from({ length: count }, (_, w) =>
    Array.from({ length: options.markers }, (_, m) => m).filter((m) => m % count === w),
  );
  const memory = new PlaneMemory(options.tile, options.bins, count);
  const input = new InputKernel(memory, options.inputSide);
  const pending = new Map<number, (reply: WriterReply) => void>();
  let broken: Error | undefined;
  const workers = owned.map((markers, w) => {
    const workerData: WriterData = {
      memory: memory.memory,
      writer: w,
      writers: count,
      geometry: { ...options.geometry },
      markers,
      tile: options.tile,
      bins: options.bins,
      range: [options.range[0], options.range[1]],
    };
    const worker = startWorker('plane-writer-worker', { workerData });
    worker.on('message', (reply: WriterReply) => {
      const settle = pending.get(reply.id);
      pending.delete(reply.id);
      settle?.(reply);
    });
    const fail = (err: Error) => {
      broken ??= err;
      for (const settle of pending.values()) settle({ kind: 'error', id: -1, error: err.message });
      pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`plane writer exited (${code})`)));
    return worker;
  });
  let next = 0;
  const ask = (w: number, request: Request): Promise<WriterReply> => {
    if (broken) return Promise.reject(broken);
    const id = next++;
    return new Promise((resolve, reject) => {
      pending.set(id, (reply) => (reply.kind === 'error' ? reject(new Error(reply.error)) : resolve(reply)));
      workers[w]!.postMessage({ ...request, id } as WriterRequest);
    });
  };
  const g = options.geometry;
  return {
    inputBuffer: (length) => memory.planeBuffer(length),
    planeBuffer: (length) => memory.planeBuffer(length),
    shardBuffers: () =>
      Array.from({ length: options.markers }, () =>
        memory.shardBuffer(g.chunksY * g.chunksX * g.chunkLength),
      ),
    fillInput: (region, regionX, regionY, ys, xs, into, offset) =>
      input.fill(region, regionX, regionY, ys, xs, into, offset),
    async fill(clip, rects, shards, value) {
      if (rects.length === 0) return;
      const request: Request = {
        kind: 'fill',
        value,
        rects: rects.map((r) => ({ ...r })),
        clip: { ...clip },
        shards: [...shards],
      };
      await Promise.all(workers.map((_, w) => ask(w, request)));
    },
    async write(job) {
      const squares = new Int32Array(job.squares.length * 4);
      for (const [k, sq] of job.squares.entries()) squares.set([sq.x0, sq.y0, sq.x1, sq.y1], 4 * k);
      const request: Request = {
        kind: 'write',
        source: job.source,
        bases: [...job.bases],
        squares,
        channels: [...job.channels],
        clip: { ...job.clip },
        shards: [...job.shards],
      };
      const replies = await Promise.all(workers.map((_, w) => ask(w, request)));
      const result: PlaneWriteResult = {
        sums: job.bases.map(() => new Array<PlaneSums>(options.markers)),
        histograms: new Array<Uint32Array>(options.markers),
      };
      replies.forEach((reply, w) => {
        if (reply.kind !== 'written') throw new Error(`plane writer answered ${reply.kind} to a write`);
        const mine = owned[w]!;
        mine.forEach((m, j) => {
          result.histograms[m] = reply.histograms.subarray(j * options.bins, (j + 1) * options.bins);
          job.bases.forEach((_, k) => {
            const at = (k * mine.length + j) * 4;
            const s = reply.sums;
            result.sums[k]![m] = { count: s[at]!, min: s[at + 1]!, max: s[at + 2]!, sum: s[at + 3]! };
          });
        });
      });
      return result;
    },
    async encode(marker, shard, extent, level, knownFill, framing, average) {
      if (!(shard instanceof Uint16Array)) throw new TypeError('plane writers encode uint16 shards');
      const reply = await ask(marker % count, {
        kind: 'encode',
        shard,
        extent: { ...extent },
        level,
        knownFill: [...knownFill],
        framing,
        average: average && { ...average },
      });
      if (reply.kind !== 'encoded') throw new Error(`plane writer answered ${reply.kind} to an encode`);
      return reply.bytes;
    },
    async downsample(marker, child, parent, into) {
      const reply = await ask(marker % count, {
        kind: 'downsample',
        child,
        parent,
        into: { ...into, knownFill: [...into.knownFill] },
      });
      if (reply.kind !== 'downsampled')
        throw new Error(`plane writer answered ${reply.kind} to a downsample`);
    },
    async close() {
      await Promise.all(workers.map((worker) => worker.terminate()));
    },
  };
}
