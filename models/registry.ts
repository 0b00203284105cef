import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * The model registry: each prediction model version, whether it can still be dispatched, and
 * for dispatchable ones its ONNX file, input scale, tile size, halo and output channels. The
 * marker catalog is built from it.
 *
 * The bundled v0.7 is an untrained baseline (scripts/make-baseline-model.py: colour
 * deconvolution and fixed per-marker rules), NOT a trained virtual multiplexing model; see the
 * README for what it predicts and how to register a trained model in its place.
 */
export interface MarkerChannel {
  name: string;
  /** Pinned and readable on public samples. */
  publicPanel: boolean;
}

export interface DispatchableModel {
  version: string;
  state: 'dispatchable';
  /** Output channels, in the model's output order. */
  channels: readonly MarkerChannel[];
  /** The ONNX file, relative to models/. */
  onnxFile: string;
  /** Microns per pixel of the model's input. */
  mpp: number;
  /** Output tile side in model pixels; the input is `tileSize + 2 * halo` a side. */
  tileSize: number;
  halo: number;
  /** The range the outputs are meant to span (display windows). */
  outputRange: readonly [number, number];
}

export type ModelEntry = { version: string; state: 'sunset' } | DispatchableModel;

const v07Channels: readonly MarkerChannel[] = [
  { name: 'DAPI', publicPanel: true },
  { name: 'PanCK', publicPanel: true },
  { name: 'CD3', publicPanel: true },
  { name: 'CD4', publicPanel: false },
  { name: 'CD8', publicPanel: true },
  { name: 'CD20', publicPanel: true },
  { name: 'CD45', publicPanel: false },
  { name: 'CD68', publicPanel: true },
  { name: 'Ki67', publicPanel: false },
  { name: 'aSMA', publicPanel: false },
  { name: 'FOXP3', publicPanel: false },
  { name: 'PD-L1', publicPanel: false },
  { name: 'CD31', publicPanel: false },
  { name: 'Vimentin', publicPanel: false },
];

export const modelRegistry: readonly ModelEntry[] = [
  { version: 'v0.4', state: 'sunset' },
  { version: 'v0.5', state: 'sunset' },
  {
    version: 'v0.7',
    state: 'dispatchable',
    channels: v07Channels,
    onnxFile: 'baseline-v0.7.onnx',
    mpp: 0.5,
    tileSize: 224,
    halo: 8,
    outputRange: [0, 1],
  },
];

export const CURRENT_MODEL = 'v0.7';

/** The marker catalog: the channels of the current default model. */
export function markerCatalog(): readonly MarkerChannel[] {
  return dispatchableModel(CURRENT_MODEL).channels;
}

export function dispatchableModel(version: string): DispatchableModel {
  const entry = modelRegistry.find((e) => e.version === version);
  if (entry?.state !== 'dispatchable') throw new Error(`model ${version} is not dispatchable`);
  return entry;
}

// The files sit beside this module in the source tree; the compiled module lives in dist/models.
const MODELS_DIR = [__dirname, path.join(__dirname, '..', '..', 'models')].find((dir) =>
  existsSync(path.join(dir, 'baseline-v0.7.onnx')),
);

/** Absolute path of a model file named in the registry. */
export function modelFilePath(file: string): string {
  if (!MODELS_DIR) throw new Error('models/ with the bundled ONNX files not found');
  return path.join(MODELS_DIR, file);
}

/**
 * What compute's predictor needs to know of a dispatchable model (structurally its `ModelSpec`;
 * models/ does not import compute/).
 */
export function modelSpec(version: string): {
  version: string;
  onnxPath: string;
  mpp: number;
  tileSize: number;
  halo: number;
  channels: string[];
  outputRange: [number, number];
} {
  const model = dispatchableModel(version);
  return {
    version: model.version,
    onnxPath: modelFilePath(model.onnxFile),
    mpp: model.mpp,
    tileSize: model.tileSize,
    halo: model.halo,
    channels: model.channels.map((c) => c.name),
    outputRange: [model.outputRange[0], model.outputRange[1]],
  };
}

/**
 * Nucleus segmentation models, for the model-based segmenter (compute/segmentation/onnx.ts, whose
 * comment states the input and output convention every entry follows).
 *
 * The bundled v1 is UNTRAINED (scripts/make-segmentation-model.py): the classical front end as an
 * ONNX graph, i.e. hematoxylin density by colour deconvolution, lightly smoothed, against a cut
 * of mean + 0.4 standard deviations of the tile's tissue densities. It gives the model path a real
 * ONNX Runtime run end to end; it is no better than the classical segmenter, and a trained model
 * (StarDist, HoVer-Net exported to the convention) replaces it by a new entry here.
 */
export interface SegmentationModel {
  version: string;
  /** The ONNX file, relative to models/. */
  onnxFile: string;
  /** Microns per pixel of the model's input. */
  mpp: number;
  /** Tile side, in model pixels, a slide tiler should feed (the model itself takes any size). */
  tileSize: number;
  /** Context pixels the model needs around a tile, at its scale. */
  halo: number;
  /** Output names: foreground probability, and a centre map when the model has one. */
  outputs: { foreground: string; centre?: string };
}

export const segmentationModels: readonly SegmentationModel[] = [
  {
    version: 'segmentation-baseline-v1',
    onnxFile: 'segmentation-baseline-v1.onnx',
    mpp: 0.5,
    tileSize: 1024,
    halo: 2,
    outputs: { foreground: 'foreground' },
  },
];

export const CURRENT_SEGMENTATION_MODEL = 'segmentation-baseline-v1';

/** What the model-based segmenter needs of a registered model: its file as an absolute path. */
export function segmentationModelSpec(version: string): SegmentationModel & { onnxPath: string } {
  const model = segmentationModels.find((m) => m.version === version);
  if (!model) throw new Error(`segmentation model ${version} is not registered`);
  return { ...model, onnxPath: modelFilePath(model.onnxFile) };
}

/**
 * The credit grid (DECISIONS.md, Credits): 224 x 224 pixels at 0.5 µm per pixel, anchored at
 * level-0 (0, 0), partial edge patches included. compute/tissue/patches.ts marks the tissue
 * positions of this grid; a unit test holds the two to the same positions.
 */
export const CREDIT_GRID = { patchSizePx: 224, patchMpp: 0.5 } as const;

/**
 * Every position of the credit grid over a whole slide of `widthPx x heightPx` at `mpp`: the upper
 * bound of its tissue patch count, which is what a submission before the tissue mask reserves.
 */
export function creditGridPositions(widthPx: number, heightPx: number, mpp: number): number {
  const size = (CREDIT_GRID.patchSizePx * CREDIT_GRID.patchMpp) / mpp;
  return Math.ceil(widthPx / size) * Math.ceil(heightPx / size);
}
