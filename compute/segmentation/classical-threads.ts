import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import type { RgbImage } from '../image';
import { startWorker } from '../prediction/worker-entry';
import type { ClassicalOptions, SlideStain } from './classical';
import type { ClassicalTileJob } from './classical-worker';
import type { TileSegmentation } from './types';

/**
 * Worker threads that run `segmentClassical`, shared by every segmenter of the process. A tile
 * takes seconds of CPU: segmented on the calling thread, it holds the event loop that every
 * other activity of a worker process runs on (a prediction band's reads, batches and writes, its
 * heartbeats). A thread is started when a tile finds none idle, up to the cores; an idle thread
 * keeps no process alive.
 */
class ClassicalThreads {
  private readonly idle: Worker[] = [];
  private readonly waiting: ((worker: Worker) => void)[] = [];
  private readonly all = new Set<Worker>();
  private nextId = 0;

  async segment(tile: RgbImage, mpp: number, options: ClassicalOptions, stain?: SlideStain) {
    const worker = await this.take();
    try {
      return await this.ask(worker, { id: this.nextId++, tile, mpp, options, stain });
    } finally {
      this.give(worker);
    }
  }

  async close(): Promise<void> {
    const workers = [...this.all];
    this.all.clear();
    this.idle.length = 0;
    await Promise.all(workers.map((worker) => worker.terminate()));
  }

  private take(): Promise<Worker> {
    const worker = this.idle.pop();
    if (worker) return Promise.resolve(worker);
    if (this.all.size < availableParallelism()) return Promise.resolve(this.start());
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private start(): Worker {
    const worker = startWorker('classical-worker', {}, __dirname);
    this.all.add(worker);
    worker.once('exit', () => this.all.delete(worker));
    return worker;
  }

  /** Back to the pool, or to the next tile waiting; a thread that failed is replaced for it. */
  private give(worker: Worker): void {
    const next = this.waiting.shift();
    if (!this.all.has(worker)) {
      next?.(this.start());
      return;
    }
    if (next) {
      next(worker);
      return;
    }
    worker.unref();
    this.idle.push(worker);
  }

  /** The tile's labels from `worker`; its pixels are copied there (the caller keeps its image). */
  private ask(worker: Worker, job: ClassicalTileJob): Promise<TileSegmentation> {
    worker.ref();
    return new Promise((resolve, reject) => {
      const cleanUp = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const onMessage = (answer: { id: number; segmentation?: TileSegmentation; error?: string }) => {
        if (answer.id !== job.id) return;
        cleanUp();
        if (answer.segmentation) resolve(answer.segmentation);
        else reject(new Error(`classical segmenter thread: ${answer.error}`));
      };
      const onError = (err: Error) => {
        cleanUp();
        this.all.delete(worker);
        reject(err);
      };
      const onExit = (code: number) => onError(new Error(`a classical segmenter thread exited (${code})`));
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
      worker.postMessage(job);
    });
  }
}

let threads: ClassicalThreads | undefined;

/** `segmentClassical` on a worker thread of the process's pool. */
export function segmentClassicalOnThread(
  tile: RgbImage,
  mpp: number,
  options: ClassicalOptions,
  stain?: SlideStain,
): Promise<TileSegmentation> {
  threads ??= new ClassicalThreads();
  return threads.segment(tile, mpp, options, stain);
}

/**
 * Ends the pool's threads (a worker process that stops, a test file that is done); the next tile
 * starts new ones.
 */
export async function closeClassicalThreads(): Promise<void> {
  const open = threads;
  threads = undefined;
  await open?.close();
}
