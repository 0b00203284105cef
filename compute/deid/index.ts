import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { detectVendor, slideLayout } from '../slide';
import type { ByteSource } from '../source';
import { openTiff } from '../tiff';
import { copyBlocks, writeChunk } from './copy';
import { encodeMetadata, layOut } from './layout';
import { type DroppedImage, planDeid } from './plan';

export type { DroppedImage } from './plan';

export interface DeidReport {
  /** Images left out of the copy (labels, macros, anything that is neither a level nor a thumbnail). */
  droppedImages: DroppedImage[];
  /** Names (or numbers) of TIFF tags dropped from the kept IFDs. */
  droppedTags: string[];
  /** Description parts removed: `aperio.Filename`, `ome.AcquisitionDate`, or `ImageDescription`. */
  scrubbed: string[];
  bigTiff: boolean;
  bytesWritten: number;
}

export interface DeidOptions {
  signal?: AbortSignal;
  /** Write BigTIFF even when the copy would fit in classic TIFF (it is chosen anyway past 4 GiB). */
  bigTiff?: boolean;
}

/**
 * Writes a de-identified copy of a TIFF-family slide to `sink` and ends it. Levels (and the
 * thumbnail) keep their tile bytes exactly; labels, macros, identifying tags and description
 * keys are dropped. Every offset is computed before the first byte is written, so the copy is
 * one forward pass and memory grows with the number of tiles, never with their size.
 * On failure the sink is destroyed with the error (so an upload fed by it fails too).
 */
export async function deidentifyTiff(
  source: ByteSource,
  sink: Writable,
  options: DeidOptions = {},
): Promise<DeidReport> {
  try {
    return await writeCopy(source, sink, options);
  } catch (err) {
    // A half-written copy must not pass for a whole one downstream (an object store upload).
    sink.destroy(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
}

async function writeCopy(
  source: ByteSource,
  sink: Writable,
  { signal, bigTiff }: DeidOptions,
): Promise<DeidReport> {
  const tiff = await openTiff(source, { signal });
  const vendor = detectVendor(tiff);
  const plan = await planDeid(tiff, slideLayout(tiff, vendor), vendor, signal);
  const layout = layOut(plan.roots, {
    bigTiff: bigTiff === true || tiff.bigTiff,
    littleEndian: tiff.littleEndian,
  });
  await writeChunk(sink, encodeMetadata(layout), signal);
  await copyBlocks(source, layout, sink, signal);
  sink.end();
  await finished(sink);
  return {
    droppedImages: plan.droppedImages,
    droppedTags: [...plan.droppedTags].sort(),
    scrubbed: [...plan.scrubbed].sort(),
    bigTiff: layout.kind.bigTiff,
    bytesWritten: layout.size,
  };
}
