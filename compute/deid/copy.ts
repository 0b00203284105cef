import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { ByteSource } from '../source';
import { depthFirst, type Layout } from './layout';

/** Adjacent tiles are read together up to this size: few reads, flat memory. */
const maxRunBytes = 8 << 20;

/** Writes a chunk and waits while the sink is full, so memory stays flat whatever the sink's speed. */
export async function writeChunk(sink: Writable, chunk: Uint8Array, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  if (!sink.write(chunk)) await once(sink, 'drain', { signal });
}

interface Run {
  offset: number;
  length: number;
}

/** Contiguous source ranges in output order: tiles stored back to back are read in one go. */
function* runs(offsets: readonly number[], counts: readonly number[]): Generator<Run> {
  let run: Run | undefined;
  for (let i = 0; i < counts.length; i++) {
    const length = counts[i] ?? 0;
    const offset = offsets[i] ?? 0;
    if (length === 0) continue;
    if (run !== undefined && run.offset + run.length === offset && run.length + length <= maxRunBytes) {
      run.length += length;
      continue;
    }
    if (run !== undefined) yield run;
    run = { offset, length };
  }
  if (run !== undefined) yield run;
}

/** Copies every kept tile's bytes unchanged, in the order the layout gave them offsets. */
export async function copyBlocks(source: ByteSource, layout: Layout, sink: Writable, signal?: AbortSignal) {
  for (const ifd of depthFirst(layout.roots)) {
    for (const run of runs(ifd.plan.blockOffsets, ifd.plan.blockCounts)) {
      await writeChunk(sink, await source.read(run.offset, run.length, signal), signal);
    }
  }
}
