export {
  type ClassicalOptions,
  createClassicalSegmenter,
  defaultClassicalOptions,
  segmentClassical,
} from './classical';
export { distanceToBackground, squaredDistanceToSites } from './distance';
export { expandLabels } from './expand';
export { type InstanceOptions, nucleusInstances } from './nuclei';
export { createOnnxSegmenter, defaultModelInstanceOptions, type OnnxSegmenterOptions } from './onnx';
export { type SegmentationQuality, segmentationQuality } from './quality';
export { EOSIN_OD, glassPixels, HEMATOXYLIN_OD, type StainDensities, stainDensities } from './stain';
export type { LabelImage, Segmenter, TileSegmentation } from './types';
export { seededWatershed, type WatershedInput } from './watershed';
