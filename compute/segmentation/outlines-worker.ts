import { parentPort } from 'node:worker_threads';
import { outlineTile, type TileOutlineJob, transferables } from './tile-outlines';

/** A worker thread of the outline pool (outline-pool.ts): traces the tiles it is sent, in turn. */
parentPort!.on('message', ({ id, job }: { id: number; job: TileOutlineJob }) => {
  try {
    const outlines = outlineTile(job);
    parentPort!.postMessage({ id, outlines }, transferables(outlines));
  } catch (err) {
    parentPort!.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
