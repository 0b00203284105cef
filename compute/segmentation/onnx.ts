import * as ort from 'onnxruntime-node';
import { ComputeError } from '../errors';
import type { RgbImage } from '../image';
import { expandLabels } from './expand';
import { defaultInstanceOptions, type InstanceOptions, nucleusInstances } from './nuclei';
import { planarInput, resamplePlane } from './resample';
import type { Segmenter, TileSegmentation } from './types';

/**
 * A model-based nucleus segmenter behind the same `Segmenter` contract as the classical one.
 * The model proposes, per pixel, how likely it is nucleus (and optionally how central); the
 * instances come from the same seeded watershed, filters and cell expansion (nuclei.ts,
 * expand.ts), so a trained model changes what is foreground, not how objects are cut.
 *
 * The output convention, which StarDist- or HoVer-Net-style models map onto by a thin export
 * wrapper:
 * - one input, float32 `[N, 3, H, W]`, RGB in 0..1 at the model's mpp, `H` and `W` free (a
 *   fully convolutional model); the segmenter feeds the whole tile at once, padded on every
 *   side by `halo` pixels that repeat the edge;
 * - an output named `outputs.foreground`, float32 `[N, 1, h, w]`: the probability that a pixel
 *   is nucleus; `h, w` are either the input's size (the halo is cropped here) or the input's
 *   less `2 halo` (the model consumed it);
 * - optionally an output named `outputs.centre`, of the same shape: higher towards nucleus
 *   centres (a distance map, a centroid probability). Its peaks seed the watershed; without it
 *   the seeds are the peaks of the distance transform of the thresholded foreground.
 * A tile at another scale than the model's is resampled to it and the maps back (bilinear).
 */
export interface OnnxSegmenterOptions extends Partial<InstanceOptions> {
  /** Absolute path of the ONNX file. */
  onnxFile: string;
  /** Identifies the model in provenance, e.g. the registry version. */
  modelVersion: string;
  /** Microns per pixel of the model's input. */
  mpp: number;
  /** Context pixels around the tile, at the model's scale. */
  halo: number;
  outputs: { foreground: string; centre?: string };
  /** Foreground probability at or above which a pixel is nucleus; default 0.5. */
  foregroundThreshold?: number;
  /** How far a cell reaches beyond its nucleus, µm; default 5. */
  cellExpansionUm?: number;
  /** Threads one inference may use; default 1. */
  intraOpNumThreads?: number;
}

/** Tiles whose scale is within this fraction of the model's are fed as they are. */
const scaleTolerance = 0.02;

export function createOnnxSegmenter(options: OnnxSegmenterOptions): Segmenter {
  const instance: InstanceOptions = { ...defaultInstanceOptions, ...definedOnly(options) };
  const threshold = options.foregroundThreshold ?? 0.5;
  const expansionUm = options.cellExpansionUm ?? 5;
  const parameters: Record<string, number | string | boolean> = {
    ...instance,
    model: options.modelVersion,
    modelMpp: options.mpp,
    halo: options.halo,
    foregroundOutput: options.outputs.foreground,
    centreOutput: options.outputs.centre ?? '',
    foregroundThreshold: threshold,
    cellExpansionUm: expansionUm,
  };
  return {
    name: 'onnx-watershed',
    version: '1.0.0',
    parameters: Object.freeze(parameters),
    async segment(tile, mpp, signal) {
      if (!(mpp > 0)) throw new RangeError(`mpp must be positive, not ${mpp}`);
      signal?.throwIfAborted();
      const session = await openSegmentationSession(options);
      const maps = await modelMaps(session, tile, mpp, options);
      signal?.throwIfAborted();
      const mask = new Uint8Array(maps.foreground.length);
      for (let i = 0; i < mask.length; i++) mask[i] = maps.foreground[i]! >= threshold ? 1 : 0;
      const { width, height } = tile;
      const nuclei = nucleusInstances({ mask, width, height, centre: maps.centre }, mpp, instance);
      return { nuclei, cells: expandLabels(nuclei, expansionUm / mpp) } satisfies TileSegmentation;
    },
  };
}

function definedOnly(options: Partial<InstanceOptions>): Partial<InstanceOptions> {
  return Object.fromEntries(
    Object.entries(options).filter(([key, value]) => key in defaultInstanceOptions && value !== undefined),
  );
}

interface ModelMaps {
  /** At the tile's size. */
  foreground: Float32Array;
  centre?: Float32Array;
}

/** Runs the model on the whole tile (resampled and padded) and brings its maps back to the tile's pixels. */
async function modelMaps(
  session: ort.InferenceSession,
  tile: RgbImage,
  mpp: number,
  options: OnnxSegmenterOptions,
): Promise<ModelMaps> {
  let scale = mpp / options.mpp;
  if (Math.abs(scale - 1) <= scaleTolerance) scale = 1;
  const width = Math.max(1, Math.round(tile.width * scale));
  const height = Math.max(1, Math.round(tile.height * scale));
  const input = planarInput(tile, scale, width, height, options.halo);
  const [inputName] = session.inputNames;
  const dims = [1, 3, input.height, input.width];
  let result: ort.InferenceSession.OnnxValueMapType;
  try {
    result = await session.run({ [inputName!]: new ort.Tensor('float32', input.data, dims) });
  } catch (cause) {
    throw new ComputeError('UnsupportedModel', `${options.onnxFile}: inference on [${dims}] failed`, {
      cause,
    });
  }
  const back = (name: string) =>
    resamplePlane(croppedMap(result, name, width, height, options), width, height, tile.width, tile.height);
  return {
    foreground: back(options.outputs.foreground),
    centre: options.outputs.centre === undefined ? undefined : back(options.outputs.centre),
  };
}

/** The `[1, 1, h, w]` output `name` as a plane of the unpadded size; anything else breaks the convention. */
function croppedMap(
  result: ort.InferenceSession.OnnxValueMapType,
  name: string,
  width: number,
  height: number,
  { halo, onnxFile }: OnnxSegmenterOptions,
): Float32Array {
  const tensor = result[name];
  const data = tensor?.data;
  const dims = tensor?.dims ?? [];
  if (!(data instanceof Float32Array) || dims.length !== 4 || dims[0] !== 1 || dims[1] !== 1) {
    throw new ComputeError('UnsupportedModel', `${onnxFile}: output ${name} is not float32 [1, 1, h, w]`);
  }
  const [, , h, w] = dims as [number, number, number, number];
  if (h === height && w === width) return data;
  if (h !== height + 2 * halo || w !== width + 2 * halo) {
    throw new ComputeError(
      'UnsupportedModel',
      `${onnxFile}: output ${name} is ${w} x ${h}, neither ${width} x ${height} nor that plus the halo`,
    );
  }
  const out = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    const from = (y + halo) * w + halo;
    out.set(data.subarray(from, from + width), y * width);
  }
  return out;
}

const sessions = new Map<string, Promise<ort.InferenceSession>>();

/**
 * The session of a model file, created once per process and thread count, with its inputs and
 * outputs checked against the convention before any tile is run.
 */
function openSegmentationSession(options: OnnxSegmenterOptions): Promise<ort.InferenceSession> {
  const threads = options.intraOpNumThreads ?? 1;
  const key = `${options.onnxFile}\u0000${threads}`;
  let session = sessions.get(key);
  if (!session) {
    session = createSession(options, threads);
    // A failed load is not cached: the next job may find the file repaired.
    session.catch(() => sessions.delete(key));
    sessions.set(key, session);
  }
  return session;
}

async function createSession(options: OnnxSegmenterOptions, threads: number): Promise<ort.InferenceSession> {
  if (!(options.mpp > 0) || !Number.isSafeInteger(options.halo) || options.halo < 0) {
    throw new RangeError(`segmentation model ${options.modelVersion}: invalid mpp or halo`);
  }
  const session = await ort.InferenceSession.create(options.onnxFile, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const wanted = [options.outputs.foreground, ...(options.outputs.centre ? [options.outputs.centre] : [])];
  const missing = wanted.filter((name) => !session.outputNames.includes(name));
  if (session.inputNames.length !== 1 || missing.length > 0) {
    await session.release();
    throw new ComputeError(
      'UnsupportedModel',
      `${options.onnxFile}: one input and outputs ${wanted.join(', ')} expected; it has inputs ` +
        `${session.inputNames.join(', ')} and outputs ${session.outputNames.join(', ')}`,
    );
  }
  return session;
}
