import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { SessionReply, SessionRequest, SessionWorkerData } from './worker-session';

/** The ONNX session of `worker-session.ts`, on a thread of its own. */
const port = parentPort;
if (!port) throw new Error('session-worker runs on a worker thread');
const { path, options } = workerData as SessionWorkerData;
const reply = (message: SessionReply, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);
const errorText = (e: unknown) => String((e instanceof Error && e.message) || e);

const ready = ort.InferenceSession.create(path, options);
ready.then(
  (s) => reply({ kind: 'ready', inputs: [...s.inputNames], outputs: [...s.outputNames] }),
  (e: unknown) => reply({ kind: 'failed', error: errorText(e) }),
);

port.on('message', async (request: SessionRequest) => {
  const { id } = request;
  try {
    const s = await ready;
    const feeds = { [s.inputNames[0]!]: new ort.Tensor('float32', request.input, request.dims) };
    const outputName = s.outputNames[0]!;
    if (request.output) {
      // The caller's shared buffer: the answer is written into it, nothing is sent back.
      const { into, dims } = request.output;
      const answer = await s.run(feeds, { [outputName]: new ort.Tensor('float32', into, dims) });
      // The binding also copies every output into a fresh ArrayBuffer: detached now, its memory
      // is reused by the next batch instead of waiting for a collection.
      const copy = answer[outputName]?.data;
      if (ArrayBuffer.isView(copy) && copy.buffer instanceof ArrayBuffer && copy.buffer !== into.buffer)
        (copy.buffer as ArrayBuffer & { transfer(length: number): ArrayBuffer }).transfer(0);
      reply({ kind: 'answered', id });
      return;
    }
    const out = (await s.run(feeds))[outputName];
    if (!(out?.data instanceof Float32Array)) {
      reply({ kind: 'answer', id, data: null });
      return;
    }
    const data = out.data;
    try {
      reply({ kind: 'answer', id, data }, data.buffer instanceof ArrayBuffer ? [data.buffer] : []);
    } catch {
      // A buffer the binding does not let go of is copied instead.
      reply({ kind: 'answer', id, data });
    }
  } catch (e) {
    reply({ kind: 'error', id, error: errorText(e) });
  }
});
