import { rm, stat } from 'node:fs/promises';
import { startWorker } from '../prediction/worker-entry';

/**
 * `cells.h5ad`: a segmentation layer's per-cell tables as one AnnData file, the form scanpy and
 * squidpy open. `X` is cells x markers (mean expression, float32; `layers['median']` the
 * medians), `obs` the instance table's morphology and geometry indexed by `instance_id` as a
 * string, `var` the marker names, `obsm['spatial']` the centroids in microns (x, y), `uns` the
 * scale (`mpp`) and `provenance`. Read from the Parquet tables, so both always agree.
 */
export interface CellsH5adOptions {
  /** Local file to write (replaced whole; removed again if the write fails). */
  path: string;
  /** Local `instances.parquet` of the layer. */
  instances: string;
  /** Local marker tables (`instance_id, mean, median, ...`), in the order of `var`. */
  markers: readonly { name: string; path: string }[];
  /** Microns per level-0 pixel. */
  mpp: number;
  /** Strings under `uns['provenance']` (layer, sample, prediction job, segmenter). */
  provenance: Record<string, string>;
  /** Rows per block read and appended. Default 65,536 (a Parquet row group). */
  blockRows?: number;
  signal?: AbortSignal;
  onProgress?: (progress: { rows: number; total: number }) => void;
}

/** What the worker thread is given (everything but the callbacks). */
export type CellsH5adJob = Required<Omit<CellsH5adOptions, 'signal' | 'onProgress'>>;

type WorkerMessage =
  | { type: 'progress'; rows: number; total: number }
  | { type: 'done'; rows: number }
  | { type: 'error'; message: string };

export async function writeCellsH5ad(
  options: CellsH5adOptions,
): Promise<{ rows: number; sizeBytes: number }> {
  const { signal, onProgress, ...rest } = options;
  signal?.throwIfAborted();
  const job: CellsH5adJob = { ...rest, markers: [...rest.markers], blockRows: rest.blockRows ?? 65_536 };
  const worker = startWorker('cells-h5ad-worker', { workerData: job }, __dirname);
  try {
    const rows = await new Promise<number>((resolve, reject) => {
      const abort = () => reject(signal!.reason);
      signal?.addEventListener('abort', abort, { once: true });
      worker.on('error', reject);
      worker.on('exit', (code) => reject(new Error(`the h5ad writer exited (${code}) before it finished`)));
      worker.on('message', (message: WorkerMessage) => {
        if (message.type === 'progress') onProgress?.(message);
        else if (message.type === 'done') resolve(message.rows);
        else reject(new Error(`cells.h5ad: ${message.message}`));
      });
    });
    return { rows, sizeBytes: (await stat(options.path)).size };
  } catch (err) {
    await rm(options.path, { force: true });
    throw err;
  } finally {
    await worker.terminate();
  }
}
