import * as ort from 'onnxruntime-node';
import { ComputeError } from '../errors';
import { startWorkerRunner } from './worker-session';

/**
 * What compute needs to know of a prediction model. The registry (models/) builds it; compute
 * never imports the registry, so a script can run a model file it describes by hand.
 */
export interface ModelSpec {
  version: string;
  /** Absolute path of the ONNX file. */
  onnxPath: string;
  /** Microns per pixel of the model's input. */
  mpp: number;
  /** Side of the output tile, in model pixels. */
  tileSize: number;
  /** Context around the tile: the input is `tileSize + 2 * halo` a side, the output `tileSize`. */
  halo: number;
  /** Output channels, in the model's order. */
  channels: readonly string[];
  /** The range the outputs are meant to span; display windows and histograms are bounded by it. */
  outputRange: readonly [number, number];
}

export interface ModelSessionOptions {
  /** Threads one inference may use; default 1, so that reading and writing keep a core. */
  intraOpNumThreads?: number;
  /**
   * Where batches run: `worker` (default) on a worker thread of its own, so the main thread
   * reads and writes meanwhile; `main` on the calling thread, blocking it for each batch.
   */
  thread?: 'worker' | 'main';
}

/**
 * An inference session of one model file. `run` takes `count` tiles, planar RGB 0..255 float32
 * `[count, 3, S, S]` (S = tile + 2 halo), and answers `[count, C, T, T]`: written into `output`
 * when one of that length is given (a caller's reused, possibly shared, buffer), which is then
 * the answer.
 */
export interface ModelSession {
  readonly spec: ModelSpec;
  run(input: Float32Array, count: number, output?: Float32Array): Promise<Float32Array>;
}

/** A cached session and how to end it (its thread, or its native session). */
type OpenSession = ModelSession & { close(): Promise<void> };

const sessions = new Map<string, Promise<OpenSession>>();

/**
 * The session of `spec`'s file, created once per process (per file and thread count): loading
 * the graph and planning its kernels costs far more than a batch, and a session runs one batch
 * at a time anyway.
 */
export function openModelSession(spec: ModelSpec, options: ModelSessionOptions = {}): Promise<ModelSession> {
  const threads = options.intraOpNumThreads ?? 1;
  const thread = options.thread ?? 'worker';
  const key = `${spec.onnxPath}\u0000${threads}\u0000${thread}`;
  let session = sessions.get(key);
  if (!session) {
    session = thread === 'worker' ? createWorkerSession(spec, threads) : createSession(spec, threads);
    // A failed load is not cached: the next job may find the file repaired.
    const opening = session;
    session.catch(() => {
      if (sessions.get(key) === opening) sessions.delete(key);
    });
    sessions.set(key, session);
  }
  return session;
}

/**
 * Ends every session this process opened (a worker process that stops, a test file that is
 * done): an idle session's thread keeps no process alive, but it holds the model's memory, and a
 * process that ends with it still there is slow to exit. The next `openModelSession` opens afresh.
 */
export async function closeModelSessions(): Promise<void> {
  const open = [...sessions.values()];
  sessions.clear();
  await Promise.all(open.map((session) => session.then((s) => s.close()).catch(() => {})));
}

async function createSession(spec: ModelSpec, threads: number): Promise<OpenSession> {
  checkSpec(spec);
  const inner = await ort.InferenceSession.create(spec.onnxPath, sessionOptions(threads));
  const [inputName] = inner.inputNames;
  const [outputName] = inner.outputNames;
  if (inner.inputNames.length !== 1 || inner.outputNames.length !== 1 || !inputName || !outputName) {
    throw new ComputeError('UnsupportedModel', `${spec.onnxPath}: one input and one output expected`);
  }
  return {
    spec,
    close: () => inner.release(),
    async run(input, count, output) {
      const dims = inputDims(spec, input, count);
      const feeds = { [inputName]: new ort.Tensor('float32', input, dims) };
      if (output) {
        checkedOutput(spec, output, count);
        const fetches = { [outputName]: new ort.Tensor('float32', output, outputDims(spec, count)) };
        await inner.run(feeds, fetches);
        return output;
      }
      const data = (await inner.run(feeds))[outputName]?.data;
      return checkedOutput(spec, data instanceof Float32Array ? data : undefined, count);
    },
  };
}

async function createWorkerSession(spec: ModelSpec, threads: number): Promise<OpenSession> {
  checkSpec(spec);
  const runner = await startWorkerRunner(spec.onnxPath, sessionOptions(threads));
  return {
    spec,
    close: () => runner.close(),
    async run(input, count, output) {
      const dims = inputDims(spec, input, count);
      if (output && isShared(output)) {
        checkedOutput(spec, output, count);
        await runner.run(input, dims, { into: output, dims: outputDims(spec, count) });
        return output;
      }
      const answer = checkedOutput(spec, await runner.run(input, dims), count);
      if (!output) return answer;
      // A buffer of this thread alone would reach the worker as a copy: the answer comes back.
      checkedOutput(spec, output, count).set(answer);
      return output;
    },
  };
}

/** The `[N, 3, S, S]` shape of `count` whole input tiles; anything else is the caller's bug. */
function inputDims(spec: ModelSpec, input: Float32Array, count: number): number[] {
  const side = spec.tileSize + 2 * spec.halo;
  if (input.length !== count * 3 * side * side) {
    throw new RangeError(`input of ${input.length} floats is not ${count} tiles of 3 x ${side} x ${side}`);
  }
  return [count, 3, side, side];
}

/** On a `SharedArrayBuffer` (of any realm: Jest's test realm has its own constructors). */
function isShared(array: Float32Array): boolean {
  return Object.prototype.toString.call(array.buffer) === '[object SharedArrayBuffer]';
}

function outputDims(spec: ModelSpec, count: number): number[] {
  return [count, spec.channels.length, spec.tileSize, spec.tileSize];
}

/** The model's answer, if it is `[N, C, T, T]` float32 as the registry says; else the model is wrong. */
function checkedOutput(spec: ModelSpec, data: Float32Array | undefined, count: number): Float32Array {
  const expected = count * spec.channels.length * spec.tileSize * spec.tileSize;
  if (data === undefined || data.length !== expected) {
    throw new ComputeError(
      'UnsupportedModel',
      `${spec.version} answered ${data?.length ?? 'no'} floats, not float32 [${count}, ${spec.channels.length}, ${spec.tileSize}, ${spec.tileSize}]`,
    );
  }
  return data;
}

function sessionOptions(threads: number) {
  return {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential' as const,
    graphOptimizationLevel: 'all' as const,
  };
}

/** Runs `input` (whole tiles, `[N, 3, S, S]`) through the session: `[N, C, T, T]`. */
export function inferBatch(session: ModelSession, input: Float32Array): Promise<Float32Array> {
  const count = input.length / inputTileLength(session.spec);
  if (!Number.isSafeInteger(count))
    throw new RangeError(`input of ${input.length} floats is not whole tiles`);
  return session.run(input, count);
}

/** Floats in one input tile: `3 * (T + 2h)^2`. */
export function inputTileLength(spec: ModelSpec): number {
  const side = spec.tileSize + 2 * spec.halo;
  return 3 * side * side;
}

function checkSpec(spec: ModelSpec): void {
  const ok =
    Number.isFinite(spec.mpp) &&
    spec.mpp > 0 &&
    Number.isSafeInteger(spec.tileSize) &&
    spec.tileSize > 0 &&
    Number.isSafeInteger(spec.halo) &&
    spec.halo >= 0 &&
    spec.channels.length > 0 &&
    new Set(spec.channels).size === spec.channels.length &&
    spec.outputRange[1] > spec.outputRange[0];
  if (!ok) throw new RangeError(`model ${spec.version}: invalid spec ${JSON.stringify(spec)}`);
}
