import type { Worker } from 'node:worker_threads';
import { startWorker } from '../prediction/worker-entry';
import { outlineTile, type TileOutlineJob, type TileOutlines } from './tile-outlines';

/**
 * Traces tiles (`outlineTile`) as they are handed over and gives the results back in the same
 * order. With `threads` 0 each tile is traced on the calling thread when it is submitted: the
 * plain reference the pool is tested against. Otherwise a pool of worker threads traces them,
 * each tile on the next worker in turn; the caller bounds the tiles in flight (`pending`).
 */
export interface TileOutliner {
  /** Hands a tile over (the job's arrays are copied: the caller may reuse them). */
  submit(job: TileOutlineJob): Promise<void>;
  /** The oldest tile not yet taken, traced; undefined when none is in flight. */
  next(): Promise<TileOutlines | undefined>;
  /** Tiles submitted and not yet taken. */
  readonly pending: number;
  close(): Promise<void>;
}

export function tileOutliner(threads: number): TileOutliner {
  return threads > 0 ? new WorkerOutliner(threads) : new InlineOutliner();
}

class InlineOutliner implements TileOutliner {
  private readonly done: TileOutlines[] = [];

  get pending(): number {
    return this.done.length;
  }

  async submit(job: TileOutlineJob): Promise<void> {
    this.done.push(outlineTile(job));
  }

  async next(): Promise<TileOutlines | undefined> {
    return this.done.shift();
  }

  async close(): Promise<void> {}
}

interface Slot {
  promise: Promise<TileOutlines>;
  resolve(outlines: TileOutlines): void;
  reject(err: Error): void;
}

class WorkerOutliner implements TileOutliner {
  private readonly workers: Worker[] = [];
  /** Results in submission order; a tile's slot settles when its worker answers. */
  private readonly slots: Slot[] = [];
  private readonly byId = new Map<number, Slot>();
  private nextId = 0;
  private failure: Error | undefined;

  constructor(private readonly threads: number) {
    for (let i = 0; i < threads; i++) {
      const worker = startWorker('outlines-worker', {}, __dirname);
      worker.on('message', (message: { id: number; outlines?: TileOutlines; error?: string }) => {
        const slot = this.byId.get(message.id)!;
        this.byId.delete(message.id);
        if (message.outlines) slot.resolve(message.outlines);
        else slot.reject(new Error(`outline worker: ${message.error}`));
      });
      worker.on('error', (err) => this.fail(err));
      worker.on('exit', (code) => this.fail(new Error(`an outline worker exited (${code})`)));
      this.workers.push(worker);
    }
  }

  get pending(): number {
    return this.slots.length;
  }

  async submit(job: TileOutlineJob): Promise<void> {
    if (this.failure) throw this.failure;
    const id = this.nextId++;
    let slot!: Slot;
    const promise = new Promise<TileOutlines>((resolve, reject) => {
      slot = { promise: undefined as never, resolve, reject };
    });
    slot.promise = promise;
    // Settled results are taken with `next`; an unhandled rejection here would be reported twice.
    promise.catch(() => undefined);
    this.byId.set(id, slot);
    this.slots.push(slot);
    // Copies the worker owns (the caller's arrays may be views of buffers it keeps), moved there.
    const labels = job.labels.slice();
    const boxes = job.boxes.slice();
    const nuclei = job.nuclei && { runStart: job.nuclei.runStart.slice(), runs: job.nuclei.runs.slice() };
    const moved = [labels, boxes, ...(nuclei ? [nuclei.runStart, nuclei.runs] : [])];
    // Tiles go round the workers in turn: they are alike in size, so the load evens out.
    this.workers[id % this.threads]!.postMessage(
      { id, job: { ...job, labels, boxes, nuclei } },
      moved.map((array) => array.buffer as ArrayBuffer),
    );
  }

  async next(): Promise<TileOutlines | undefined> {
    const slot = this.slots.shift();
    return slot?.promise;
  }

  async close(): Promise<void> {
    this.failure ??= new Error('the outline pool is closed');
    await Promise.all(this.workers.map((worker) => worker.terminate()));
  }

  private fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    for (const slot of this.byId.values()) slot.reject(err);
    this.byId.clear();
  }
}
