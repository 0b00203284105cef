import type { InferenceSession } from 'onnxruntime-node';
import { ComputeError } from '../errors';
import { startWorker } from './worker-entry';

/**
 * onnxruntime-node runs a batch synchronously on the thread that calls it. Hosting the session
 * on a worker thread (session-worker.ts) frees the main thread to read, resample and write the
 * batches around the one being inferred.
 */

/** What the session worker is started with. */
export interface SessionWorkerData {
  path: string;
  options: InferenceSession.SessionOptions;
}

/** A buffer on a `SharedArrayBuffer` that the answer is written into, and the answer's shape. */
export interface SharedOutput {
  into: Float32Array;
  dims: readonly number[];
}

/** One batch, `[N, 3, S, S]`; with `output`, answered in place. */
export interface SessionRequest {
  id: number;
  input: Float32Array;
  dims: number[];
  output?: { into: Float32Array; dims: number[] };
}

export type SessionReply =
  | { kind: 'ready'; inputs: string[]; outputs: string[] }
  | { kind: 'failed'; error: string }
  | { kind: 'answered'; id: number }
  /** `data` null: the model answered no float32 tensor. */
  | { kind: 'answer'; id: number; data: Float32Array | null }
  | { kind: 'error'; id: number; error: string };

interface Pending {
  resolve: (data: Float32Array) => void;
  reject: (err: Error) => void;
  /** The caller's shared buffer the answer was written into. */
  output?: Float32Array;
}

/**
 * Runs `[N, 3, S, S]` batches of one ONNX file on a worker thread, one at a time, in order.
 * With `output`, the answer is written into its shared buffer, which is the answer.
 */
export interface WorkerRunner {
  run(input: Float32Array, dims: readonly number[], output?: SharedOutput): Promise<Float32Array>;
  /** Ends the thread and its session; a batch still running is refused. */
  close(): Promise<void>;
}

export function startWorkerRunner(
  onnxPath: string,
  options: InferenceSession.SessionOptions,
): Promise<WorkerRunner> {
  const workerData: SessionWorkerData = { path: onnxPath, options };
  const worker = startWorker('session-worker', { workerData });
  const pending = new Map<number, Pending>();
  let next = 0;
  let broken: Error | undefined;
  const fail = (err: Error) => {
    broken = err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  worker.on('error', (err) => fail(err));
  worker.on('exit', (code) => fail(new Error(`inference worker exited (${code})`)));
  const runner: WorkerRunner = {
    run(input, dims, output) {
      if (broken) return Promise.reject(broken);
      const id = next++;
      return new Promise<Float32Array>((resolve, reject) => {
        if (pending.size === 0) worker.ref();
        pending.set(id, { resolve, reject, output: output?.into });
        // Copied (or shared), not transferred: the caller may retry the same input tile by tile.
        const request: SessionRequest = {
          id,
          input,
          dims: [...dims],
          output: output && { into: output.into, dims: [...output.dims] },
        };
        worker.postMessage(request);
      });
    },
    async close() {
      await worker.terminate();
    },
  };
  return new Promise<WorkerRunner>((resolve, reject) => {
    worker.on('message', (message: SessionReply) => {
      switch (message.kind) {
        case 'failed':
          reject(new ComputeError('UnsupportedModel', `${onnxPath}: ${message.error}`));
          void worker.terminate();
          return;
        case 'ready':
          if (message.inputs.length !== 1 || message.outputs.length !== 1) {
            reject(new ComputeError('UnsupportedModel', `${onnxPath}: one input and one output expected`));
            void worker.terminate();
            return;
          }
          // An idle session must not keep a script's process alive; a pending batch must.
          worker.unref();
          resolve(runner);
          return;
        default: {
          const waiting = pending.get(message.id);
          pending.delete(message.id);
          if (pending.size === 0) worker.unref();
          if (!waiting) return;
          if (message.kind === 'error') {
            waiting.reject(new Error(message.error));
            return;
          }
          const answer = message.kind === 'answer' ? message.data : waiting.output;
          if (answer) waiting.resolve(answer);
          else waiting.reject(new ComputeError('UnsupportedModel', `${onnxPath} answered no float32 tensor`));
        }
      }
    });
  });
}
