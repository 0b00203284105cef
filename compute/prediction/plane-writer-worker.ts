import { parentPort, workerData } from 'node:worker_threads';
import { encodeShardSync, type ShardExtent } from '../zarr';
import { outputSamplesOf, quadrantGaps } from './kernels';
import { PlaneKernel } from './plane-kernel';
import type { ParentQuadrant } from './plane-writers';
import type { WriterData, WriterReply, WriterRequest } from './wasm-writers';

/** A plane writer thread of wasm-writers.ts: its kernel on the shared memory, and its markers. */
const port = parentPort;
if (!port) throw new Error('plane-writer-worker runs on a worker thread');
const { geometry, markers, tile, bins, range, memory, writer, writers } = workerData as WriterData;
const kernel = new PlaneKernel({ memory, tile, bins, writers }, geometry, writer);
const samplesOf = outputSamplesOf(tile);

function handle(request: WriterRequest): [WriterReply, ArrayBuffer[]] {
  const { id } = request;
  switch (request.kind) {
    case 'encode': {
      const { shard, extent, level, knownFill, framing, average } = request;
      const afterChunk = average && averageInto(shard, average, extent, knownFill);
      const bytes = encodeShardSync(geometry, shard, extent, level, knownFill, framing, afterChunk);
      return [
        { kind: 'encoded', id, bytes },
        bytes && bytes.buffer instanceof ArrayBuffer ? [bytes.buffer] : [],
      ];
    }
    case 'downsample': {
      const { child, parent, into } = request;
      for (const gap of quadrantGaps(geometry, into, into.knownFill))
        kernel.fillRect(parent, 0, 0, gap, geometry.fillValue);
      kernel.downsample(child, parent, into, into.knownFill);
      return [{ kind: 'downsampled', id }, []];
    }
    case 'fill': {
      const { shards, clip, rects, value } = request;
      for (const m of markers)
        for (const rect of rects) kernel.fillRect(shards[m]!, clip.x0, clip.y0, rect, value);
      return [{ kind: 'filled', id }, []];
    }
    case 'write': {
      const { source, bases, squares, channels, clip, shards } = request;
      const sums = new Float64Array(bases.length * markers.length * 4);
      const histograms = new Uint32Array(markers.length * bins);
      bases.forEach((base, k) => {
        const sq = {
          x0: squares[4 * k]!,
          y0: squares[4 * k + 1]!,
          x1: squares[4 * k + 2]!,
          y1: squares[4 * k + 3]!,
        };
        const ys = samplesOf(sq.y1 - sq.y0);
        const xs = samplesOf(sq.x1 - sq.x0);
        markers.forEach((m, j) => {
          const histogram = histograms.subarray(j * bins, (j + 1) * bins);
          const offset = base + channels[m]! * tile * tile;
          const s = kernel.writePlane(
            source,
            offset,
            sq,
            ys,
            xs,
            clip,
            shards[m]!,
            clip.x0,
            clip.y0,
            histogram,
            range,
          );
          sums.set([s.count, s.min, s.max, s.sum], (k * markers.length + j) * 4);
        });
      });
      return [{ kind: 'written', id, sums, histograms }, [sums.buffer, histograms.buffer]];
    }
  }
}

/**
 * `shard`'s quadrant of its parent with its gaps set to the fill value, and the means of each
 * chunk the encode passes (`afterChunk`): those inside `extent` and not in `knownFill`, the
 * chunks the definition averages (`averagedChunk`).
 */
function averageInto(
  shard: Uint16Array,
  { parent, y, x }: ParentQuadrant,
  extent: ShardExtent,
  knownFill: readonly number[],
): (k: number) => void {
  const into = { y, x, validHeight: extent.height, validWidth: extent.width };
  for (const gap of quadrantGaps(geometry, into, knownFill))
    kernel.fillRect(parent, 0, 0, gap, geometry.fillValue);
  return (k) => kernel.downsampleChunk(shard, parent, into, k);
}

port.on('message', (request: WriterRequest) => {
  try {
    const [reply, transfer] = handle(request);
    port.postMessage(reply, transfer);
  } catch (e) {
    port.postMessage({ kind: 'error', id: request.id, error: String((e instanceof Error && e.stack) || e) });
  }
});
