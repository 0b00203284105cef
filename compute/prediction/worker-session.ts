import { Worker } from 'node:worker_threads';
import { ComputeError } from '../errors';

/**
 * onnxruntime-node runs a batch synchronously on the thread that calls it. Hosting the session
 * on a worker thread frees the main thread to read, resample and write the batches around the
 * one being inferred. The worker is plain JavaScript (eval), so it runs the same from the
 * TypeScript sources (tests) and from dist/.
 */
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ort);
const ready = ort.InferenceSession.create(workerData.path, workerData.options);
ready.then(
  (s) => parentPort.postMessage({ kind: 'ready', inputs: s.inputNames, outputs: s.outputNames }),
  (e) => parentPort.postMessage({ kind: 'failed', error: String((e && e.message) || e) }),
);
parentPort.on('message', async ({ id, input, dims, output }) => {
  try {
    const s = await ready;
    const feeds = { [s.inputNames[0]]: new ort.Tensor('float32', input, dims) };
    if (output) {
      // A shared buffer of the caller's: the answer is written into it, nothing is sent back.
      const answer = await s.run(feeds, { [s.outputNames[0]]: new ort.Tensor('float32', output.into, output.dims) });
      // The binding copies every output into a fresh ArrayBuffer as well (22.5 MB for eight
      // tiles of the bundled model): detached, its memory goes back now, warm for the next
      // batch, instead of at a later collection.
      const copy = answer[s.outputNames[0]].data.buffer;
      if (copy instanceof ArrayBuffer && copy !== output.into.buffer) copy.transfer(0);
      parentPort.postMessage({ id });
      return;
    }
    const result = await s.run(feeds);
    const out = result[s.outputNames[0]];
    const data = out.data;
    try {
      parentPort.postMessage({ id, data, dims: out.dims }, [data.buffer]);
    } catch {
      parentPort.postMessage({ id, data, dims: out.dims });
    }
  } catch (e) {
    parentPort.postMessage({ id, error: String((e && e.message) || e) });
  }
});
`;

interface Pending {
  resolve: (data: Float32Array) => void;
  reject: (err: Error) => void;
  /** The caller's shared buffer the answer was written into. */
  output?: Float32Array;
}

type Message =
  | { kind: 'ready'; inputs: string[]; outputs: string[] }
  | { kind: 'failed'; error: string }
  | { id: number; data?: Float32Array; dims?: number[] }
  | { id: number; error: string };

/** A buffer on a `SharedArrayBuffer` that the answer is written into, and the answer's shape. */
export interface SharedOutput {
  into: Float32Array;
  dims: readonly number[];
}

/**
 * Runs `[N, 3, S, S]` batches of one ONNX file on a worker thread, one at a time, in order.
 * With `output`, the answer is written into its shared buffer, which is the answer.
 */
export interface WorkerRunner {
  run(input: Float32Array, dims: readonly number[], output?: SharedOutput): Promise<Float32Array>;
}

export function startWorkerRunner(onnxPath: string, options: Record<string, unknown>): Promise<WorkerRunner> {
  const worker = new Worker(workerSource, {
    eval: true,
    workerData: { ort: require.resolve('onnxruntime-node'), path: onnxPath, options },
  });
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
  const started = new Promise<WorkerRunner>((resolve, reject) => {
    worker.on('message', (message: Message) => {
      if ('kind' in message) {
        if (message.kind === 'failed') {
          reject(new ComputeError('UnsupportedModel', `${onnxPath}: ${message.error}`));
          void worker.terminate();
        } else if (message.inputs.length !== 1 || message.outputs.length !== 1) {
          reject(new ComputeError('UnsupportedModel', `${onnxPath}: one input and one output expected`));
          void worker.terminate();
        } else {
          // An idle session must not keep a script's process alive; a pending batch must.
          worker.unref();
          resolve({
            run(input, dims, output) {
              if (broken) return Promise.reject(broken);
              const id = next++;
              return new Promise<Float32Array>((res, rej) => {
                if (pending.size === 0) worker.ref();
                pending.set(id, { resolve: res, reject: rej, output: output?.into });
                // Copied (or shared), not transferred: the caller may retry the same input tile by tile.
                worker.postMessage({
                  id,
                  input,
                  dims: [...dims],
                  output: output && { into: output.into, dims: [...output.dims] },
                });
              });
            },
          });
        }
        return;
      }
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (pending.size === 0) worker.unref();
      if (!waiting) return;
      if ('error' in message) waiting.reject(new Error(message.error));
      else if (waiting.output) waiting.resolve(waiting.output);
      // Cloned into this thread's realm, which under Jest is not the test's: no instanceof.
      else if (message.data && Object.prototype.toString.call(message.data) === '[object Float32Array]')
        waiting.resolve(message.data);
      else waiting.reject(new ComputeError('UnsupportedModel', `${onnxPath} answered no float32 tensor`));
    });
  });
  return started;
}
